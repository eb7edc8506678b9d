#!/usr/bin/env python3
"""The side-by-side table of BENCHMARKS.md from one run of scripts/bench/side-by-side.sh.

    python3 scripts/bench/side_by_side.py OUT_DIR > table.md

Reads OUT_DIR/peers.jsonl (the peer harness's results/latest.jsonl) and OUT_DIR/fairway.jsonl
(`fairway bench e2e`, `memory` and `restart`), takes the median of each number over the
repeats, and prints Markdown: the summary table with Fairway's rows beside the peers', the
ratios against the best peer, and the memory and restart lines. Standard library only.
"""

import json
import statistics
import sys
from pathlib import Path

NAMES = {
    "bullmq": "BullMQ",
    "bullmq-pg": "BullMQ on PostgreSQL",
    "pg-boss": "pg-boss",
    "celery": "Celery",
}


def load(path):
    rows = []
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("{"):
            rows.append(json.loads(line))
    return rows


def get(row, path):
    for key in path.split("."):
        if row is None:
            return None
        row = row.get(key)
    return row


def med(rows, path):
    vals = [v for v in (get(r, path) for r in rows) if v is not None]
    return statistics.median(vals) if vals else None


def num(x, nd=0):
    if x is None:
        return "–"
    if nd:
        return f"{x:,.{nd}f}"
    return f"{x:,.0f}"


def ms(x):
    if x is None:
        return "–"
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"


def pick(rows, peer, scenario, variant=None):
    return [
        r
        for r in rows
        if r.get("peer") == peer
        and r.get("scenario") == scenario
        and r.get("variant") == variant
        and "error" not in r
    ]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    peers = load(out / "peers.jsonl")
    fairway = load(out / "fairway.jsonl")

    # (label, enqueue rows, e2e rows, fair rows, prio rows)
    systems = []
    for peer in ["bullmq", "bullmq-pg", "pg-boss", "celery"]:
        if any(r.get("peer") == peer for r in peers):
            systems.append(
                (
                    NAMES[peer],
                    pick(peers, peer, "enqueue"),
                    pick(peers, peer, "e2e"),
                    pick(peers, peer, "fair"),
                    pick(peers, peer, "prio"),
                    True,
                )
            )
    variants = sorted(
        {r.get("variant") for r in fairway if r.get("scenario") in ("e2e", "fair", "prio")},
        key=lambda v: (v or "", ),
    )
    order = ["batched", "sdk-worker", "single"]
    variants = [v for v in order if v in variants] + [v for v in variants if v not in order]
    for v in variants:
        systems.append(
            (
                f"**Fairway** ({v})",
                pick(fairway, "fairway", "enqueue") if v == "batched" else [],
                pick(fairway, "fairway", "e2e", v),
                pick(fairway, "fairway", "fair", v),
                pick(fairway, "fairway", "prio", v),
                False,
            )
        )

    print(
        "| system | bulk enqueue jobs/s | single enqueue jobs/s (sequential / 64 in flight) "
        "| end-to-end jobs/s (N=50k, no-op) | enqueue→start p50 / p99 ms "
        "| noisy neighbour: B wait p50 / p99 / max ms | B's last completion / 20,200 "
        "| priority: low jobs started in 10 s window |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, enq, e2e, fair, prio, _ in systems:
        print(
            f"| {label} | {num(med(enq, 'bulk.jobs_per_s'))} "
            f"| {num(med(enq, 'single_sequential.jobs_per_s'))} / "
            f"{num(med(enq, 'single_concurrent.jobs_per_s'))} "
            f"| {num(med(e2e, 'e2e_jobs_per_s'))} "
            f"| {ms(med(e2e, 'enqueue_to_start.p50_ms'))} / {ms(med(e2e, 'enqueue_to_start.p99_ms'))} "
            f"| {ms(med(fair, 'b_wait_enqueue_to_start.p50_ms'))} / "
            f"{ms(med(fair, 'b_wait_enqueue_to_start.p99_ms'))} / "
            f"{ms(med(fair, 'b_wait_enqueue_to_start.max_ms'))} "
            f"| {num(med(fair, 'b_last_completion_position'))} "
            f"| {num(med(prio, 'low_started_in_window'))} / {num(med(prio, 'low_jobs'))} |"
        )

    peer_rows = [s for s in systems if s[5]]
    if peer_rows:
        def best(idx, path, lower=False):
            vals = [(med(s[idx], path), s[0]) for s in peer_rows]
            vals = [v for v in vals if v[0] is not None]
            if not vals:
                return None, None
            return (min if lower else max)(vals)

        print()
        print("Ratios against the best peer of this run (higher is better for Fairway):")
        print()
        print("| Fairway | against | best peer | Fairway | ratio |")
        print("| --- | --- | ---: | ---: | ---: |")
        rows = [
            ("bulk enqueue (batched)", 1, "bulk.jobs_per_s", "batched", 1, "bulk.jobs_per_s", False),
            ("single enqueue, sequential", 1, "single_sequential.jobs_per_s", "batched", 1,
             "single_sequential.jobs_per_s", False),
            ("single enqueue, 64 in flight", 1, "single_concurrent.jobs_per_s", "batched", 1,
             "single_concurrent.jobs_per_s", False),
        ]
        for v in variants:
            rows.append((f"end to end ({v})", 2, "e2e_jobs_per_s", v, 2, "e2e_jobs_per_s", False))
        for v in variants:
            rows.append(
                (f"noisy neighbour B p99 wait ({v})", 3, "b_wait_enqueue_to_start.p99_ms", v, 3,
                 "b_wait_enqueue_to_start.p99_ms", True)
            )
        for what, pidx, ppath, v, fidx, fpath, lower in rows:
            b, who = best(pidx, ppath, lower)
            f = next((med(s[fidx], fpath) for s in systems if s[0] == f"**Fairway** ({v})"), None)
            if b is None or f is None or b == 0 or f == 0:
                continue
            ratio = b / f if lower else f / b
            print(f"| {what} | {who} | {num(b, 1) if lower else num(b)} | "
                  f"{num(f, 1) if lower else num(f)} | {ratio:.2f}x |")

    mem = [r for r in fairway if r.get("scenario") == "memory"]
    if mem:
        print()
        print("| memory: jobs queued | payload | RSS before → after (MiB) | RSS per job (bytes) "
              "| anonymous RSS per job | fill jobs/s |")
        print("| ---: | --- | ---: | ---: | ---: | ---: |")
        for r in mem:
            print(
                f"| {num(r['jobs'])} | {r['payload']} | {r['rss_bytes_before'] / 2**20:,.0f} → "
                f"{r['rss_bytes_settled'] / 2**20:,.0f} | {num(r['rss_bytes_per_job'])} "
                f"| {num(r['rss_anon_bytes_per_job'])} | {num(r['fill_jobs_per_s'])} |"
            )
    rst = [r for r in fairway if r.get("scenario") == "restart"]
    if rst:
        print()
        print("| restart: jobs in the store | how the first server stopped | snapshot every "
              "| events replayed | recovery (server's log) ms | process start → ready s "
              "| RSS after restart (MiB) |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for r in rst:
            rec = r.get("recovered") or {}
            every = r["snapshot_every_events"]
            print(
                f"| {num(r['jobs'])} | {r['stopped_by']} ({r['variant']}) "
                f"| {'never' if every >= 10**15 else num(every)} | {num(rec.get('replayed_events'))} "
                f"| {num(rec.get('recover_ms'))} | {r['start_to_ready_seconds']:.2f} "
                f"| {r['rss_bytes_after_restart'] / 2**20:,.0f} |"
            )


if __name__ == "__main__":
    main()
