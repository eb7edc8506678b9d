#!/bin/bash
# engine-ab.sh with extra args: ROUNDS IDS BIN...
rounds=$1; ids=$2; shift 2
for r in $(seq 1 "$rounds"); do
  for b in "$@"; do
    for cell in "--min-queued 1000000 --max-queued 1000000 --min-tenants 10000 --max-tenants 10000" \
                "--min-queued 1000 --max-queued 1000 --max-tenants 10"; do
        "$b" bench engine $cell --no-idle --no-seed002 --job-ids $ids 2>/dev/null |
          sed "s|^{|{\"bin\":\"$(basename "$b")\",\"round\":$r,|"
    done
  done
done
