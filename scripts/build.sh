#!/usr/bin/env bash
# Configures and builds lazyx into build/ (Release, all components that can be built here), then
# installs the Python package from that build into .venv (cmake --install, component python), so
# `.venv/bin/python -c "import lazyx"` works with no PYTHONPATH.
#   scripts/build.sh [cmake configure options...]
# LAZYX_BUILD_TARGETS="t1 t2" builds only those targets (and what they need) instead of all.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# One line naming what is missing (a Debian package, the venv), instead of CMake's errors.
scripts/install_deps.sh --check all
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DLAZYX_BUILD_PYTHON=ON "$@" >/dev/null
targets=()
for t in ${LAZYX_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
if [ -f "$BUILD_DIR/python/lazyx/_build_info.py" ]; then
  cmake --install "$BUILD_DIR" --component python --prefix .venv >/dev/null
  echo "[build] lazyx installed into .venv from $BUILD_DIR"
fi
