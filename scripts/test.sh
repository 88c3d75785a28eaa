#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs every test through CTest
# (GoogleTest cases, the fuzz batch and the pytest suites are all registered there).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh all
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)"
