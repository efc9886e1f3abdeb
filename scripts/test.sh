#!/usr/bin/env bash
# The test command: installs what is missing, configures, builds and runs
# every test through ctest. Exits non-zero on any failure.
#
#   scripts/test.sh                               build/ , plain build
#   scripts/test.sh --sanitize=address,undefined  build-asan/
#   scripts/test.sh --sanitize=thread             build-tsan/
#   scripts/test.sh --clang                       build-clang/, clang++ Release
#   scripts/test.sh --clang --sanitize=...        build-asan-clang/ (or -tsan-), the sanitizers of clang
#   scripts/test.sh --debug                       build-debug/, g++ Debug (assertions on, no optimizer)
#   scripts/test.sh --unity                       sources compiled in batches (cmake/unity.cmake):
#                                                 half the CPU time of a clean build; --debug and
#                                                 --clang without --sanitize always are, CI's
#                                                 sanitizer run asks for it
#   scripts/test.sh --no-tests                    build only
#   scripts/test.sh --quick                       the loop after a change: builds everything, runs
#                                                 every test but the torch jobs (label "torch": about
#                                                 90% of the suite's time) and skips the libtorch2 tier
#   scripts/test.sh -R Matrix                     extra arguments go to ctest
# The plain build also builds and runs the LibTorch tier on PyPI's torch
# (scripts/torch-pin.txt) in build-libtorch2/: mci::torch's tests
# (libtorch2.*) against the wheel's LibTorch, while build/ keeps Debian's
# (libtorch1.*); one CMake tree holds one Torch (cmake/find_libtorch.cmake).
# Compiles through ccache when it is installed, its cache outside the clone
# (scripts/cache-root.sh), so a fresh clone rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=""
clang=0
debug=0
run_tests=1
quick=0
unity=0
ctest_args=()
for a in "$@"; do
  case $a in
    --sanitize=*) sanitize=${a#--sanitize=} ;;
    --clang) clang=1 ;;
    --debug) debug=1 ;;
    --no-tests) run_tests=0 ;;
    --quick) quick=1 ;;
    --unity) unity=1 ;;
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
if [ $clang = 1 ] && [ -n "$sanitize" ]; then
  # A sanitizer tree compiled by clang (build-asan-clang/, build-tsan-clang/):
  # the runtimes come from libclang-rt. CI's ASan+UBSan run uses it: clang
  # instruments in about 60% of g++'s CPU time (a batch of transport tests:
  # 11.9 s against 17.9 s; test_job_view.cpp: 15.8 s against 26.4 s).
  scripts/deps.sh clang libclang-rt-14-dev
  build=$build-clang
  compiler=(-DCMAKE_CXX_COMPILER=clang++)
elif [ $clang = 1 ]; then
  scripts/deps.sh clang
  build=build-clang
  compiler=(-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release)
  unity=1
fi

if [ $debug = 1 ]; then
  # The library, the tools and the suites without the torch parts: at -O0
  # their LibTorch headers cost most of the build, and the plain build tests
  # them.
  build=build-debug
  compiler=(-DCMAKE_BUILD_TYPE=Debug -DMCI_WITH_TORCH=OFF -DMCI_WITH_TORCH_EXT=OFF)
  unity=1
fi
# The trees that CI builds only to run them (clang, Debug, and the
# sanitizers when asked) compile their sources in batches: after a change
# to a header that every source includes, each is a clean build, and the
# batches halve its CPU time. build/ compiles each source alone, which
# keeps every source's own includes checked and a one-file change cheap.
compiler+=(-DMCI_UNITY_BUILD=$([ $unity = 1 ] && echo ON || echo OFF))

# The plain build and the libtorch2 tier: RelWithDebInfo with line tables
# only (-g1), enough for a stack trace's file:line, where CMake's -g emits
# full debug info that costs a third of a LibTorch source's compile
# (libtorch_ddp.cpp alone, g++ 12: 15.7 s at -O2 -g, 11.1 s at -O2 -g1).
# A user's build keeps CMake's -O2 -g; the other trees set their own flags.
line_tables=()
[ -n "$sanitize" ] || [ $clang = 1 ] || [ $debug = 1 ] || line_tables=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

