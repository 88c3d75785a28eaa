#!/usr/bin/env bash
# Installs what lazyx needs. Idempotent: installs only what is missing.
#   scripts/install_deps.sh [--check] [core|cpu|dist|python|all]   (default: all)
# --check installs nothing: it names what is missing in one line and exits 1 (scripts/build.sh).
# Debian's packages come from apt by name. For python (and all), .venv at the repository root is
# made from the machine's python3 (LAZYX_PYTHON picks another) and gets requirements.txt's pins:
# torch 2.13.0 and the test and example packages. Every script then uses .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."

core=(build-essential cmake g++ libgtest-dev libgmock-dev libbenchmark-dev)
cpu=(llvm-19-dev libzstd-dev libsleef-dev libdnnl-dev libopenblas-dev)
dist=(libgloo-dev)
python=()

check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
case "${1:-all}" in
  core) want=("${core[@]}") ;;
  cpu) want=("${core[@]}" "${cpu[@]}") ;;
  dist) want=("${core[@]}" "${dist[@]}") ;;
  python) want=("${core[@]}" "${python[@]}") ;;
  all) want=("${core[@]}" "${cpu[@]}" "${dist[@]}" "${python[@]}") ;;
  *) echo "usage: $0 [core|cpu|dist|python|all]" >&2; exit 2 ;;
esac

py=${LAZYX_PYTHON:-python3}
venv=.venv
if [ "${1:-all}" = python ] || [ "${1:-all}" = all ]; then
  # The machine's python3 needs venv and its headers (Debian's python3 has them in packages).
  if ! command -v "$py" >/dev/null; then
    want+=(python3 python3-dev python3-venv)
  elif ! "$py" -c 'import venv, ensurepip, sysconfig, os, sys
sys.exit(0 if os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' \
      2>/dev/null; then
    [ "$(command -v "$py")" = /usr/bin/python3 ] ||
      { echo "[install_deps] $py lacks venv, ensurepip or its headers (Python.h); install them" \
        "for that interpreter or set LAZYX_PYTHON to one that has them" >&2; exit 1; }
    want+=(python3-dev python3-venv)
  fi
fi

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$check" = 1 ]; then
  [ -x "$venv/bin/python" ] || [ "${1:-all}" = core ] || [ "${1:-all}" = cpu ] ||
    [ "${1:-all}" = dist ] || missing+=("(the .venv with torch)")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[lazyx] missing: ${missing[*]}; run scripts/install_deps.sh" >&2
    exit 1
  fi
  exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "[install_deps] all ${#want[@]} Debian packages present"
else
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
fi

if [ "${1:-all}" = python ] || [ "${1:-all}" = all ]; then
  if [ ! -x "$venv/bin/python" ]; then
    echo "[install_deps] creating $venv from $(command -v "$py") ($("$py" --version 2>&1))"
    "$py" -m venv "$venv"
  fi
  # pip checks the pins against what is installed and downloads nothing when all are there.
  if "$venv/bin/python" - requirements.txt <<'EOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    try:
        have = version(name).split("+")[0]
    except PackageNotFoundError:
        sys.exit(1)
    if have != want:
        sys.exit(1)
EOF
  then
    echo "[install_deps] $venv has every pin of requirements.txt"
  else
    echo "[install_deps] pip install -r requirements.txt into $venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check -r requirements.txt
  fi
fi
