#!/usr/bin/env bash
# The one thread runtime: training-step benchmarks at LAZYX_NUM_THREADS=1 and 2, quiet and with
# a busy process this script starts, the two thread counts alternating within each load so both
# see the same machine. Prints one line per measurement: load, threads, benchmark, ms.
#   bench/run_threads.sh [build-dir] [rounds]   (LAZYX_PYTHONPATH=<build>/python for Python)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
ROUNDS=${2:-1}
export LAZYX_PYTHONPATH=${LAZYX_PYTHONPATH:-$PWD/$B/python}
busy_pid=

measure() {  # load threads
  local load=$1 t=$2
  if [ -x "$B"/bench/bench_cpu_vs_torch ]; then
    LAZYX_NUM_THREADS=$t "$B"/bench/bench_cpu_vs_torch 5 | awk -v p="$load $t" \
      '/^mlp_lazyx_step /{print p, "cpp_mlp_784_512_512_10_step", $2}'
  fi
  LAZYX_NUM_THREADS=$t "$B"/bench/bench_cpu_matmul_compile 3 | awk -v p="$load $t" \
    '/^batched_qkT/{print p, "batched_qkT_8x8x256x64", $3}'
  /usr/bin/python3 bench/thread_steps.py "$t" | awk -v p="$load $t" '{print p, $1, $2}'
}

for load in quiet busy; do
  if [ "$load" = busy ]; then
    (while :; do :; done) &
    busy_pid=$!
  fi
  for ((r = 0; r < ROUNDS; ++r)); do
    for t in 1 2; do measure "$load" "$t"; done
  done
  if [ -n "$busy_pid" ]; then
    kill "$busy_pid"
    wait "$busy_pid" 2>/dev/null || true
    busy_pid=
  fi
done
echo "load average at the end: $(cut -d' ' -f1 /proc/loadavg)"
