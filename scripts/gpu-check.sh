#!/usr/bin/env bash
# Every GPU check in one run, for a machine with an NVIDIA GPU: builds (reusing
# the build folder when present), runs the GPU tests, the lab's nccl branch
# with one process (NCCL world 1), the cpu backend on device buffers with 2
# ranks on one GPU, and mci-perf sweeps with NCCL beside torch.distributed's
# (when PyTorch is installed), the monitor's page on nccl (durations from
# CUDA events), torch on the GPU with mci ("cpu:mci,cuda:nccl" and DDP on
# CUDA tensors; with --prebuilt, mci_torch's extension is compiled against
# this machine's torch), and the topology as nvidia-smi, hwloc, NCCL and
# mci-topo see it (cells compared); everything goes to a log. A few minutes on one GPU.
#
# Usage: scripts/gpu-check.sh [--prebuilt] [log file]
#   MCI_BUILD_DIR   build folder (default build)
#   --prebuilt      use the binaries in MCI_BUILD_DIR as they are (built on
#                   another machine: a GPU host without the build's packages);
#                   libraries missing there are looked for in MCI_BUILD_DIR/lib,
#                   the CUDA toolkit and Python's NVIDIA wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
prebuilt=0
if [ "${1:-}" = "--prebuilt" ]; then prebuilt=1; shift; fi
log=${1:-gpu-check.log}
build=${MCI_BUILD_DIR:-build}
exec > >(tee "$log") 2>&1
echo "== gpu-check $(date -u +%FT%TZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi -L
status=0
step() { echo; echo "== $*"; }
run() { echo "\$ $*"; "$@"; local rc=$?; [ $rc -eq 0 ] || { echo "FAILED (exit $rc): $*"; status=1; }; return 0; }

# Adds the folder holding $1 to LD_LIBRARY_PATH when the dynamic loader
# cannot find it.
find_lib() {
  local lib=$1 d
  ldd "$build/src/libmci.so.0" 2>/dev/null | grep -q "$lib => not found" || return 0
  local roots="$build/lib /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu /opt"
  roots+=" $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null)"
  for d in $roots; do
    [ -d "$d" ] || continue
    local hit
    hit=$(find "$d" -maxdepth 5 -name "$lib" 2>/dev/null | head -1)
    if [ -n "$hit" ]; then
      export LD_LIBRARY_PATH="$(dirname "$hit")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "using $hit"
      return 0
    fi
  done
  echo "cannot find $lib"
}

if [ $prebuilt -eq 1 ]; then
  step "prebuilt binaries in $build"
  [ -x "$build/bin/test_gpu" ] || { echo "no $build/bin/test_gpu: build with -DMCI_BUILD_TESTS=ON first"; exit 1; }
  export LD_LIBRARY_PATH="$PWD/$build/src:$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for lib in libnccl.so.2 libcudart.so.13 libcudart.so.12 libfmt.so.9 libcrypto.so.3; do find_lib "$lib"; done
  if ldd "$build/src/libmci.so.0" | grep "not found"; then echo "libraries missing"; exit 1; fi
else
  step "build"
  if ! command -v ninja >/dev/null || ! dpkg -s libfmt-dev >/dev/null 2>&1; then scripts/deps.sh || true; fi
  cmake -S . -B "$build" -G Ninja -DMCI_WERROR=ON -DMCI_BUILD_TESTS=ON >/dev/null || { echo "configure failed"; exit 1; }
  grep -q "nccl_backend" "$build/build.ninja" || echo "note: NCCL was not found; set MCI_CUDA_ROOT"
  cmake --build "$build" -j "$(nproc)" || { echo "build failed"; exit 1; }
fi
bin=$build/bin

step "GPU tests"
run timeout 300 "$bin/test_gpu"

step "labo, nccl branch, one process (NCCL world of 1)"
# The lab needs two ranks, so with one it prints its RANK line with
# backend=nccl and stops with 'Ce laboratoire attend WORLD_SIZE=2.' (exit 1).
out=$(timeout 120 env MCI_BACKEND=nccl "$bin/mcirun" --standalone --nproc_per_node=1 "$bin/labo" 2>&1)
echo "$out"
if echo "$out" | grep -q "backend=nccl" && echo "$out" | grep -q "Ce laboratoire attend WORLD_SIZE=2."; then
  echo "ok: the nccl branch initialised NCCL on GPU 0"
