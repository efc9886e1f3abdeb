#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs
# every test through ctest. Exits non-zero on any failure.
#
#   scripts/test.sh                               build/ , plain build
#   scripts/test.sh --sanitize=address,undefined  build-asan/
#   scripts/test.sh --sanitize=thread             build-tsan/
#   scripts/test.sh -R Matrix                     extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=""
ctest_args=()
for a in "$@"; do
  case $a in
    --sanitize=*) sanitize=${a#--sanitize=} ;;
    *) ctest_args+=("$a") ;;
  esac
done

scripts/deps.sh
scripts/torch-venv.sh
. scripts/cache-root.sh
mci_use_ccache

build=build
case $sanitize in
  "") ;;
  thread) build=build-tsan ;;
  *) build=build-asan ;;
esac

cmake -S . -B "$build" -G Ninja -DMCI_SANITIZE="$sanitize" -DMCI_WERROR=ON "${mci_launcher[@]}" \
  -DMCI_TORCH2_PYTHON="$(scripts/torch-venv.sh --python)" >/dev/null
cmake --build "$build"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${ctest_args[@]}"
