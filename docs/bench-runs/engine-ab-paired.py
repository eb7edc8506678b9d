"""Paired medians of two builds in an engine-ab.sh file (first used for BENCHMARKS.md item 88).

usage: engine-ab-paired.py FILE OLD NEW [COLUMN]
  OLD, NEW: the binaries' file names, as tagged; COLUMN: the figure compared,
  ns_per_decision_p50 unless given (ns_per_submit_p50: the replacements' submissions, item 90)

Per policy, key cell and events mode: each build's median of COLUMN, the median of the
rounds' ratios NEW/OLD, and in how many rounds NEW was faster; then each build's runs.
"""
import collections
import json
import statistics as st
import sys

if len(sys.argv) not in (4, 5):
    sys.exit(__doc__)
path, old, new = sys.argv[1:4]
column = sys.argv[4] if len(sys.argv) == 5 else "ns_per_decision_p50"
runs = collections.defaultdict(dict)
for line in open(path):
    if not line.strip():
        continue
    r = json.loads(line)
    cell = (r["policy"], r["queued"], r["tenants"], r["events_captured"], r["round"])
    runs[cell][r["bin"]] = r[column]
cells = sorted({k[:4] for k in runs}, key=lambda c: (c[0], -c[1], c[3]))
for pol, queued, tenants, captured in cells:
    pairs = [v for k, v in sorted(runs.items()) if k[:4] == (pol, queued, tenants, captured)
             and old in v and new in v]
    if not pairs:
        continue
    a = [v[old] for v in pairs]
    b = [v[new] for v in pairs]
    ratio = st.median(y / x for x, y in zip(a, b))
    faster = sum(y < x for x, y in zip(a, b))
    mode = " captured" if captured else ""
    print(f"{pol:5s} {queued:>8d} x {tenants:<6d}{mode}: {old} {st.median(a):,.0f}, {new} "
          f"{st.median(b):,.0f} ns, paired {ratio:.3f}, {new} faster in {faster} of {len(pairs)}"
          f"  ({old} {a}; {new} {b})")
