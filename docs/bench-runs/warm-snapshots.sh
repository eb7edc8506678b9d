#!/bin/bash
# A long-running server's throughput while its snapshots grow, two or more builds alternating:
# each round starts a server of each build on a fresh data directory, runs RUNS back-to-back
# `bench e2e` batched runs of N jobs against it (the client is always CLIENT, so only the server
# differs), then reads the server's log for its snapshots. One line per server: round, build,
# each run's end-to-end jobs/s, then the snapshots' count and their total encoding and storing
# milliseconds (the writer encodes, the store thread stores; every turn waits behind both).
#
#   CLIENT=/tmp/fw-base RUNS=3 N=500000 docs/bench-runs/warm-snapshots.sh 3 /tmp/fw-old /tmp/fw-new
set -u
R=${1:?rounds}; shift
BINS="$*"
CLIENT=${CLIENT:-${BINS%% *}}
for r in $(seq 1 "$R"); do
  list=$BINS
  if [ $((r % 2)) = 0 ]; then list=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for b in $list; do
    data=$(mktemp -d); log=$(mktemp)
    "$b" serve --data "$data" --listen 127.0.0.1:18401 > "$log" 2>&1 &
    pid=$!
    sleep 1.2
    rates=""
    for _ in $(seq 1 "${RUNS:-3}"); do
      rates="$rates $("$CLIENT" bench e2e --url http://127.0.0.1:18401 --scenarios e2e \
        --variants batched --n "${N:-500000}" 2>/dev/null | grep -o '"e2e_jobs_per_s":[0-9.]*' | cut -d: -f2)"
    done
    kill -INT $pid; wait $pid 2>/dev/null
    snaps=$(grep -c 'snapshot lsn=' "$log")
    enc=$(grep -o 'encode_ms=[0-9]*' "$log" | cut -d= -f2 | paste -sd+ | bc)
    sto=$(grep -o 'store_ms=[0-9]*' "$log" | cut -d= -f2 | paste -sd+ | bc)
    rm -rf "$data" "$log"
    echo "$r $(basename "$b")$rates snapshots=$snaps encode_ms=$enc store_ms=$sto"
  done
done
