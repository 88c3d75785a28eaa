#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains an MLP with PyTorch on the lazyx device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh all
scripts/build.sh
B=${BUILD_DIR:-build}
# PyTorch on lazyx: an MLP trained on sklearn's digits (issue 4's main job).
LAZYX_PYTHONPATH="$PWD/$B/python" /usr/bin/python3 examples/train_digits.py
