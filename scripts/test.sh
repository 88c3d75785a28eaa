#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs the CTest suites (GoogleTest
# cases, the fuzz batch and self-test, the install test), then the PyTorch device's pytest suites
# directly with .venv/bin/python (they are not registered in CTest), then the C++ tests and the
# fuzz batch again under AddressSanitizer and UndefinedBehaviorSanitizer.
# Each phase starts with a header and ends with its duration; a summary of the durations comes
# before the last line, which counts every test of every run.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build}
A=${ASAN_BUILD_DIR:-build-asan}
jobs=$(nproc)
log=$(mktemp)
# Tests compile into a compile cache of their own, never the user's ~/.cache/lazyx.
test_cache=
if [ -z "${LAZYX_CACHE_DIR+set}" ]; then
  test_cache=$(mktemp -d)
  export LAZYX_CACHE_DIR=$test_cache
fi
trap 'rm -f "$log"; [ -z "$test_cache" ] || rm -rf "$test_cache"' EXIT

durations=()
phase_name=""
phase_t0=0
phase() {  # phase NAME: closes the running phase (printing its duration) and opens NAME
  if [ -n "$phase_name" ]; then
    local d=$((SECONDS - phase_t0))
    durations+=("$(printf '%-16s %4dm%02ds' "$phase_name" $((d / 60)) $((d % 60)))")
    echo "=== $phase_name: done in $((d / 60))m$((d % 60))s ==="
  fi
  phase_name=$1
  phase_t0=$SECONDS
  [ -n "$phase_name" ] && echo && echo "=== $phase_name ==="
  return 0
}

phase "dependencies"
scripts/install_deps.sh all
phase "build"
scripts/build.sh

status=0
phase "CTest"
ctest --test-dir "$B" --output-on-failure -j"$jobs" 2>&1 | tee -a "$log" || status=1

# The PyTorch device's pytest suites, against the package the build assembled.
phase "pytest"
pylog=$(mktemp)
LAZYX_PYTHONPATH="$PWD/$B/python" .venv/bin/python -m pytest -q -p no:cacheprovider python/tests \
  2>&1 | tee "$pylog" || status=1

if [ "${LAZYX_SKIP_SANITIZERS:-0}" != 1 ]; then
  # The JIT backend's generated code is not instrumented, so the sanitizer run covers the
  # engine, the reference backend and the fuzzer.
  phase "sanitizer build"
  cmake -S . -B "$A" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLAZYX_SANITIZE=ON -DLAZYX_WITH_CPU=OFF \
    -DLAZYX_BUILD_BENCH=OFF -DLAZYX_BUILD_EXAMPLES=OFF -DLAZYX_BUILD_PYTHON=OFF >/dev/null
  cmake --build "$A" -j"$jobs"
  phase "sanitizer tests"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir "$A" --output-on-failure -j"$jobs" 2>&1 | tee -a "$log" || status=1
fi
phase ""
echo
echo "durations:"
printf '  %s\n' "${durations[@]}"

# One closing line for every run: "total: N passed, M failed".
read -r failed total < <(grep -Eo '[0-9]+ tests failed out of [0-9]+' "$log" |
  awk '{f += $1; t += $6} END {print f + 0, t + 0}')
summary=$(tail -n 1 "$pylog")
count() {  # count WORDS...: the sum of "N word" in the pytest summary line (0 when absent)
  local n=0 w m
  for w in "$@"; do
    m=$(grep -Eo "[0-9]+ $w\b" <<<"$summary" | grep -Eo '^[0-9]+' || true)
    n=$((n + ${m:-0}))
  done
  echo "$n"
}
py_passed=$(count passed)
py_failed=$(count failed error errors)
rm -f "$pylog"
echo "total: $((total - failed + py_passed)) passed, $((failed + py_failed)) failed"
exit $status
