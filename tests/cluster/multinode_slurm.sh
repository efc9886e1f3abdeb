#!/usr/bin/env bash
# Multi-node jobs under Slurm, on two network namespaces as hosts: the seed's
# commands with nothing exported by hand but the job token.
#
#   tests/cluster/multinode_slurm.sh BUILD_DIR TOOLS_DIR
#
# TOOLS_DIR holds netns-nodes.sh and slurm-local.sh (the team's throw-away
# namespaces and Slurm). Needs root, ip netns and slurm-wlm + munge; exits 0
# with a line saying why when any is missing. BUILD_DIR must not be under
# /tmp (each namespace node has its own /tmp). Exits non-zero on a failure.
set -uo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR TOOLS_DIR}" && pwd)
tools=$(cd "${2:?usage: $0 BUILD_DIR TOOLS_DIR}" && pwd)
skip() { echo "multinode_slurm: skipped: $*"; exit 0; }
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null && ip netns list >/dev/null 2>&1 || skip "no ip netns here"
command -v srun >/dev/null && command -v slurmctld >/dev/null || skip "slurm-wlm is not installed"
[ -f "$tools/netns-nodes.sh" ] && [ -f "$tools/slurm-local.sh" ] || skip "no netns-nodes.sh/slurm-local.sh in $tools"
case $build in /tmp/*) skip "the build is under /tmp, which each node sees differently" ;; esac

failures=0
check() {  # check NAME EXPECTED_RC OUTPUT_FILE PATTERN...
  local name=$1 want=$2 got=$3 file=$4
  shift 4
  local ok=1
  [ "$got" = "$want" ] || { echo "  exit code $got, expected $want"; ok=0; }
  for p in "$@"; do grep -q -- "$p" "$file" || { echo "  missing: $p"; ok=0; }; done
  if [ $ok = 1 ]; then echo "ok   $name"; else echo "FAIL $name"; sed 's/^/  | /' "$file" | tail -25; failures=$((failures + 1)); fi
}

bash "$tools/slurm-local.sh" down >/dev/null 2>&1
bash "$tools/netns-nodes.sh" up 2 >/dev/null || skip "netns-nodes.sh up 2 failed"
cleanup() {
  bash "$tools/slurm-local.sh" down >/dev/null 2>&1
  bash "$tools/netns-nodes.sh" down >/dev/null 2>&1
}
trap cleanup EXIT
bash "$tools/slurm-local.sh" up --netns 2 >/dev/null || { echo "FAIL slurm-local.sh up --netns 2"; exit 1; }
run() { ip netns exec node0 timeout 120 env MCI_JOB_TOKEN=multinode-check srun "$@"; }
out=$(mktemp)

# 4 ranks on 2 hosts: all-reduce takes the hierarchical path.
run -N 2 --ntasks-per-node=2 env MCI_LOG_LEVEL=info "$build/bin/mci-perf" all_reduce -b 8 -e 1M -f 32 -c 1 >"$out" 2>&1
check "srun -N 2 --ntasks-per-node=2 mci-perf all_reduce (hierarchical)" 0 $? "$out" \
  "ranks=4 " "wrong=0 status=OK" "collectives are hierarchical" "on      node1"

# One mcirun per node, each starting that node's ranks.
run -N 2 --ntasks-per-node=1 "$build/bin/mcirun" --nproc_per_node=2 "$build/bin/mci-perf" all_reduce -b 8 -e 64K -f 8 \
  >"$out" 2>&1
check "srun -N 2 --ntasks-per-node=1 mcirun --nproc_per_node=2 mci-perf" 0 $? "$out" "ranks=4 " "wrong=0 status=OK"

# The exam's first question, answered by the lab: RANK and LOCAL_RANK of 2
# nodes x 2 processes (the lab then says it wants two ranks).
run -N 2 --ntasks-per-node=2 "$build/bin/labo" >"$out" 2>&1
rc=$?
check "srun -N 2 --ntasks-per-node=2 labo: RANK and LOCAL_RANK on two nodes" 1 $rc "$out" \
  "RANK=0 LOCAL_RANK=0 WORLD_SIZE=4" "RANK=1 LOCAL_RANK=1 WORLD_SIZE=4" \
  "RANK=2 LOCAL_RANK=0 WORLD_SIZE=4" "RANK=3 LOCAL_RANK=1 WORLD_SIZE=4" "Ce laboratoire attend WORLD_SIZE=2."

# A rank killed on node 1 ends the whole job quickly on both nodes, and
# nothing is left on either.
start=$SECONDS
run -N 2 --ntasks-per-node=1 "$build/bin/mcirun" --nproc_per_node=2 --grace=2 \
  /bin/sh -c 'if [ "$RANK" = 3 ]; then sleep 1; kill -9 $$; fi; exec sleep 60' >"$out" 2>&1
rc=$?
took=$((SECONDS - start))
check "a rank SIGKILLed on node 1 stops the job on both nodes (${took}s)" 1 $rc "$out" \
  "job failed: rank 3 (local rank 1, node 1, host node1" "ended with signal SIGKILL" \
  "job failed on another node: node 1: rank 3"
[ "$took" -lt 30 ] || { echo "FAIL the job took ${took}s to stop"; failures=$((failures + 1)); }
for n in node0 node1; do
  if ip netns exec "$n" pgrep -f "sleep 60" >/dev/null; then
    echo "FAIL a rank's process is left on $n"; failures=$((failures + 1))
  fi
done

# --max-restarts under srun: a rank SIGKILLed on node 1 in the first
# attempt restarts every rank on both nodes; the second attempt succeeds.
run -N 2 --ntasks-per-node=1 "$build/bin/mcirun" --nproc_per_node=2 --max-restarts=1 /bin/sh -c \
  'echo "attempt=$TORCHELASTIC_RESTART_COUNT rank=$RANK"; if [ "$RANK" = 3 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then kill -9 $$; fi; [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exec sleep 60; true' \
  >"$out" 2>&1
check "srun mcirun --max-restarts=1: a rank killed on node 1 restarts both nodes" 0 $? "$out" \
  "attempt=1 rank=0" "attempt=1 rank=1" "attempt=1 rank=2" "attempt=1 rank=3" "restart 1 of 1" \
  "signal SIGKILL): restarting every process"

# One mcirun per host, as the seed starts its examples: --nnodes/--node_rank
# and node 0's address, on a port node 0's namespace says is free.
#   two_hosts NAME "ENV=V ..." PROGRAM PATTERN...
two_hosts() {
  local name=$1 vars=$2 program=$3 port out1 n rc0 rc1 pids=()
  shift 3
  port=$(ip netns exec node0 /usr/bin/python3 -c \
    'import socket; s = socket.socket(); s.bind(("10.77.0.1", 0)); print(s.getsockname()[1])')
  out1=$(mktemp)
  for n in 0 1; do
    # shellcheck disable=SC2086  # vars is a list of NAME=VALUE words
    ip netns exec "node$n" timeout 120 env MCI_JOB_TOKEN=multinode-check OMP_NUM_THREADS=1 $vars \
      "$build/bin/mcirun" --nnodes=2 --node_rank=$n --nproc_per_node=2 --master_addr=10.77.0.1 \
      --master_port="$port" "$program" >"${out1}.$n" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; rc0=$?
  wait "${pids[1]}"; rc1=$?
  cat "${out1}.0" "${out1}.1" >"$out"
  check "$name: mcirun --nnodes=2 on two hosts" 0 $((rc0 | rc1)) "$out" "$@"
  rm -f "$out1" "${out1}.0" "${out1}.1"
}
all_done=("Rang 0 terminé" "Rang 1 terminé" "Rang 2 terminé" "Rang 3 terminé")

# --nnodes=1:2 on two hosts, torchrun's elastic range: node 1's mcirun is
# killed by SIGKILL (its ranks go with it); node 0 sees it at once (its store
# connection closed, not a missed heartbeat), goes on alone in the next
# attempt with WORLD_SIZE 2, and nothing is left on node 1.
port=$(ip netns exec node0 /usr/bin/python3 -c \
  'import socket; s = socket.socket(); s.bind(("10.77.0.1", 0)); print(s.getsockname()[1])')
elastic_node() {  # elastic_node N &: node N's mcirun, a child of $! (timeout)
  exec ip netns exec "node$1" timeout 120 env MCI_JOB_TOKEN=multinode-check OMP_NUM_THREADS=1 \
    "$build/bin/mcirun" --nnodes=1:2 --node_rank="$1" --nproc_per_node=2 --master_addr=10.77.0.1 \
    --master_port="$port" --max-restarts=1 --rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=2 /bin/sh -c \
    'echo "attempt=$TORCHELASTIC_RESTART_COUNT rank=$RANK world=$WORLD_SIZE"; [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exec sleep 60; true'
}
elastic_node 0 >"$out" 2>&1 &
n0=$!
elastic_node 1 >"${out}.1" 2>&1 &
n1=$!
for _ in $(seq 300); do [ "$(grep -c '^attempt=0' "${out}.1")" = 2 ] && break; sleep 0.1; done
kill -9 "$(ps -o pid= --ppid "$n1" | tr -d ' ')"
wait "$n0"
rc=$?
wait "$n1"
cat "${out}.1" >>"$out"
check "mcirun --nnodes=1:2 on two hosts: node 1's mcirun SIGKILLed, node 0 goes on alone" 0 $rc "$out" \
  "attempt=0 rank=2 world=4" "attempt=0 rank=0 world=4" "node 1: lost: its mcirun is gone (its store connection closed" \
  "attempt=1 rank=0 world=2" "attempt=1 rank=1 world=2"
if ip netns exec node1 pgrep -f "sleep 60" >/dev/null; then
  echo "FAIL a rank's process is left on node1 after its mcirun was killed"; failures=$((failures + 1))
fi
rm -f "${out}.1"

# In place, no restart: elastic_train with rank 3 (node 1) killed inside a
# collective; the three survivors, on both hosts, shrink their group and
# finish with one sum. Under srun (one mcirun per node), then with one
# mcirun per host started by hand.
same_sum() {  # every "final ... sum X" line of the file has the same X
  [ "$(grep -o '^final rank [0-9]* world [0-9]* sum .*' "$1" | sed 's/.* sum //' | sort -u | wc -l)" = 1 ]
}
run -N 2 --ntasks-per-node=1 "$build/bin/mcirun" --nproc_per_node=2 --on-rank-loss=continue \
  "$build/bin/elastic_train" --steps 12 --step-ms 10 --die 3@6:collective >"$out" 2>&1
rc=$?
same_sum "$out" || rc=99
check "srun mcirun --on-rank-loss=continue elastic_train: rank 3 lost on node 1, in place" 0 $rc "$out" \
  "recovered world 3 lost 3 " "final rank 0 world 3 sum" "final rank 1 world 3 sum" "final rank 2 world 3 sum"
port=$(ip netns exec node0 /usr/bin/python3 -c \
  'import socket; s = socket.socket(); s.bind(("10.77.0.1", 0)); print(s.getsockname()[1])')
pids=()
for n in 0 1; do
  ip netns exec "node$n" timeout 120 env MCI_JOB_TOKEN=multinode-check OMP_NUM_THREADS=1 \
    "$build/bin/mcirun" --nnodes=2 --node_rank=$n --nproc_per_node=2 --master_addr=10.77.0.1 \
    --master_port="$port" --on-rank-loss=continue "$build/bin/elastic_train" --steps 12 --step-ms 10 \
    --die 3@6:collective >"${out}.$n" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
cat "${out}.0" "${out}.1" >"$out"
rm -f "${out}.0" "${out}.1"
rc=$((rc0 | rc1))
same_sum "$out" || rc=99
check "mcirun --on-rank-loss=continue elastic_train, one mcirun per host: in place" 0 $rc "$out" \
  "recovered world 3 lost 3 " "final rank 0 world 3 sum" "final rank 1 world 3 sum" "final rank 2 world 3 sum"
# --on-rank-loss=replace under srun: node 1 starts a new process for rank 3,
# which joins the running group; the world is 4 again on both hosts.
run -N 2 --ntasks-per-node=1 "$build/bin/mcirun" --nproc_per_node=2 --on-rank-loss=replace \
  "$build/bin/elastic_train" --steps 14 --step-ms 10 --die 3@6:collective >"$out" 2>&1
check "srun mcirun --on-rank-loss=replace elastic_train: rank 3 replaced on node 1" 0 $? "$out" \
  "recovered world 3 lost 3 " "joined as rank 3 of world 4" "grew world 4 joined 1 " "final rank 3 world 4 sum" \
  "replaced by pid "
# The torch twin (examples/pytorch/elastic_train.py, torch 2.x's
# shrink_group on "mci"), when the torch 2.x tier's interpreter is given.
torch2_python=${MCI_TORCH2_PYTHON:-}
if [ -n "$torch2_python" ] && "$torch2_python" -c "import torch.distributed as d; d.shrink_group" 2>/dev/null; then
  example=$(cd "$(dirname "$0")/../../examples/pytorch" && pwd)/elastic_train.py
  # torch_twin POLICY NAME "EXAMPLE ARGS" PATTERN...: one mcirun per host,
  # 2 ranks each; every final sum the same.
  torch_twin() {
    local policy=$1 name=$2 args=$3
    shift 3
    # shellcheck disable=SC2086
    run -N 2 --ntasks-per-node=1 env OMP_NUM_THREADS=1 "$build/bin/mcirun" --nproc_per_node=2 \
      --on-rank-loss="$policy" "$torch2_python" "$example" --steps 8 --step-ms 10 $args >"$out" 2>&1
    local rc=$?
    same_sum "$out" || rc=99
    check "srun mcirun --on-rank-loss=$policy elastic_train.py (torch $name" 0 $rc "$out" "$@"
  }
  torch_twin continue "2.x): rank 3 lost on node 1, in place" "--die 3@4:backward" \
    "recovered world 3 lost 3 " "final rank 0 world 3 sum" "final rank 2 world 3 sum"
  # Rank 0 lost: torch's store and mci's live in node 0's mcirun, not in it.
  torch_twin continue "2.x): rank 0 lost on node 0, in place" "--die 0@4:collective" \
    "recovered world 3 lost 0 " "final rank 0 world 3 sum" "final rank 2 world 3 sum"
  # A replacement for rank 3 on node 1 joins the running torch group
  # (torch 2.15's reconfigure contract on "mci").
  if "$torch2_python" -c "import torch.distributed as d; d._reconfigure" 2>/dev/null; then
    torch_twin replace "2.15): rank 3 replaced on node 1" "--die 3@3:collective --wait-joiners-at 5" \
      "recovered world 3 lost 3 " "joined as rank 3 of world 4 at step 5" "grew world 4 joined 1 " \
      "final rank 3 world 4 sum" "replaced by pid "
  fi
else
  echo "skip elastic_train.py across hosts: no torch 2.x with shrink_group (MCI_TORCH2_PYTHON)"
fi
for n in node0 node1; do
  if ip netns exec "$n" pgrep -f "bin/elastic_train|elastic_train.py|from torch.distributed import TCPStore" >/dev/null; then
    echo "FAIL an elastic_train process is left on $n"; failures=$((failures + 1))
  fi
done

# The seed's Example 2 (train_multinode.py, on CPU): PyTorch on gloo, then on
# mci's backend.
torch_python=${MCI_TORCH_PYTHON:-/usr/bin/python3}
if "$torch_python" -c "import torch.distributed" 2>/dev/null; then
  script=$(cd "$(dirname "$0")/../fixtures/pytorch" && pwd)/train_multinode_cpu.py
  for backend in gloo mci; do
    two_hosts "train_multinode.py (CPU, $backend)" "MCI_PYTHON=$torch_python MCI_TORCH_BACKEND=$backend" \
      "$script" "${all_done[@]}"
  done
else
  echo "skip train_multinode.py: $torch_python cannot import torch"
fi

# The same two examples in C++ (LibTorch + mci's DDP), on mci's engine and
# on Gloo: 4 ranks over two hosts, each rank's last epoch printed.
if [ -x "$build/bin/train_multinode" ]; then
  for backend in cpu gloo; do
    two_hosts "train_multinode (C++, $backend)" "MCI_BACKEND=$backend" "$build/bin/train_multinode" "${all_done[@]}"
    two_hosts "train_ddp (C++, $backend)" "MCI_BACKEND=$backend" "$build/bin/train_ddp" \
      "Rang 0, Époque 4, Perte : " "Rang 3, Époque 4, Perte : "
  done
else
  echo "skip train_multinode/train_ddp (C++): not built (no LibTorch)"
fi

# mcirun --monitor across the two hosts, on mci's engine and on Gloo: rank 3
# (node 1) stalls in step 20; node 0's page names it, its row says node 1,
# and every rank's flight recorder is dumped from the page (torch's format).
if [ -x "$build/bin/test_integration" ]; then
  for backend in cpu gloo; do
    shared=$(mktemp -d "$build/monitor-check-XXXXXX")  # both hosts see the build folder
    port=$((20000 + RANDOM % 10000))
    run -N 2 --ntasks-per-node=1 env TEST_DIR="$shared" STALL=3 MCI_TEST_BACKEND=$backend \
      MCI_FR_DUMP_DIR="$shared" "$build/bin/mcirun" --nproc_per_node=2 --monitor=127.0.0.1:$port \
      "$build/bin/test_integration" --scenario=monitor_steps >"$out" 2>&1 &
    job=$!
    verdict=$(ip netns exec node0 timeout 60 python3 - "$port" <<'PY'
import json, sys, time, urllib.request
port = sys.argv[1]
end = time.time() + 50
while time.time() < end:
    try:
        j = json.load(urllib.request.urlopen("http://127.0.0.1:%s/api/v1/job" % port, timeout=3))
        if j["verdict"]["state"] == "stalled" and len(j["ranks"]) == 4:
            nodes = [r["node"] for r in j["ranks"]]
            req = urllib.request.Request("http://127.0.0.1:%s/api/v1/dump" % port, method="POST",
                                         headers={"X-MCI-Action": "dump"})
            urllib.request.urlopen(req, timeout=3).read()
            print("rank=%s nodes=%s text=%s" % (j["verdict"]["rank"], nodes, j["verdict"]["text"]))
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
print("no stalled verdict")
PY
)
    # The dumps of node 1's ranks come at its next refresh.
    for _ in $(seq 50); do [ -s "$shared/mci_trace_rank_3" ] && break; sleep 0.1; done
    touch "$shared/release"
    wait $job
    rc=$?
    echo "$verdict" >>"$out"
    ls "$shared" >>"$out"
    check "srun mcirun --monitor across two hosts ($backend): node 0's page names rank 3 on node 1" 0 $rc "$out" \
      "rank=3 nodes=\[0, 0, 1, 1\] text=waiting " "for rank 3, which is running its own code" "on host node1" \
      "mci_trace_rank_0" "mci_trace_rank_3"
    rm -rf "$shared"
  done
fi

rm -f "$out"
echo "multinode_slurm: $failures failure(s)"
[ "$failures" = 0 ]
