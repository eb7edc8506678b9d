#!/bin/bash
# The HTTP side's instructions for 50,000 bulk-enqueued jobs (1,000 a call): a server under
# callgrind counting inside the `POST /v1/jobs/batch` handler (`submit_batch`, inlined into
# axum's `Handler::call` for its four extractors; on its HTTP task, not the writer's thread):
# the whole-body check (`batch_items`: a body of 32 KiB or more checked as JSON whole, each
# job kept as its text, before any job goes to the writer), each job read into its shape
# (`parse_json`, and `read_job` where it exists), `App::prepare_job`, the parts sent to the
# writer and the reply; a native `bench e2e --scenarios enqueue` against it. Prints the
# handler's whole count, then each of those functions' (inclusive), a job each.
# usage: http-instructions.sh BIN TAG   (files in $HPROF, /tmp/hprof by default; port 7795)
set -u
W=${HPROF:-/tmp/hprof}
BIN=$1; TAG=$2; PORT=7795
mkdir -p $W; rm -rf $W/data-$TAG
# (One toggle only: callgrind's toggles nest, a second inside the first would turn it off.)
valgrind --tool=callgrind --toggle-collect='*Handler<(M,T1,T2,T3,T4),S>>::call*' \
  --callgrind-out-file=$W/$TAG.out $BIN serve --data $W/data-$TAG --listen 127.0.0.1:$PORT > $W/$TAG-srv.log 2>&1 &
for i in $(seq 120); do curl -sf 127.0.0.1:$PORT/readyz > /dev/null && break; sleep 1; done
$BIN bench e2e --url http://127.0.0.1:$PORT --scenarios enqueue --n 50000 --single-n 1 --single-conc-n 1 > $W/$TAG-bench.log 2>&1
pkill -INT -f "serve --data $W/data-$TAG"
wait
rm -rf $W/data-$TAG
callgrind_annotate --inclusive=yes $W/$TAG.out 2>/dev/null > $W/$TAG.txt
total=$(grep "PROGRAM TOTALS" $W/$TAG.txt | awk '{gsub(",", "", $1); print $1}')
echo "$TAG submit_batch $(( total / 50000 )) a job (all collected)"
for f in read_job parse_json batch_items App::prepare_job; do
  grep "fairway_server::http::$f " $W/$TAG.txt | head -1 \
    | awk -v t=$TAG -v f=$f '{gsub(",", "", $1); printf "%s %s %.0f a job\n", t, f, $1/50000}'
done
