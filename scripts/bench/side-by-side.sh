#!/usr/bin/env bash
# Runs the peer harness and `fairway bench e2e` on this machine, one after the other, and
# keeps everything BENCHMARKS.md quotes: the JSON lines of both, the machine, and the load
# average sampled every 5 s during the runs (other people's work shares the machine).
#
#   scripts/bench/side-by-side.sh OUT_DIR            # REPEATS=1 by default (about 20 minutes)
#   REPEATS=3 scripts/bench/side-by-side.sh OUT_DIR  # the harness's default: medians of 3
#   SKIP_PEERS=1 ...                                 # Fairway only (then quote the peers' last run)
#   FAIRWAY=target/release/fairway ...               # the binary to measure (built if absent)
#
# Then: python3 scripts/bench/side_by_side.py OUT_DIR > table.md
# The peer harness is copied from ../shared/peers to /tmp/peers (it writes beside itself).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT="${1:?usage: side-by-side.sh OUT_DIR}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
REPEATS="${REPEATS:-1}"
FAIRWAY="${FAIRWAY:-target/release/fairway}"
PEERS_SRC="${PEERS_SRC:-../shared/peers}"

if [ ! -x "$FAIRWAY" ]; then
  cargo build --release -p fairway
fi

{
  echo "date_utc: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "nproc: $(nproc)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "mem_gib: $(awk '/MemTotal/{printf "%.0f", $2/1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "os: $(. /etc/os-release; echo "$PRETTY_NAME")"
  echo "rustc: $(rustc --version)"
  echo "fairway_commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo '+local changes')"
  echo "data_fs: $(df -T /tmp | awk 'NR==2{print $2}')"
} > "$OUT/machine.txt"

# The load average every 5 s, in the background, stopped (by its PID) on exit.
( while true; do echo "$(date -u +%H:%M:%S) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 5; done ) \
  > "$OUT/loadavg.txt" &
LOAD_PID=$!
trap 'kill "$LOAD_PID" 2>/dev/null || true' EXIT

mark() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$OUT/phases.txt" >&2; }

if [ "${SKIP_PEERS:-0}" != "1" ]; then
  rm -rf /tmp/peers && cp -r "$PEERS_SRC" /tmp/peers
  mark "peers start (REPEATS=$REPEATS)"
  (cd /tmp/peers && REPEATS="$REPEATS" ./run-all.sh) > "$OUT/peers.log" 2>&1 || mark "peers: run-all.sh failed (see peers.log)"
  cp /tmp/peers/results/latest.jsonl "$OUT/peers.jsonl"
  cp /tmp/peers/RESULTS.md "$OUT/peers-RESULTS.md"
  mark "peers end"
fi

: > "$OUT/fairway.jsonl"
for rep in $(seq 1 "$REPEATS"); do
  mark "fairway e2e #$rep"
  "$FAIRWAY" bench e2e --rep "$rep" >> "$OUT/fairway.jsonl" 2>> "$OUT/fairway.log"
  mark "fairway fair, jobs declaring estimate_ms=1 #$rep"
  "$FAIRWAY" bench e2e --rep "$rep" --scenarios fair --estimate-ms 1 --label estimate-1ms \
    >> "$OUT/fairway.jsonl" 2>> "$OUT/fairway.log"
done
mark "fairway prio, weights high 9 / low 1, 20000 low jobs"
"$FAIRWAY" bench e2e --scenarios prio --variants batched --prio-high-weight 9 --prio-low-weight 1 \
  --prio-low 20000 --label weights-9-1-low-20000 >> "$OUT/fairway.jsonl" 2>> "$OUT/fairway.log"
mark "fairway memory"
"$FAIRWAY" bench memory >> "$OUT/fairway.jsonl" 2>> "$OUT/fairway.log"
mark "fairway restart"
"$FAIRWAY" bench restart >> "$OUT/fairway.jsonl" 2>> "$OUT/fairway.log"
mark "done"
