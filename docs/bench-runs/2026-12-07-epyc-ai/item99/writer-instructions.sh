#!/bin/bash
# The writer's instructions for 50,000 submissions of a bulk enqueue: a server under callgrind
# (counting inside `Turns::submit` only), a native `bench e2e --scenarios enqueue` against it.
# usage: writer-instructions.sh BIN TAG   (files in $WPROF, /tmp/wprof by default; port 7783)
set -u
W=${WPROF:-/tmp/wprof}
BIN=$1; TAG=$2; PORT=7783
mkdir -p $W; rm -rf $W/data-$TAG
valgrind --tool=callgrind --toggle-collect='*Turns*submit*' --callgrind-out-file=$W/$TAG.out $BIN serve --data $W/data-$TAG --listen 127.0.0.1:$PORT > $W/$TAG-srv.log 2>&1 &
for i in $(seq 60); do curl -s 127.0.0.1:$PORT/healthz > /dev/null && break; sleep 1; done
$BIN bench e2e --url http://127.0.0.1:$PORT --scenarios enqueue --n 50000 --single-n 1 --single-conc-n 1 > $W/$TAG-bench.log 2>&1
pkill -INT -f "serve --data $W/data-$TAG"
wait
grep -h "^summary" $W/$TAG.out | awk -v t=$TAG '{printf "%s %s %.0f a job\n", t, $2, $2/50003}'
