#!/usr/bin/env bash
# Configures and builds lazyx into build/ (Release, all components that can be built here).
#   scripts/build.sh [cmake configure options...]
# LAZYX_BUILD_TARGETS="t1 t2" builds only those targets (and what they need) instead of all.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DLAZYX_BUILD_PYTHON=ON "$@" >/dev/null
targets=()
for t in ${LAZYX_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
