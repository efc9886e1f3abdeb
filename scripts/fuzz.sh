#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs each for a
# bounded time on its corpus in fuzz/corpus/<target> (new inputs are kept
# there). Usage: scripts/fuzz.sh [seconds per target, default 60]
#        scripts/fuzz.sh --build-only   (CI builds them ahead, .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
scripts/deps.sh clang libclang-rt-14-dev
. scripts/cache-root.sh
mci_use_ccache
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DMCI_WERROR=ON "${mci_launcher[@]}" -DMCI_BUILD_FUZZERS=ON -DMCI_BUILD_TESTS=OFF -DMCI_WITH_TORCH=OFF \
  -DMCI_BUILD_EXAMPLES=OFF -DMCI_BUILD_BENCH=OFF -DMCI_WITH_GLOO=OFF -DMCI_WITH_NCCL=OFF -DMCI_WITH_MPI=OFF \
  -DMCI_SANITIZE=address,undefined >/dev/null
cmake --build build-fuzz --target store_frame_fuzzer store_records_fuzzer data_stream_fuzzer
[ "$secs" != "--build-only" ] || exit 0
for t in store_frame store_records data_stream; do
  mkdir -p "fuzz/corpus/$t"
  echo "fuzzing $t for ${secs}s"
  ASAN_OPTIONS=detect_leaks=1 build-fuzz/bin/${t}_fuzzer -max_total_time="$secs" -max_len=4096 \
    -print_final_stats=1 "fuzz/corpus/$t" 2>&1 | grep -E "^(stat::number_of_executed_units|stat::new_units_added|.*ERROR|SUMMARY)" || true
  # libFuzzer exits non-zero on a finding; the pipeline above hides it, so check the crash files.
  if ls crash-* leak-* timeout-* >/dev/null 2>&1; then
    echo "fuzz: $t found a problem:"; ls crash-* leak-* timeout-* 2>/dev/null; exit 1
  fi
done
