#!/bin/bash
# Alternating runs of two or more builds of `fairway bench e2e`, as BENCHMARKS.md's items 37
# to 40 took them: every round runs each build once, the order flipping every other round.
# One line per run: round, build, then the rates the scenario prints (jobs/s; e2e: end to
# end; enqueue: bulk, 64 in flight, 64 in flight one request each, sequential).
#
#   BINS="/tmp/fw-base /tmp/fw-new" docs/bench-runs/e2e-ab.sh 12 --scenarios e2e --variants batched
#   BINS="/tmp/fw-base /tmp/fw-new" docs/bench-runs/e2e-ab.sh 10 --scenarios enqueue --n 300000 \
#       --single-n 200 --single-conc-n 2000
set -u
ROUNDS=${1:?rounds}; shift
for r in $(seq 1 "$ROUNDS"); do
  list=$BINS
  if [ $((r % 2)) = 0 ]; then list=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for b in $list; do
    v=$("$b" bench e2e "$@" 2>/dev/null \
      | grep -o '"e2e_jobs_per_s":[0-9.]*\|"jobs_per_s":[0-9.]*' | cut -d: -f2 | tr '\n' ' ')
    echo "$r $(basename "$b") $v"
  done
done
