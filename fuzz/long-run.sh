#!/usr/bin/env bash
# A long fuzzing run of one target, as recorded in docs/reliability.md:
#
#   fuzz/long-run.sh TARGET SECONDS
#
# Runs from anywhere. One libFuzzer process at a time (-fork=1), going on past crashes,
# timeouts and out-of-memory inputs so that one finding does not end the run; each is saved
# under fuzz/artifacts/TARGET/. New inputs go to fuzz/corpus/TARGET/ (minimize it with
# `cargo fuzz cmin` before committing). The log is fuzz/logs/TARGET.log; its last status line
# gives the figures (executions, cov = edges, ft = features, corp = corpus size, crashes).
# Built with --sanitizer none, as everywhere here: no nightly flag is needed (README.md).
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?target}
seconds=${2:?seconds}
max_len=$(sed -n "s/^$target[[:space:]]\+//p" max_len.txt)
mkdir -p "corpus/$target" "artifacts/$target" logs
cargo fuzz build --sanitizer none "$target"
cargo fuzz run --sanitizer none "$target" "corpus/$target" "seeds/$target" -- \
  -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -max_total_time="$seconds" \
  -artifact_prefix="artifacts/$target/" 2>&1 | tee "logs/$target.log" | grep -E '^#[0-9]+: cov' | tail -1
