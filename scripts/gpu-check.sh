#!/usr/bin/env bash
# Every GPU check in one run, for a machine with an NVIDIA GPU: builds (reusing
# build/ when present), runs the GPU tests, the lab's nccl branch with one
# process (NCCL world 1), the cpu backend on device buffers with 2 ranks on
# one GPU, and an mci-perf sweep with NCCL; everything goes to a log.
# Finishes in a few minutes on one GPU. Usage: scripts/gpu-check.sh [log file]
set -uo pipefail
cd "$(dirname "$0")/.."
log=${1:-gpu-check.log}
exec > >(tee "$log") 2>&1
echo "== gpu-check $(date -u +%FT%TZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi -L
status=0
step() { echo; echo "== $*"; }
run() { echo "\$ $*"; "$@"; local rc=$?; [ $rc -eq 0 ] || { echo "FAILED (exit $rc): $*"; status=1; }; return 0; }

step "build"
if ! command -v ninja >/dev/null || ! dpkg -s libfmt-dev >/dev/null 2>&1; then scripts/deps.sh || true; fi
cmake -S . -B build -G Ninja -DMCI_BUILD_TESTS=ON >/dev/null || { echo "configure failed"; exit 1; }
grep -q "MCI_HAVE_NCCL:INTERNAL=ON\|nccl_backend" build/build.ninja || echo "note: NCCL was not found; set MCI_CUDA_ROOT"
cmake --build build -j "$(nproc)" || { echo "build failed"; exit 1; }

step "GPU tests"
run timeout 300 build/bin/test_gpu

step "labo, nccl branch, one process (NCCL world of 1)"
# The lab needs two ranks, so with one it prints its RANK line with
# backend=nccl and stops with 'Ce laboratoire attend WORLD_SIZE=2.' (exit 1).
out=$(timeout 120 env MCI_BACKEND=nccl build/bin/mcirun --standalone --nproc_per_node=1 build/bin/labo 2>&1)
echo "$out"
if echo "$out" | grep -q "backend=nccl" && echo "$out" | grep -q "Ce laboratoire attend WORLD_SIZE=2."; then
  echo "ok: the nccl branch initialised NCCL on GPU 0"
else
  echo "FAILED: expected backend=nccl and the WORLD_SIZE=2 message"; status=1
fi

step "cpu backend on device buffers, 2 ranks on one GPU"
run timeout 300 build/bin/test_gpu --gtest_filter='*CpuBackendStages*'

step "mci-perf, nccl, world of 1"
if [ -x build/bin/mci-perf ]; then
  run timeout 300 build/bin/mcirun --standalone --nproc_per_node=1 build/bin/mci-perf all_reduce --backend nccl \
      -b 8 -e 256M -f 4 -n 20 -w 5 -c 1
  run timeout 300 build/bin/mcirun --standalone --nproc_per_node=2 build/bin/mci-perf all_reduce --backend cpu \
      --device cuda -b 8 -e 64M -f 8 -n 10 -w 2 -c 1
else
  echo "mci-perf not built; skipped"
fi

step "result"
if [ $status -eq 0 ]; then echo "gpu-check: all steps passed"; else echo "gpu-check: some steps FAILED"; fi
exit $status