else
  echo "FAILED: expected backend=nccl and the WORLD_SIZE=2 message"; status=1
fi

step "labo, cpu backend, 2 ranks (shm path on this machine)"
run timeout 120 env MCI_BACKEND=cpu "$bin/mcirun" --standalone --nproc_per_node=2 "$bin/labo"

step "mci-perf, nccl, world of 1: each call waited (-z 1), then back to back (-z 0)"
if [ -x "$bin/mci-perf" ]; then
  for z in 1 0; do
    run timeout 300 "$bin/mcirun" --standalone --nproc_per_node=1 "$bin/mci-perf" all_reduce --backend nccl \
        -b 8 -e 1G -f 4 -n 20 -w 5 -c 1 -z $z
  done
  step "mci-perf, cpu backend on device buffers, 2 ranks on one GPU"
  run timeout 300 "$bin/mcirun" --standalone --nproc_per_node=2 "$bin/mci-perf" all_reduce --backend cpu \
      --device cuda -b 8 -e 256M -f 8 -n 10 -w 2 -c 1
else
  echo "mci-perf not built; skipped"
fi

step "torch.distributed beside it (same sizes and timing), when PyTorch is here"
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  for z in 1 0; do
    run timeout 300 env LD_LIBRARY_PATH= python3 bench/peers/torch_perf.py --backend nccl -b 8 -e 1G -f 4 -n 20 -w 5 -z $z
  done
else
  echo "PyTorch with CUDA not found; skipped"
fi

step "the monitor on nccl: durations from CUDA events in the page and /metrics"
if [ -x "$bin/mci-perf" ]; then
  run timeout 180 python3 tests/python/gpu_monitor_check.py "$bin/mcirun" "$bin/mci-perf"
fi

