#!/bin/bash
# Where a bulk enqueue call's time goes: a server logging tower_http's request events, a
# native `bench e2e --scenarios enqueue` against it (1,000 jobs a call, one call at a time),
# then, from the log's timestamps, each call's time inside the server (request head read to
# the response's end of stream) and the gap to the next call (the client building, encoding
# and sending the next 1,000 jobs, and reading the reply).
# usage: split.sh BIN N OUTDIR   (port 7792)
set -u
BIN=$1; N=$2; OUT=$3; PORT=7792
mkdir -p $OUT; rm -rf $OUT/data
RUST_LOG=info,tower_http=debug $BIN serve --data $OUT/data --listen 127.0.0.1:$PORT > $OUT/server.log 2>&1 &
for i in $(seq 60); do curl -s 127.0.0.1:$PORT/healthz > /dev/null && break; sleep 0.5; done
$BIN bench e2e --url http://127.0.0.1:$PORT --scenarios enqueue --n $N --single-n 1 --single-conc-n 1 > $OUT/bench.jsonl 2> $OUT/bench.log
pkill -INT -f "serve --data $OUT/data"
wait
rm -rf $OUT/data
python3 - "$OUT/server.log" "$OUT/bench.jsonl" <<'PY'
import json, re, statistics, sys
from datetime import datetime
ts = lambda l: datetime.strptime(l[:26], "%Y-%m-%dT%H:%M:%S.%f").timestamp() * 1e3
start = end = None
inside, gaps = [], []
for line in open(sys.argv[1]):
    if "uri=/v1/jobs/batch" not in line:
        continue
    if "on_request" in line:
        t = ts(line)
        if end is not None:
            gaps.append(t - end)
        start = t
    elif "on_eos" in line and start is not None:
        end = ts(line)
        inside.append(end - start)
bulk = json.loads(open(sys.argv[2]).readline())["bulk"]
per_call = 1e3 * bulk["seconds"] / (bulk["jobs"] / bulk["chunk"])
med = statistics.median
print(f"bulk {bulk['jobs_per_s']:.0f} jobs/s, {bulk['jobs'] // bulk['chunk']} calls, {per_call:.2f} ms a call")
print(f"inside the server: median {med(inside):.2f} ms, mean {statistics.mean(inside):.2f} ({len(inside)} calls)")
print(f"between calls (client): median {med(gaps):.2f} ms, mean {statistics.mean(gaps):.2f}")
print(f"the client's share of a call, medians: {med(gaps) / (med(gaps) + med(inside)):.0%}")
PY
