#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan+UBSan) and runs them for a
# bounded time on their corpora in fuzz/corpus/<target> (new inputs are kept
# there). The targets run side by side, one process each, sharing the
# machine's cores: on 2 cores, 60 s gives each about the 40 s of CPU that one
# after the other on one core gave, in a third of the wall time.
# Usage: scripts/fuzz.sh [seconds, default 60]
#        scripts/fuzz.sh --build-only   (CI builds them ahead, .ci/run)
# A finding's input is kept as build-fuzz/findings/<target>/crash-* (or
# leak-*, timeout-*); rerun it with build-fuzz/bin/<target>_fuzzer <file>.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
targets=(store_frame store_records data_stream)
scripts/deps.sh clang libclang-rt-14-dev
. scripts/cache-root.sh
mci_use_ccache
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DMCI_WERROR=ON "${mci_launcher[@]}" -DMCI_BUILD_FUZZERS=ON -DMCI_BUILD_TESTS=OFF -DMCI_WITH_TORCH=OFF \
  -DMCI_BUILD_EXAMPLES=OFF -DMCI_BUILD_BENCH=OFF -DMCI_WITH_GLOO=OFF -DMCI_WITH_NCCL=OFF -DMCI_WITH_MPI=OFF \
  -DMCI_SANITIZE=address,undefined >/dev/null
cmake --build build-fuzz --target "${targets[@]/%/_fuzzer}"
[ "$secs" != "--build-only" ] || exit 0

# Each fuzzer's output goes to its own log, shown once all have ended, so
# that the three do not interleave. The fuzzers are ended with this script.
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "build-fuzz/findings/$t"
  rm -f "build-fuzz/findings/$t"/* "build-fuzz/$t.log"
  ASAN_OPTIONS=detect_leaks=1 build-fuzz/bin/${t}_fuzzer -max_total_time="$secs" -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$t/" "fuzz/corpus/$t" >"build-fuzz/$t.log" 2>&1 &
  pids+=($!)
done
echo "fuzzing ${targets[*]} side by side for ${secs}s"
rc=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  # libFuzzer exits non-zero on a finding and writes its input under the
  # artifact prefix; either one fails the run.
  status=0
  wait "${pids[$i]}" || status=$?
  echo "$t:"
  grep -E "^(stat::number_of_executed_units|stat::new_units_added|.*ERROR|SUMMARY)" "build-fuzz/$t.log" || true
  if [ $status != 0 ] || [ -n "$(ls -A "build-fuzz/findings/$t")" ]; then
    echo "fuzz: $t found a problem (exit $status; its log: build-fuzz/$t.log):"
    ls "build-fuzz/findings/$t"
    rc=1
  fi
done
pids=()
exit $rc
