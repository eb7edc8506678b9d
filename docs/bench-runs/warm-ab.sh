#!/bin/bash
# The warm-server A/B of BENCHMARKS.md items 15 and 16: one `fairway serve` on a fresh data
# directory, three rounds of the enqueue and e2e scenarios against it (`--url`), then the
# snapshots' encoding and storing times summed from the server's log.
#
#   docs/bench-runs/warm-ab.sh target/release/fairway label
#
# Prints per round: bulk, single in flight, single sequential, then e2e batched, sdk-worker
# and single (jobs/s); then the snapshot count and total encode and store milliseconds.
set -u
FW=${1:?the fairway binary}
LABEL=${2:-run}
PORT=${PORT:-18300}
DATA=$(mktemp -d)
LOG=$(mktemp)
"$FW" serve --data "$DATA" --listen 127.0.0.1:$PORT > "$LOG" 2>&1 &
SERVER=$!
sleep 1.5
for round in 1 2 3; do
  rates=$("$FW" bench e2e --url http://127.0.0.1:$PORT --scenarios enqueue,e2e 2>/dev/null \
    | grep -o '"e2e_jobs_per_s[^,]*\|"jobs_per_s[^,]*' | cut -d: -f2 | tr '\n' ' ')
  echo "$LABEL round $round: $rates"
done
kill $SERVER; wait $SERVER
grep -a "snapshot lsn" "$LOG" | grep -o "encode_ms=[0-9]* store_ms=[0-9]*" \
  | awk -v L="$LABEL" '{split($1,a,"="); split($2,b,"="); e+=a[2]; s+=b[2]; n++}
      END {print L, "snapshots", n, "encode_ms", e, "store_ms", s}'
rm -rf "$DATA" "$LOG"
