#!/usr/bin/env python3
"""The engine, memory, restart and warm-server figures of one side-by-side run's folder, as
BENCHMARKS.md quotes them (the end-to-end table comes from sidebyside.py).

    python3 docs/bench-runs/run-summary.py docs/bench-runs/DATE-KIND-X/run

Prints, per policy: the key cells' p50s (10^3 x 10 and 10^6 x 10^4, without and with events
captured; median and each run), the growth between the two cells (at the medians, and against the small
cell's fastest run), the settled cell, the grid's queue axis (10 tenants), the idle-tenant pairs
and seed 002's pop; then memory, restart and the warm server's rounds.
"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

POLICIES = ("fair", "drf", "fifo")
SMALL, KEY = (1_000, 10), (1_000_000, 10_000)


def lines(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def engine(run):
    cells = defaultdict(list)  # (policy, queued, tenants, captured) -> p50s in run order
    for d in lines(run / "engine_key.jsonl"):
        key = (d["policy"], d["queued"], d["tenants"], d["events_captured"])
        cells[key].append(d["ns_per_decision_p50"])
    print("engine key cells, p50 ns: median (runs)")
    for p in POLICIES:
        for q, t in (SMALL, KEY):
            for cap in (False, True):
                xs = cells.get((p, q, t, cap), [])
                label = "captured" if cap else "plain"
                print(f"  {p:4} {q:>9,} x {t:>6,} {label:8} {median(xs):>7,.0f}  {xs}")
    print("growth 10^3 x 10 -> 10^6 x 10^4 (plain): at the medians; median over the small "
          "cell's fastest run; fastest over fastest")
    for p in POLICIES:
        small, key = cells.get((p, *SMALL, False), []), cells.get((p, *KEY, False), [])
        if small and key:
            print(f"  {p:4} {median(key) / median(small):.2f}x  {median(key) / min(small):.2f}x  "
                  f"{min(key) / min(small):.2f}x")
    settled = {d["policy"]: d["ns_per_decision_p50"] for d in lines(run / "engine_settled.jsonl")}
    print("settled (finished list at its retention), p50 ns:", settled)
    grid = lines(run / "engine_grid.jsonl")
    print("grid, queue axis at 10 tenants (p50 ns at 10^3 .. 10^6, 10^6 / 10^3):")
    for p in POLICIES:
        row = {d["queued"]: d["ns_per_decision_p50"] for d in grid
               if d.get("bench") == "engine" and d["policy"] == p and d["tenants"] == 10}
        if row:
            qs = sorted(row)
            print(f"  {p:4} {[row[q] for q in qs]}  {row[qs[-1]] / row[qs[0]]:.2f}x")
    print("idle tenants (p50 ns, 0 -> 10^4 idle):")
    for p in POLICIES:
        row = {d["idle_tenants"]: d["ns_per_decision_p50"] for d in grid
               if d.get("bench") == "engine_idle_tenants" and d["policy"] == p}
        if len(row) == 2:
            a, b = row[0], row[max(row)]
            print(f"  {p:4} {a} -> {b} ({(b / a - 1) * 100:+.1f}%)")
    for d in grid:
        if d.get("bench") == "seed002_pop":
            print(f"  seed 002 pop, {d['minor_sources']:>6} sources: {d['ns_per_pop_p50']:>6} ns "
                  f"({d['pop_over_decision_p50']}x our fair decision, "
                  f"{d['fair_ns_per_decision_p50']} ns)")


def memory_restart_warm(run):
    for d in lines(run / "memory.jsonl"):
        print(f"memory, payload {d['payload']}: {d['rss_bytes_per_job']} B a job "
              f"(fill {d['fill_jobs_per_s']:,.0f} jobs/s)")
    for d in lines(run / "restart.jsonl"):
        r = d["recovered"]
        print(f"restart after {d['stopped_by']}: ready in {d['start_to_ready_seconds']} s, "
              f"{r['replayed_events']:,} events replayed, recovery {r['recover_ms']} ms, "
              f"{d['rss_bytes_per_job_after_restart']} B a job")
    for d in lines(run / "warm.jsonl"):
        label = d.get("variant", "")
        if d.get("scenario") == "enqueue":
            print(f"warm {label}: bulk {d['bulk']['jobs_per_s']:,.0f}, 64 in flight "
                  f"{d['single_concurrent']['jobs_per_s']:,.0f}, sequential "
                  f"{d['single_sequential']['jobs_per_s']:,.0f}")
        elif "e2e_jobs_per_s" in d:
            print(f"warm {label}: end to end {d['e2e_jobs_per_s']:,.0f} jobs/s")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run = Path(sys.argv[1])
    if not run.is_dir():
        sys.exit(f"{run} is not a folder of a side-by-side run")
    engine(run)
    memory_restart_warm(run)


if __name__ == "__main__":
    main()
