#!/bin/bash
# CPU time of the server's own threads for one fixed workload, alternating builds: each round
# starts a server of each build on a fresh data directory, runs one `bench e2e` against it
# (the client is always the same binary, CLIENT, so only the server differs), reads the
# threads' user+system time from /proc before stopping it. One line per run: round, build,
# the run's end-to-end jobs/s, then NAME=ms for the writer, the store thread and redb's
# applier. The store and writer threads poll for a while before sleeping (`idle_spin_us`), so
# their figures carry some waiting; the applier sleeps on a condition variable.
#
#   CLIENT=/tmp/fw-base docs/bench-runs/thread-cpu.sh 4 /tmp/fw-old /tmp/fw-new
#   N=300000 (jobs, the default)
set -u
R=${1:?rounds}; shift
BINS="$*"
CLIENT=${CLIENT:-${BINS%% *}}
TCK=$(getconf CLK_TCK)
for r in $(seq 1 "$R"); do
  list=$BINS
  if [ $((r % 2)) = 0 ]; then list=$(echo $BINS | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for b in $list; do
    data=$(mktemp -d)
    "$b" serve --data "$data" --listen 127.0.0.1:18400 > /dev/null 2>&1 &
    pid=$!
    sleep 1.2
    rate=$("$CLIENT" bench e2e --url http://127.0.0.1:18400 --scenarios e2e --variants batched \
      --n "${N:-300000}" 2>/dev/null | grep -o '"e2e_jobs_per_s":[0-9.]*' | cut -d: -f2)
    out=""
    for t in /proc/$pid/task/*; do
      name=$(cat "$t/comm")
      # Fields 14 and 15 of stat (utime, stime), counted after the ")" that ends the name.
      read -r -a f <<< "$(cut -d')' -f2 "$t/stat")"
      case $name in
        fairway-redb|fairway-store|fairway-writer)
          out="$out $name=$(( (f[11] + f[12]) * 1000 / TCK ))" ;;
      esac
    done
    kill -INT $pid; wait $pid 2>/dev/null
    rm -rf "$data"
    echo "$r $(basename "$b") $rate$out"
  done
done
