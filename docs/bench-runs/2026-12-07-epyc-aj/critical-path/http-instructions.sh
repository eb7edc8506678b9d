#!/bin/bash
# The HTTP side's instructions for 50,000 bulk-enqueued jobs (1,000 a call): a server under
# callgrind counting inside `batch_items` (a body of 32 KiB or more checked as JSON whole,
# each job kept as its text, before any job goes to the writer) and `App::prepare_job`, a
# native `bench e2e --scenarios enqueue` against it.
# usage: http-instructions.sh BIN TAG   (files in $HPROF, /tmp/hprof by default; port 7795)
set -u
W=${HPROF:-/tmp/hprof}
BIN=$1; TAG=$2; PORT=7795
mkdir -p $W; rm -rf $W/data-$TAG
valgrind --tool=callgrind --toggle-collect='*batch_items*' --toggle-collect='*prepare_job*' \
  --callgrind-out-file=$W/$TAG.out $BIN serve --data $W/data-$TAG --listen 127.0.0.1:$PORT > $W/$TAG-srv.log 2>&1 &
for i in $(seq 60); do curl -s 127.0.0.1:$PORT/healthz > /dev/null && break; sleep 1; done
$BIN bench e2e --url http://127.0.0.1:$PORT --scenarios enqueue --n 50000 --single-n 1 --single-conc-n 1 > $W/$TAG-bench.log 2>&1
pkill -INT -f "serve --data $W/data-$TAG"
wait
rm -rf $W/data-$TAG
for f in batch_items App::prepare_job; do
  callgrind_annotate --inclusive=yes $W/$TAG.out 2>/dev/null | grep "fairway_server::http::$f" | head -1 \
    | awk -v t=$TAG -v f=$f '{gsub(",", "", $1); printf "%s %s %.0f a job\n", t, f, $1/50000}'
done
