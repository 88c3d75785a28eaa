#!/usr/bin/env bash
# Core overheads of lazyx next to torch, measured in one run: tracing cost per op and a cached
# mark_step of a 1000-op graph. Usage: bench/run_core.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
for backend in reference ${EXTRA_BACKENDS:-}; do
  LAZYX_BACKEND=$backend "$B"/bench/bench_core 50
done
[ -x "$B"/bench/bench_torch_eager ] && "$B"/bench/bench_torch_eager
/usr/bin/python3 bench/torch_overheads.py
