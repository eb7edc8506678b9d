#!/usr/bin/env python3
"""FCFS+EASY against fair+EASY on the real multi-user logs (KTH-SP2, LANL-CM5), per user.

Runs `fairway sim --swf LOG --format json` for each log under the log's own recorded schedule
(`--policy replay`), FCFS+EASY (`--policy fifo --backfill easy`) and fair+EASY (`--policy fair
--backfill easy`), with the users' requested times as estimates (or, with `--estimates
actual`, the actual run times), and prints the Markdown tables of docs/traces.md from the
`trace` section of each JSON document.

Usage: python3 scripts/trace_fairness.py [--fairway target/release/fairway] [--traces DIR]
                                         [--estimates requested|actual] [--logs KTH-SP2,LANL-CM5]
Only the standard library is used; the tables are deterministic (the simulator is).
"""

import argparse
import json
import math
import os
import subprocess
import sys

LOGS = [
    ("KTH-SP2", "KTH-SP2-1996-2.1-cln.swf"),
    ("LANL-CM5", "LANL-CM5-1994-4.1-cln.swf"),
]
RUNS = [
    ("recorded (replay)", ["--policy", "replay"]),
    ("FCFS+EASY", ["--policy", "fifo", "--backfill", "easy"]),
    ("fair+EASY", ["--policy", "fair", "--backfill", "easy"]),
]
WORST = 5


def run(fairway, swf, extra):
    cmd = [fairway, "sim", "--swf", swf, "--format", "json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["trace"]


def nearest_rank(values, p):
    v = sorted(values)
    return v[min(max(math.ceil(p * len(v)), 1), len(v)) - 1]


def hours(s):
    return f"{s / 3600:.1f}"


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fairway", default=os.path.join(root, "target/release/fairway"))
    parser.add_argument(
        "--traces",
        default=os.environ.get("FAIRWAY_TRACES", os.path.join(root, "../shared/traces")),
    )
    parser.add_argument("--estimates", choices=["requested", "actual"], default="requested")
    parser.add_argument("--logs", default=",".join(name for name, _ in LOGS))
    args = parser.parse_args()
    wanted = args.logs.split(",")
    for name, file in LOGS:
        if name not in wanted:
            continue
        swf = os.path.join(args.traces, file)
        if not os.path.isfile(swf):
            sys.exit(f"{swf} does not exist (set --traces or FAIRWAY_TRACES)")
        results = []
        for label, extra in RUNS:
            if "replay" not in extra:
                extra = extra + ["--estimates", args.estimates]
            results.append((label, run(args.fairway, swf, extra)))
        first = results[0][1]
        print(f"### {name}: {first['jobs']} jobs simulated ({first['left_out']} records left "
              f"out), {int(first['machine_procs'])} processors, {len(first['tenants'])} users, "
              f"{args.estimates} times as estimates\n")
        print("| schedule | wait mean (s) | p50 | p90 | p99 | max | bounded slowdown mean "
              "| p99 | utilization | while jobs waited |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, t in results:
            w, b = t["wait_s"], t["bounded_slowdown"]
            print(f"| {label} | {w['mean']:,.0f} | {w['p50']:,.0f} | {w['p90']:,.0f} | "
                  f"{w['p99']:,.0f} | {w['max']:,.0f} | {b['mean']:.2f} | {b['p99']:.1f} | "
                  f"{t['utilization']:.3f} | {t['utilization_backlogged']:.3f} |")
        print()
        print("Per-user waits: the distribution, over users, of each user's mean and p99 wait "
              "(hours).\n")
        print("| schedule | users' mean wait: median user | p90 user | worst user "
              "| users' p99 wait: median user | p90 user | worst user |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, t in results:
            users = [u for u in t["tenants"].values() if u["started"] > 0]
            means = [u["wait_s"]["mean"] for u in users]
            p99s = [u["wait_s"]["p99"] for u in users]
            print(f"| {label} | {hours(nearest_rank(means, 0.5))} | "
                  f"{hours(nearest_rank(means, 0.9))} | {hours(max(means))} | "
                  f"{hours(nearest_rank(p99s, 0.5))} | {hours(nearest_rank(p99s, 0.9))} | "
                  f"{hours(max(p99s))} |")
        print()
        by_label = dict(results)
        for label in ("FCFS+EASY", "fair+EASY"):
            t = by_label[label]
            worst = sorted(t["tenants"].items(), key=lambda kv: -kv[1]["wait_s"]["mean"])
            print(f"Worst-treated users under {label} (top {WORST} by mean wait); mean wait "
                  "in hours under each schedule.\n")
            print("| user | jobs | share of service | mean wait, recorded | FCFS+EASY "
                  "| fair+EASY | p99 wait, this schedule | max wait |")
            print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for user, u in worst[:WORST]:
                cols = [hours(by_label[l]["tenants"][user]["wait_s"]["mean"])
                        for l in ("recorded (replay)", "FCFS+EASY", "fair+EASY")]
                print(f"| {user} | {u['jobs']} | {u['service_share']:.4f} | "
                      f"{' | '.join(cols)} | {hours(u['wait_s']['p99'])} | "
                      f"{hours(u['wait_s']['max'])} |")
            print()


if __name__ == "__main__":
    main()