step "torch with mci on this GPU: \"cpu:mci,cuda:nccl\", DDP on CUDA tensors"
# mci_torch's C++ extension must match this machine's torch: a build here
# made it (the torch extension of a normal build); --prebuilt binaries come
# from elsewhere, so it is compiled here against this torch's headers.
torch_ext_here() {
  local pkg=$1 objs=() src cxx
  cxx=$(command -v g++ || command -v c++ || command -v clang++) || { echo "no C++ compiler here"; return 1; }
  eval "$(python3 - <<'PY'
import sysconfig
import torch
from torch.utils import cpp_extension as ce
inc = ce.include_paths() + [sysconfig.get_paths()["include"]]
print("inc='%s'" % " ".join("-isystem " + p for p in inc))
print("libdir='%s'" % ce.library_paths()[0])
print("suffix='%s'" % sysconfig.get_config_var("EXT_SUFFIX"))
print("ver='%s'" % torch.__version__)
print("abi=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
PY
)" || return 1
  mkdir -p "$pkg/obj"
  for src in bindings/python/mci_torch/csrc/*.cpp; do
    objs+=("$pkg/obj/$(basename "$src" .cpp).o")
    # shellcheck disable=SC2086
    "$cxx" -std=c++20 -O2 -fPIC -fvisibility=hidden -Iinclude $inc -DMCI_TORCH_EXT_TORCH_VERSION="\"$ver\"" \
        -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI=$abi \
        -c "$src" -o "${objs[-1]}" &
  done
  wait
  "$cxx" -shared -o "$pkg/_C$suffix" "${objs[@]}" "$PWD/$build/src/libmci.so.0" -L"$libdir" -ltorch -ltorch_cpu \
      -ltorch_python -lc10 -Wl,-rpath,"$PWD/$build/src"
}
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  pkg=$build/python/mci_torch
  if [ $prebuilt -eq 1 ]; then
    mkdir -p "$pkg"
    cp bindings/python/mci_torch/*.py "$pkg/"
    echo "LIBRARY = \"$PWD/$build/src/libmci.so.0\"" > "$pkg/_libpath.py"
    start=$SECONDS
    if torch_ext_here "$pkg"; then echo "built mci_torch._C against torch here in $((SECONDS - start)) s"
    else echo "FAILED: mci_torch._C did not build against this torch"; status=1; fi
  fi
  run timeout 300 env MCI_TORCH_PATH=ext "$bin/mcirun" --standalone --nproc_per_node=gpu python3 tests/python/gpu_torch_check.py
else
  echo "PyTorch with CUDA not found; skipped"
fi

step "topology: nvidia-smi beside mci-topo (live and on NCCL's own dump)"
# Saves what nvidia-smi, hwloc and NCCL say about the wiring, then compares
# nvidia-smi's matrix cells with mci-topo's, live and from NCCL's dump.
topo_dir=${log%.log}-topo
mkdir -p "$topo_dir"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi topo -m > "$topo_dir/nvidia-smi-topo-m.txt" 2>&1
  nvidia-smi topo -p2p r > "$topo_dir/nvidia-smi-topo-p2p-r.txt" 2>&1
fi
if command -v lstopo >/dev/null; then
  lstopo --of xml > "$topo_dir/lstopo.xml" 2>&1
else
  run "$bin/mci-topo" --export-hwloc-xml "$topo_dir/lstopo.xml"
fi
if [ -x "$bin/mci-perf" ]; then
  NCCL_TOPO_DUMP_FILE="$PWD/$topo_dir/nccl-topo.xml" timeout 120 "$bin/mcirun" --standalone --nproc_per_node=1 \
      "$bin/mci-perf" all_reduce --backend nccl -b 8 -e 1M -f 4 -n 2 -w 1 > "$topo_dir/nccl-dump-run.txt" 2>&1
fi
run "$bin/mci-topo" -m > "$topo_dir/mci-topo-live-m.txt" 2>&1
"$bin/mci-topo" -p2p r > "$topo_dir/mci-topo-live-p2p-r.txt" 2>&1
"$bin/mci-topo" --format json > "$topo_dir/mci-topo-live.json" 2>&1
cat "$topo_dir/mci-topo-live-m.txt"
# The GPU-by-GPU cells (nvidia-smi lists only RDMA-capable NICs, mci-topo
# every NIC, so NIC columns are left out).
gpu_cells() { awk -F'\t' 'NR==1 { n = 0; for (i = 2; i <= NF; i++) if ($i ~ /^GPU[0-9]+$/) n++ }
                           $1 ~ /^GPU[0-9]+$/ { line = $1; for (i = 2; i <= n + 1; i++) { c = $i; gsub(/ /, "", c); line = line " " c }; print line }' "$1"; }
if [ -s "$topo_dir/nvidia-smi-topo-m.txt" ]; then
  if diff <(gpu_cells "$topo_dir/nvidia-smi-topo-m.txt") <(gpu_cells "$topo_dir/mci-topo-live-m.txt"); then
    echo "ok: mci-topo's live GPU cells match nvidia-smi's"
  else
    echo "FAILED: mci-topo's live GPU cells differ from nvidia-smi's (above)"; status=1
  fi
  if [ -s "$topo_dir/nccl-topo.xml" ]; then
    "$bin/mci-topo" -m --nccl-xml "$topo_dir/nccl-topo.xml" > "$topo_dir/mci-topo-nccl-m.txt" 2>&1
    cat "$topo_dir/mci-topo-nccl-m.txt"
    # NCCL's XML has no host bridges: PHB and NODE may trade places there.
    diff <(gpu_cells "$topo_dir/nvidia-smi-topo-m.txt") <(gpu_cells "$topo_dir/mci-topo-nccl-m.txt") \
      && echo "ok: the GPU cells from NCCL's dump match nvidia-smi's" \
      || echo "note: the GPU cells from NCCL's dump differ from nvidia-smi's (above)"
  fi
fi
echo "saved in $topo_dir/"

step "result"
if [ $status -eq 0 ]; then echo "gpu-check: all steps passed"; else echo "gpu-check: some steps FAILED"; fi
exit $status
