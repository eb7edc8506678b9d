#!/bin/bash
# Item 76: a warm server of each build running two batched runs of 500,000 jobs while probe.py
# submits single jobs one after the other beside them (item 52's harness). One line per round
# and build: round, build, the two runs' jobs/s, the probe's round trips (ms).
#   docs/bench-runs/2026-12-06-epyc-aa/item76/probe.sh ROUNDS BIN_A BIN_B
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../../../.."
rounds=$1; shift
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    data=$(mktemp -d); "$b" serve --data "$data" --listen 127.0.0.1:18401 > /dev/null 2>&1 & pid=$!
    sleep 1.2
    python3 docs/bench-runs/probe.py 127.0.0.1:18401 14 > /tmp/probe.out & pp=$!
    rates=""
    for k in 1 2; do
      rate=$("$1" bench e2e --url http://127.0.0.1:18401 --scenarios e2e --variants batched \
        --n 500000 2>/dev/null | python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())["e2e_jobs_per_s"])')
      rates="$rates $rate"
    done
    wait $pp; kill -INT $pid; wait $pid 2>/dev/null
    echo "$r $(basename "$b")$rates $(cat /tmp/probe.out)"
    rm -rf "$data"
  done
done
