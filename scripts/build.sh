#!/usr/bin/env bash
# Configures and builds lazyx into build/ (Release, all components that can be built here).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DLAZYX_BUILD_PYTHON=ON "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
