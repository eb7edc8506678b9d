# Paired medians of two builds in an engine-ab.sh file (BENCHMARKS.md item 88):
#   python3 paired.py engine-ab.jsonl fw-base fw-touch
# per policy and key cell: each build's median p50, the median of the per-round ratios new/old,
# and in how many rounds the new build was faster.
import json, sys, statistics as st, collections
rows=[json.loads(l) for l in open(sys.argv[1])]
old,new=sys.argv[2],sys.argv[3]
d=collections.defaultdict(dict)
for r in rows:
    d[(r['policy'],r['queued'],r['tenants'],r['round'])][r['bin']]=r['ns_per_decision_p50']
for pol in ('fair','drf','fifo'):
    for q,t in ((1000000,10000),(1000,10)):
        a=[];b=[];ratios=[]
        for k,v in sorted(d.items()):
            if k[0]==pol and k[1]==q and old in v and new in v:
                a.append(v[old]); b.append(v[new]); ratios.append(v[new]/v[old])
        ahead=sum(1 for x in ratios if x<1)
        print(f"{pol:5s} {q:>8d}x{t:<6d} {old} {st.median(a):7.0f}  {new} {st.median(b):7.0f}  paired {st.median(ratios):.3f}  {new} faster in {ahead} of {len(ratios)}   {old}: {a}  {new}: {b}")
