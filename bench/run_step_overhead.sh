#!/usr/bin/env bash
# Step overhead vs number of in-place-updated tensors, on both backends, at 1 and 2 threads,
# quiet and next to a busy process the benchmark starts; then compile time vs graph size.
# Usage: bench/run_step_overhead.sh [dir holding the bench binaries, default build/bench]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/bench}
for backend in reference cpu; do
  for threads in 1 2; do
    for busy in "" --busy; do
      echo "# backend=$backend threads=$threads ${busy:-quiet}"
      "$B"/bench_step_overhead --backend "$backend" --threads "$threads" $busy --reps 5 \
        100 300 1000 3000 10000
    done
  done
done
echo "# compile time of an add_ chain, fresh process and empty compile cache per size"
"$B"/bench_compile_scale 1000 2000 5000 10000 100000
LAZYX_CPU_NO_KERNEL_SHARING=1 "$B"/bench_compile_scale 1000 2000 5000 10000
