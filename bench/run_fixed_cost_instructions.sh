#!/usr/bin/env bash
# Instructions per cached single-op step (x.add_(1); mark_step()), counted by callgrind: unlike
# wall time on a shared VM, the count repeats exactly, so small changes show. Two runs of
# `bench_fixed_cost N --cached-only` (N = 200 and 1200 steps on 1K floats) are counted inside
# mark_step() and add_() only; their difference over the extra steps removes the warm-up. No
# persistent cache, so both runs compile alike.
# Needs valgrind (Debian package "valgrind"). Usage:
#   bench/run_fixed_cost_instructions.sh [dir holding liblazyx.so.0, default: the build's]
set -euo pipefail
cd "$(dirname "$0")/.."
lib=${1:-}
bin=build/bench/bench_fixed_cost
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {  # instructions inside mark_step and add_ for a run of `$1` steps per round
  LD_LIBRARY_PATH=$lib LAZYX_NUM_THREADS=1 LAZYX_CACHE_DIR= valgrind \
    --tool=callgrind --callgrind-out-file="$tmp/out.$1" --toggle-collect='lazyx::mark_step()' \
    --toggle-collect='lazyx::Tensor::add_*' "$bin" "$1" --cached-only >/dev/null 2>"$tmp/err.$1"
  callgrind_annotate "$tmp/out.$1" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}
a=$(count 200)
b=$(count 1200)
echo "instructions per cached step (x.add_(1) on 1K floats; mark_step): $(((b - a) / 1000))"
