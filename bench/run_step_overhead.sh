#!/usr/bin/env bash
# Step overhead vs number of in-place-updated tensors, on both backends, at 1 and 2 threads,
# quiet and next to a busy process the benchmark starts. Usage: bench/run_step_overhead.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
for backend in reference cpu; do
  for threads in 1 2; do
    for busy in "" --busy; do
      echo "# backend=$backend threads=$threads ${busy:-quiet}"
      "$B"/bench/bench_step_overhead --backend "$backend" --threads "$threads" $busy --reps 5 \
        100 300 1000 3000 10000
    done
  done
done
