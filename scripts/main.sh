#!/usr/bin/env bash
# The main job: installs dependencies, builds, and trains an MLP with PyTorch on the lazyx device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh all
# Only what the job needs: the library and the Python package (not the tests, benchmarks, fuzzer).
LAZYX_BUILD_TARGETS="lazyx_python" scripts/build.sh
B=${BUILD_DIR:-build}
# PyTorch on lazyx: an MLP trained on sklearn's digits.
LAZYX_PYTHONPATH="$PWD/$B/python" .venv/bin/python examples/train_digits.py
# The same MLP data parallel: 2 processes, each with its shard, DDP on the "lazyx" backend.
LAZYX_PYTHONPATH="$PWD/$B/python" .venv/bin/python examples/train_digits_ddp.py
