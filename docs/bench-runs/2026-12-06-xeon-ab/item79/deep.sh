#!/bin/bash
# Item 79 (machine AB): a snapshot's encoding with a deep queue. A fresh server of each build
# takes 10^6 jobs in batches of 1,000, then the benchmark leases and completes them all (its
# clean-up against a `--url` server), and the server stops cleanly; its log's snapshot lines
# give each snapshot's live jobs and the writer's encoding time. One line per
# round and build: round, build, bulk jobs/s, then live_jobs:encode_ms for every snapshot
# (the last one the clean stop's).
#   docs/bench-runs/2026-12-06-xeon-ab/item79/deep.sh ROUNDS BIN_A BIN_B
set -u
rounds=$1; shift
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    data=$(mktemp -d); log=$(mktemp)
    "$b" serve --data "$data" --listen 127.0.0.1:18402 > "$log" 2>&1 & pid=$!
    sleep 1.2
    rate=$("$1" bench e2e --url http://127.0.0.1:18402 --scenarios enqueue --variants batched \
      --n 1000000 --single-n 100 --single-conc-n 100 2>/dev/null \
      | python3 -c 'import sys,json; print(json.loads(sys.stdin.readline())["bulk"]["jobs_per_s"])')
    kill -INT $pid; wait $pid 2>/dev/null
    snaps=$(grep 'snapshot lsn=' "$log" | sed -E 's/.*live_jobs=([0-9]+) encode_ms=([0-9]+).*/\1:\2/' | tr '\n' ' ')
    echo "$r $(basename "$b") $rate $snaps"
    rm -rf "$data" "$log"
  done
done
