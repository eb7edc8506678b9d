#!/usr/bin/env python3
"""Summary of an e2e-ab.sh file: per build the median of each rate column, and the median
of the paired ratio NEW/OLD (the two runs of one round) with how many rounds NEW led.
usage: ab-paired.py FILE OLD NEW [COLUMN]   (COLUMN: 0 for the first rate, the default)"""
import statistics, sys

path, old, new = sys.argv[1:4]
col = int(sys.argv[4]) if len(sys.argv) > 4 else 0
# A round is a run of consecutive lines with one round number (a file may hold several
# appended series, each numbered from 1).
rounds, label = [], None
for line in open(path):
    parts = line.split()
    if len(parts) < 3:
        continue
    if parts[0] != label or parts[1] in rounds[-1]:
        rounds.append({})
        label = parts[0]
    rounds[-1][parts[1]] = [float(x) for x in parts[2:]]
pairs = [r for r in rounds if old in r and new in r]
a = [r[old][col] for r in pairs]
b = [r[new][col] for r in pairs]
ratios = [y / x for x, y in zip(a, b)]
print(f"{path}: {len(pairs)} rounds, median {statistics.median(a):,.0f} -> "
      f"{statistics.median(b):,.0f}, paired ratio median {statistics.median(ratios):.3f}, "
      f"{new} ahead in {sum(r > 1 for r in ratios)} of {len(ratios)}")
