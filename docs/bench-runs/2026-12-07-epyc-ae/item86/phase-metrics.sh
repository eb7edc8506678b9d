#!/bin/bash
# Where a 64-in-flight submission's time goes (BENCHMARKS.md item 86): the server's own
# metrics, read 0.3 s and 2.3 s into the coalesced phase of `bench e2e --scenarios enqueue`,
# give requests (commands) a second, jobs (events) a request, group commits, their mean time
# and the engine's time on submissions, over those 2 seconds.
#
#   fairway serve --data /tmp/pm --listen 127.0.0.1:7791 &
#   docs/bench-runs/2026-12-07-epyc-ae/item86/phase-metrics.sh http://127.0.0.1:7791 [FW]
set -u
URL=$1; FW=${2:-fairway}; SPAN=2.0
get() {
  curl -s "$URL/metrics" | grep -v '^#' \
    | grep -E '^fairway_group_commit_(seconds|commands|events)_(sum|count) |^fairway_engine_call_seconds_(sum|count)\{call="submit"\} '
}
"$FW" bench e2e --url "$URL" --scenarios enqueue --n 1 --single-n 1 --single-conc-n 400000 \
  --phase-cap-s 3 > /dev/null 2>&1 &
sleep 0.3; A=$(get); sleep $SPAN; B=$(get); wait
python3 - "$SPAN" <<P
import sys
span = float(sys.argv[1])
parse = lambda t: {l.rsplit(' ', 1)[0]: float(l.rsplit(' ', 1)[1]) for l in t.split('\n') if l}
a, b = parse('''$A'''), parse('''$B''')
d = {k: b[k] - a[k] for k in b}
commits = d['fairway_group_commit_seconds_count']
requests = d['fairway_group_commit_commands_sum']
jobs = d['fairway_group_commit_events_sum']
submit = d['fairway_engine_call_seconds_sum{call="submit"}']
print(f"requests/s {requests / span:,.0f}  jobs/s {jobs / span:,.0f}  jobs/request {jobs / requests:.1f}  "
      f"commits/s {commits / span:,.0f}  requests/commit {requests / commits:.2f}  "
      f"mean commit {1e6 * d['fairway_group_commit_seconds_sum'] / commits:.0f} us  "
      f"log thread busy {d['fairway_group_commit_seconds_sum'] / span:.0%}  "
      f"engine submit {1e6 * submit / requests:.0f} us/request, busy {submit / span:.0%}")
P
