#!/usr/bin/env python3
"""The machine facts each BENCHMARKS.md section opens with: the latency of a 4 KiB write made
durable (pwrite + fdatasync, 400 times, p50 and p99), appending to a new file and overwriting
one block, and the round trip of one byte through two pipes between two processes (2,000
times, p50). The durable write bounds a sequential client's round trip (every answer waits for
one); the pipe round trip shows how quickly an idle vCPU wakes. Prints one JSON line; run it
twice, in a quiet hour.

    python3 docs/bench-runs/machine.py [DIR]
"""
import json, os, statistics, sys, tempfile, time


def durable_writes(directory, append):
    fd, path = tempfile.mkstemp(dir=directory)
    block = b"x" * 4096
    waits = []
    try:
        for i in range(400):
            t = time.perf_counter()
            os.pwrite(fd, block, (i if append else 0) * 4096)
            os.fdatasync(fd)
            waits.append((time.perf_counter() - t) * 1e6)
    finally:
        os.close(fd)
        os.unlink(path)
    waits.sort()
    return round(statistics.median(waits), 1), round(waits[int(0.99 * len(waits))], 1)


def pipe_round_trip():
    there_r, there_w = os.pipe()
    back_r, back_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(there_w)
        os.close(back_r)
        while os.read(there_r, 1):
            os.write(back_w, b"y")
        os._exit(0)
    os.close(there_r)
    os.close(back_w)
    waits = []
    for _ in range(2000):
        t = time.perf_counter()
        os.write(there_w, b"x")
        os.read(back_r, 1)
        waits.append((time.perf_counter() - t) * 1e6)
    os.close(there_w)
    os.waitpid(child, 0)
    return round(statistics.median(waits), 1)


directory = sys.argv[1] if len(sys.argv) > 1 else "."
append = durable_writes(directory, True)
overwrite = durable_writes(directory, False)
print(json.dumps({
    "fdatasync_append_us_p50": append[0],
    "fdatasync_append_us_p99": append[1],
    "fdatasync_overwrite_us_p50": overwrite[0],
    "fdatasync_overwrite_us_p99": overwrite[1],
    "pipe_round_trip_us_p50": pipe_round_trip(),
}))
