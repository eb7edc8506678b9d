#!/bin/bash
# One side-by-side run, back to back, as BENCHMARKS.md reports it: Fairway's scenarios, the
# peer harness's three interleaved repeats, Fairway's scenarios twice more, a warm server, then
# the engine, memory and restart benchmarks. Raw JSON lines and a timeline go to $OUT.
#
#   cargo build --release -p fairway
#   cp -r ../shared/peers /tmp/peers            # the harness writes beside itself
#   docs/bench-runs/run-side-by-side.sh         # about 30 minutes on 2 cores
#
# Knobs: FW (the binary), OUT (the folder), PEERS_DIR (the harness's copy), PEERS_JSONL (the
# peers' lines of an earlier run of the same hour: Fairway's parts only, no peers, no warm server).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
FW=${FW:-$PWD/target/release/fairway}
OUT=${OUT:-$PWD/docs/bench-runs/$(date -u +%F)}
PEERS_DIR=${PEERS_DIR:-/tmp/peers}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)   # the peers run from their own folder
T=$OUT/timeline.txt; : > "$T"
mark() { echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg) $*" | tee -a "$T"; }
mark start "fairway $(git rev-parse --short HEAD)"
mark "fairway e2e rep 1"; "$FW" bench e2e --rep 1 > "$OUT/e2e.jsonl" 2>>"$OUT/stderr.log"
with_peers=no
if [ -z "${PEERS_JSONL:-}" ]; then
  with_peers=yes
  mark "peers x3"
  (cd "$PEERS_DIR" && REPEATS=3 VARIANTS=0 ./run-all.sh > "$OUT/peers.log" 2>&1)
  cp "$PEERS_DIR/results/latest.jsonl" "$OUT/peers.jsonl"
  PEERS_JSONL=$OUT/peers.jsonl
fi
mark "fairway e2e rep 2"; "$FW" bench e2e --rep 2 >> "$OUT/e2e.jsonl" 2>>"$OUT/stderr.log"
mark "fairway e2e rep 3"; "$FW" bench e2e --rep 3 >> "$OUT/e2e.jsonl" 2>>"$OUT/stderr.log"
if [ "$with_peers" = yes ]; then
  mark "warm server"
  WARM=$(mktemp -d)
  "$FW" serve --data "$WARM" --listen 127.0.0.1:18125 > "$OUT/warm-server.log" 2>&1 &
  WP=$!
  sleep 1.5
  for label in warm-up warm; do
    "$FW" bench e2e --url http://127.0.0.1:18125 --scenarios enqueue,e2e --variants batched,single \
      --label $label >> "$OUT/warm.jsonl" 2>>"$OUT/stderr.log"
  done
  kill $WP; wait $WP; rm -rf "$WARM"
fi
mark "engine key cells"; : > "$OUT/engine_key.jsonl"
for rep in 1 2 3; do
  for capture in "" "--capture-events"; do
    "$FW" bench engine --min-queued 1000 --max-queued 1000 --max-tenants 10 --no-idle --no-seed002 \
      $capture >> "$OUT/engine_key.jsonl" 2>>"$OUT/stderr.log"
    "$FW" bench engine --min-queued 1000000 --max-queued 1000000 --min-tenants 10000 \
      --max-tenants 10000 --no-idle --no-seed002 $capture >> "$OUT/engine_key.jsonl" 2>>"$OUT/stderr.log"
  done
done
# The finished list at its retention (10^6 by default), as in a server that has run longer
# than that: each decision then also forgets the oldest finished job.
mark "engine settled"
"$FW" bench engine --min-queued 1000000 --max-queued 1000000 --min-tenants 10000 \
  --max-tenants 10000 --no-idle --no-seed002 --warmup 1100000 > "$OUT/engine_settled.jsonl" 2>>"$OUT/stderr.log"
mark "engine grid"
"$FW" bench engine --max-queued 1000000 --max-tenants 10000 --decisions 5000 --warmup 1000 \
  > "$OUT/engine_grid.jsonl" 2>>"$OUT/stderr.log"
mark "memory"; "$FW" bench memory --payloads none,small > "$OUT/memory.jsonl" 2>>"$OUT/stderr.log"
mark "restart"; "$FW" bench restart --variants snapshot,clean > "$OUT/restart.jsonl" 2>>"$OUT/stderr.log"
mark done
python3 docs/bench-runs/sidebyside.py "$OUT/e2e.jsonl" "$PEERS_JSONL"
