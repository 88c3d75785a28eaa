#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the example training job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh all
scripts/build.sh
"${BUILD_DIR:-build}"/examples/seed_and_sgd
