#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs
# every test through ctest. Exits non-zero on any failure.
#
#   scripts/test.sh                               build/ , plain build
#   scripts/test.sh --sanitize=address,undefined  build-asan/
#   scripts/test.sh --sanitize=thread             build-tsan/
#   scripts/test.sh --clang                       build-clang/, clang++ Release
#   scripts/test.sh --no-tests                    build only
#   scripts/test.sh -R Matrix                     extra arguments go to ctest
# Compiles through ccache when it is installed, its cache outside the clone
# (scripts/cache-root.sh), so a fresh clone rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=""
clang=0
run_tests=1
ctest_args=()
for a in "$@"; do
  case $a in
    --sanitize=*) sanitize=${a#--sanitize=} ;;
    --clang) clang=1 ;;
    --no-tests) run_tests=0 ;;
    *) ctest_args+=("$a") ;;
  esac
done

scripts/deps.sh
scripts/torch-venv.sh
scripts/wheelhouse.sh
. scripts/cache-root.sh
mci_use_ccache

build=build
case $sanitize in
  "") ;;
  thread) build=build-tsan ;;
  *) build=build-asan ;;
esac
compiler=()
if [ $clang = 1 ]; then
  scripts/deps.sh clang
  build=build-clang
  compiler=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release)
fi

cmake -S . -B "$build" -G Ninja -DMCI_SANITIZE="$sanitize" -DMCI_WERROR=ON "${mci_launcher[@]}" "${compiler[@]}" \
  -DMCI_TORCH2_PYTHON="$(scripts/torch-venv.sh --python)" >/dev/null
cmake --build "$build"
[ $run_tests = 1 ] || exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${ctest_args[@]}"
