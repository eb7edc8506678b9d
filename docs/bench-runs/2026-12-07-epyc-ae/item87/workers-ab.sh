#!/bin/bash
# Item 87 (BENCHMARKS.md): alternating rounds of a standalone server whose HTTP runtime has W
# worker threads (tokio's TOKIO_WORKER_THREADS; the default is one per core), a fresh data
# directory each run, the benchmark's client (default runtime) through --url. One line per
# run: round, wW, then the rates `bench e2e` prints (enqueue: bulk, 64 in flight, 64 in
# flight one request each, sequential; e2e: one per variant).
#
#   workers-ab.sh ROUNDS FW "1 2" --scenarios enqueue --n 100000 --single-n 1000 \
#       --single-conc-n 60000 --phase-cap-s 4
#   python3 docs/bench-runs/ab-paired.py OUT w2 w1 COLUMN
set -u
ROUNDS=$1; shift; FW=$1; shift; WS="$1"; shift
for r in $(seq 1 "$ROUNDS"); do
  list=$WS
  if [ $((r % 2)) = 0 ]; then list=$(echo $WS | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for w in $list; do
    d=$(mktemp -d)
    TOKIO_WORKER_THREADS=$w "$FW" serve --data "$d" --listen 127.0.0.1:7799 > /dev/null 2>&1 &
    sp=$!
    until curl -sf http://127.0.0.1:7799/readyz > /dev/null; do sleep 0.1; done
    v=$("$FW" bench e2e --url http://127.0.0.1:7799 "$@" 2>/dev/null \
      | grep -o '"e2e_jobs_per_s":[0-9.]*\|"jobs_per_s":[0-9.]*' | cut -d: -f2 | tr '\n' ' ')
    echo "$r w$w $v"
    kill $sp; wait $sp; rm -rf "$d"
  done
done
