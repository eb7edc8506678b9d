#!/bin/bash
# Alternating timed runs of two or more builds of `fairway bench engine` at the two key cells
# (10^6 queued x 10^4 tenants, 10^3 queued x 10 tenants; fair, drf, fifo), as BENCHMARKS.md's
# item 27 took them. Each JSON line is tagged with the binary's file name and the round.
#
#   cp target/release/fairway /tmp/fairway-new    # and the build to compare, e.g. /tmp/fairway-base
#   docs/bench-runs/engine-ab.sh 5 /tmp/fairway-base /tmp/fairway-new > ab.jsonl
#   CAPTURE=both docs/bench-runs/engine-ab.sh 5 ...   # each cell also with --capture-events (item 53)
#   SETTLED=1 docs/bench-runs/engine-ab.sh 5 ...      # 10^6 x 10^4 only, the finished list at its
#                                                     # retention first (--warmup 1100000, item 92)
#   python3 docs/bench-runs/engine-ab-paired.py ab.jsonl fairway-base fairway-new   # paired medians
#
# Instruction counts, the same on any machine for the same binary (the rig decides 7,000 times
# here: 1,000 warm-up, 5,000 timed, 1,000 counting allocations; divide the total by that):
#   valgrind --tool=callgrind --toggle-collect='*Rig::decide*' BIN bench engine \
#     --min-queued 100000 --max-queued 100000 --min-tenants 10000 --max-tenants 10000 \
#     --no-idle --no-seed002 --policies fair --decisions 5000 --warmup 1000
set -u
modes=("")
if [ "${CAPTURE:-}" = both ]; then modes=("" "--capture-events"); fi
rounds=$1; shift
big="--min-queued 1000000 --max-queued 1000000 --min-tenants 10000 --max-tenants 10000"
cells=("$big" "--min-queued 1000 --max-queued 1000 --max-tenants 10")
if [ "${SETTLED:-}" = 1 ]; then cells=("$big --warmup 1100000"); fi
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    for cell in "${cells[@]}"; do
      for mode in "${modes[@]}"; do
        # shellcheck disable=SC2086
        "$b" bench engine $cell --no-idle --no-seed002 $mode 2>/dev/null |
          sed "s|^{|{\"bin\":\"$(basename "$b")\",\"round\":$r,|"
      done
    done
  done
done
