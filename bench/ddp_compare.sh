#!/usr/bin/env bash
# DDP step time and communication cost on this machine: mci's C++ DDP
# (bench_ddp_step under mcirun) against PyTorch's own DDP in Python on gloo
# (bench/peers/torch_ddp_step.py, Debian's python3-torch), 2 ranks,
# OMP_NUM_THREADS=1, same models, batches and timing:
#   linear: train_ddp's Linear(784, 10), batch 32
#   mlp:    1024-2048-2048-1024-10 (8.4M parameters), batch 8
# Communication cost = step time minus the same step under no_sync(), both
# measured in the same process, in alternating blocks. Hidden share =
# 1 - cost / (one blocking all_reduce of every gradient, same run). Runs
# interleave (mci, torch, torch, mci, ...) over --runs so drift hurts both.
# Prints the median over every block and, in brackets, the range across
# blocks: the noise.
#
#   bench/ddp_compare.sh [--runs N] [--rounds R] [--steps S] [--build DIR] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3 rounds=5 steps=10 build=build out=""
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --steps) steps=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ddp_compare.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
py=/usr/bin/python3  # Debian's python3-torch is only visible to the system python
[ -x "$build/bin/bench_ddp_step" ] || { echo "ddp_compare.sh: $build/bin/bench_ddp_step is missing: configure with LibTorch (libtorch-dev) and build" >&2; exit 1; }
"$py" -c 'import torch' 2>/dev/null || { echo "ddp_compare.sh: $py cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
out=${out:-$(mktemp -d /tmp/mci-ddp-compare.XXXXXX)}
mkdir -p "$out"
results=$out/results.jsonl
: > "$results"
export OMP_NUM_THREADS=1

run_mci() {
  "$build/bin/mcirun" --standalone --nproc_per_node=2 "$build/bin/bench_ddp_step" \
    --model "$1" --rounds "$rounds" --steps "$steps" 2>>"$out/stderr.log" | grep '^{' >> "$results"
}

# torchrun of Debian's torch 1.13 fails under Python 3.11: start the two
# ranks directly with the env:// variables (rank 0 hosts the store).
run_torch() {
  local port pids=()
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 600 "$py" bench/peers/torch_ddp_step.py --model "$1" --rounds "$rounds" --steps "$steps" \
      2>>"$out/stderr.log" | { grep '^{' || true; } >> "$results" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "ddp_compare.sh: a torch rank failed (see $out/stderr.log)" >&2; done
}

for ((i = 0; i < runs; i++)); do
  for model in linear mlp; do
    if ((i % 2 == 0)); then run_mci "$model"; run_torch "$model"; else run_torch "$model"; run_mci "$model"; fi
  done
done

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); raw results: $results"
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def agg(impl, model, key):
    v = [x for r in rows if r["impl"] == impl and r["model"] == model for x in r[key]]
    return statistics.median(v), min(v), max(v)
def ar(impl, model):
    return statistics.median(r["allreduce_ms"] for r in rows if r["impl"] == impl and r["model"] == model)
fmt = "{:<7} {:<11} {:>22} {:>22} {:>22} {:>12} {:>8}"
print(fmt.format("model", "impl", "step ms [range]", "no_sync ms [range]", "comm cost ms [range]", "allreduce ms", "hidden"))
for model in ("linear", "mlp"):
    costs = {}
    for impl in ("mci", "torch-gloo"):
        if not any(r["impl"] == impl and r["model"] == model for r in rows):
            continue
        cells = []
        for key in ("step_ms", "nosync_ms", "cost_ms"):
            m, lo, hi = agg(impl, model, key)
            cells.append(f"{m:.3f} [{lo:.3f}, {hi:.3f}]" if m < 1 else f"{m:.1f} [{lo:.1f}, {hi:.1f}]")
        costs[impl] = agg(impl, model, "cost_ms")[0]
        a = ar(impl, model)
        hidden = max(0.0, 1 - costs[impl] / a) if a > 0 else 0.0
        print(fmt.format(model, impl, *cells, f"{a:.3f}", f"{hidden:.0%}"))
    if costs.get("mci", 0) > 0 and "torch-gloo" in costs:
        print(f"{model}: torch-gloo comm cost / mci comm cost = {costs['torch-gloo'] / costs['mci']:.1f}x")
PY
