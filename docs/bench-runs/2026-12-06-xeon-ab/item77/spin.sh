#!/bin/bash
# Item 77 (machine AB): the single-call paths against the server threads' poll before they
# sleep (FAIRWAY_IDLE_SPIN_US), rounds rotating the settings, one fresh server each run, and
# the server's CPU time (utime + stime from /proc) and group commit mean from its /metrics.
#   docs/bench-runs/2026-12-06-xeon-ab/item77/spin.sh ROUNDS FW "SPINS"
# Columns: round, spin µs, sequential jobs/s, 64 in flight, one request each, server CPU s,
# group commit mean µs.
set -u
ROUNDS=${1:-6}; FW=${2:-/tmp/fw-base}; SPINS=${3:-"200 1000 500"}
TICK=$(getconf CLK_TCK)
for r in $(seq 1 "$ROUNDS"); do
  for spin in $SPINS; do
    D=$(mktemp -d)
    FAIRWAY_IDLE_SPIN_US=$spin "$FW" serve --data "$D" --listen 127.0.0.1:18127 > "$D.log" 2>&1 &
    P=$!
    sleep 1.2
    line=$("$FW" bench e2e --url http://127.0.0.1:18127 --scenarios enqueue --variants batched \
      --n 1000 --single-n 5000 --single-conc-n 20000 2>/dev/null | head -1)
    cpu=$(awk -v t="$TICK" '{printf "%.2f", ($14+$15)/t}' /proc/$P/stat)
    gc=$(curl -s http://127.0.0.1:18127/metrics | awk '/^fairway_group_commit_seconds_sum/{s=$2} /^fairway_group_commit_seconds_count/{c=$2} END{printf "%.1f", s/c*1e6}')
    kill $P; wait $P 2>/dev/null; rm -rf "$D" "$D.log"
    echo "$line" | python3 -c "
import json,sys
d=json.loads(sys.stdin.readline())
print($r, $spin, d['single_sequential']['jobs_per_s'], d['single_concurrent']['jobs_per_s'], d['single_concurrent_uncoalesced']['jobs_per_s'], $cpu, $gc)"
  done
done
