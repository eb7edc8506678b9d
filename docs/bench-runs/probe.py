#!/usr/bin/env python3
"""A latency probe beside a load: submits single jobs one after the other to a Fairway server
(`POST /v1/jobs` over one keep-alive connection) for SECONDS, each awaited, and prints one JSON
line with the count and the round trips' percentiles and maximum in milliseconds. Every answer
is durable, so a round trip includes its commit and whatever the commit waited behind.

    python3 docs/bench-runs/probe.py 127.0.0.1:18401 20 > probe.json
"""
import http.client, json, sys, time

host, port = sys.argv[1].split(":")
seconds = float(sys.argv[2])
conn = http.client.HTTPConnection(host, int(port))
waits = []
end = time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    # A label no worker offers: the jobs stay queued, out of the load's way.
    body = json.dumps({"id": f"probe-{time.time_ns()}-{i}", "tenant": "probe",
                       "requires": {"zone": "probe"}})
    t = time.monotonic()
    conn.request("POST", "/v1/jobs", body, {"content-type": "application/json"})
    r = conn.getresponse()
    r.read()
    waits.append((time.monotonic() - t) * 1000)
    if r.status >= 300:
        sys.exit(f"probe: HTTP {r.status}")
    i += 1
waits.sort()
q = lambda p: round(waits[min(len(waits) - 1, int(p * len(waits)))], 3)
print(json.dumps({"n": len(waits), "p50_ms": q(0.5), "p99_ms": q(0.99), "p999_ms": q(0.999),
                  "max_ms": round(waits[-1], 3)}))