torch2_python=$(scripts/torch-venv.sh --python)
# MCI_LIBTORCH_PYTHON=OFF: build/ keeps Debian's LibTorch (the libtorch1
# tier) even when run from a venv that has a torch wheel.
cmake -S . -B "$build" -G Ninja -DMCI_SANITIZE="$sanitize" -DMCI_WERROR=ON "${mci_launcher[@]}" "${compiler[@]}" "${line_tables[@]}" \
  -DMCI_TORCH2_PYTHON="$torch2_python" -DMCI_LIBTORCH_PYTHON=OFF >/dev/null
cmake --build "$build"

# The libtorch2 tier, plain build only: the same sources configured against
# the wheel's LibTorch, building only test_torch_ddp and what it starts
# (mcirun, train_ddp, train_multinode); its objects are ccache hits from
# build/'s (most of libmci) or from the last run (the backends layer, built
# here without gloo and nccl). Skipped, saying so, without the venv.
libtorch2=0
if [ -z "$sanitize" ] && [ $clang = 0 ] && [ $debug = 0 ] && [ $quick = 0 ]; then
  if [ -x "$torch2_python" ]; then
    libtorch2=1
    start=$SECONDS
    # MCI_WITH_NCCL=OFF, MCI_WITH_GLOO=OFF: the wheel's libtorch carries
    # its own NCCL (nvidia-nccl, newer than Debian's) and its own Gloo;
    # libmci's backends link Debian's, and one process cannot hold both
    # (the gloo example crashes in it). The gloo case then skips, saying so.
    cmake -S . -B build-libtorch2 -G Ninja -DMCI_WERROR=ON "${mci_launcher[@]}" "${line_tables[@]}" -DMCI_WITH_TORCH=ON \
      -DMCI_LIBTORCH_PYTHON="$torch2_python" -DMCI_WITH_TORCH_EXT=OFF -DMCI_TORCH2_PYTHON="$torch2_python" \
      -DMCI_WITH_NCCL=OFF -DMCI_WITH_GLOO=OFF >/dev/null
    cmake --build build-libtorch2 --target test_torch_ddp
    libtorch2_build_s=$((SECONDS - start))
  else
    echo "test.sh: libtorch2 tier skipped: $torch2_python does not exist (scripts/torch-venv.sh installs $(grep -m1 '^torch==' scripts/torch-pin.txt) there)"
  fi
fi
[ $run_tests = 1 ] || exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# tests/tsan.supp: the one known false report (an exception_ptr freed on
# another thread than the one that read it), and why.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}
rc=0
[ $quick = 0 ] || ctest_args=(-LE torch "${ctest_args[@]}")
# ctest starts the tests that took longest in earlier runs first, so that
# the few long ones (the wheel's build, torch's conformance suite) overlap
# the many short ones instead of ending the run alone. Its record of those
# times lives in the build folder; it is kept beside ccache's objects, so a
# fresh clone on the same machine orders its run as well.
costs=$mci_cache_root/ctest-costs/$build.txt
mkdir -p "$build/Testing/Temporary" "$(dirname "$costs")"
if [ ! -f "$build/Testing/Temporary/CTestCostData.txt" ] && [ -f "$costs" ]; then
  cp "$costs" "$build/Testing/Temporary/CTestCostData.txt"
fi
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" "${ctest_args[@]}" || rc=$?
cp "$build/Testing/Temporary/CTestCostData.txt" "$costs" 2>/dev/null || true
if [ $libtorch2 = 1 ]; then
  # Only the libtorch2.* tests are built there; arguments given to this
  # script select among them (the other programs' placeholders, *_NOT_BUILT,
  # are left out).
  select=(-R '^libtorch2\.')
  [ ${#ctest_args[@]} = 0 ] || select=(-E '_NOT_BUILT$' "${ctest_args[@]}")
  start=$SECONDS
  ctest --test-dir build-libtorch2 --output-on-failure -j "$(nproc)" "${select[@]}" || rc=$?
  echo "test.sh: libtorch2 tier (LibTorch of $torch2_python): build ${libtorch2_build_s}s, tests $((SECONDS - start))s"
fi
exit $rc
