#!/bin/bash
# The client's instructions for a bulk enqueue of 50,000 jobs (1,000 a call): a native server,
# the bench under callgrind counting inside `Producer::add_chunked` only (building the jobs,
# the SDK's ids, encoding and reading the replies; the HTTP I/O it awaits included).
# usage: client-instructions.sh BIN TAG   (files in $CPROF, /tmp/cprof by default; port 7794)
set -u
W=${CPROF:-/tmp/cprof}
BIN=$1; TAG=$2; PORT=7794
mkdir -p $W; rm -rf $W/data-$TAG
$BIN serve --data $W/data-$TAG --listen 127.0.0.1:$PORT > $W/$TAG-srv.log 2>&1 &
for i in $(seq 60); do curl -s 127.0.0.1:$PORT/healthz > /dev/null && break; sleep 0.5; done
valgrind --tool=callgrind --toggle-collect='*add_chunked*' --callgrind-out-file=$W/$TAG.out \
  $BIN bench e2e --url http://127.0.0.1:$PORT --scenarios enqueue --n 50000 --single-n 1 --single-conc-n 1 > $W/$TAG-bench.log 2>&1
pkill -INT -f "serve --data $W/data-$TAG"
wait
rm -rf $W/data-$TAG
grep -h "^summary" $W/$TAG.out | awk -v t=$TAG '{printf "%s %s instructions, %.0f a job\n", t, $2, $2/50000}'
