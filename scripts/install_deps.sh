#!/usr/bin/env bash
# Installs the Debian packages lazyx needs. Idempotent: installs only what is missing.
#   scripts/install_deps.sh [core|cpu|dist|python|all]   (default: all)
set -euo pipefail

core=(build-essential cmake g++ libgtest-dev libgmock-dev libbenchmark-dev)
cpu=(llvm-19-dev libzstd-dev libsleef-dev libdnnl-dev libopenblas-dev)
dist=(libgloo-dev)
python=(python3 python3-dev python3-torch libtorch-dev pybind11-dev python3-pybind11 python3-numpy
        python3-pytest python3-sklearn)

case "${1:-all}" in
  core) want=("${core[@]}") ;;
  cpu) want=("${core[@]}" "${cpu[@]}") ;;
  dist) want=("${core[@]}" "${dist[@]}") ;;
  python) want=("${core[@]}" "${python[@]}") ;;
  all) want=("${core[@]}" "${cpu[@]}" "${dist[@]}" "${python[@]}") ;;
  *) echo "usage: $0 [core|cpu|dist|python|all]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "[install_deps] all ${#want[@]} packages present"
  exit 0
fi
echo "[install_deps] installing: ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# apt's own output is the progress report (downloads and unpacking can take minutes).
echo "[install_deps] apt-get update"
$SUDO apt-get update
echo "[install_deps] apt-get install (${#missing[@]} packages and their dependencies)"
$SUDO apt-get install -y --no-install-recommends -o Dpkg::Progress-Fancy=0 "${missing[@]}"
echo "[install_deps] done"
