#!/bin/bash
# A long-running server's throughput while its snapshots grow, two or more builds alternating:
# each round starts a server of each build on a fresh data directory, runs RUNS back-to-back
# `bench e2e` batched runs of N jobs against it (the client is always CLIENT, so only the server
# differs), then reads the server's log for its snapshots. One line per server: round, build,
# each run's end-to-end jobs/s, then the snapshots' count, their total encoding milliseconds
# (the writer's: every turn waits), `store_ms` (what the commits waited for at each hand-over:
# the whole storing before item 52, which writes the file beside the commits) and, where the
# build has the metric (after item 52), `stored_ms`, the whole storing from
# `fairway_snapshot_store_seconds_sum` (scraped before the clean stop, so without its snapshot),
# and `rss_mb`, the server's resident memory after the runs (VmRSS, item 54).
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
    stored=$(curl -s http://127.0.0.1:18401/metrics \
      | awk '/^fairway_snapshot_store_seconds_sum/ {printf "%d", $2 * 1000}')
    rss=$(awk '/^VmRSS/ {printf "%d", $2 / 1024}' /proc/$pid/status)
    kill -INT $pid; wait $pid 2>/dev/null
    snaps=$(grep -c 'snapshot lsn=' "$log")
    enc=$(grep -o 'encode_ms=[0-9]*' "$log" | cut -d= -f2 | paste -sd+ | bc)
    sto=$(grep -o 'store_ms=[0-9]*' "$log" | cut -d= -f2 | paste -sd+ | bc)
    rm -rf "$data" "$log"
    echo "$r $(basename "$b")$rates snapshots=$snaps encode_ms=$enc store_ms=$sto${stored:+ stored_ms=$stored} rss_mb=$rss"
  done
done
