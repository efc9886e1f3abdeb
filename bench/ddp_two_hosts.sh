#!/usr/bin/env bash
# bench/ddp_models.py across two hosts joined by a shaped link: two network
# namespaces on this machine (node0, node1), one rank each, each rank
# started by its own `mcirun --nnodes=2`, the link limited with tc tbf. This
# is where DDP's compression hooks (fp16_compress_hook, powerSGD_hook) are
# meant to pay: the gradients' bytes, not the CPU, bound the step.
#
#   bench/ddp_two_hosts.sh --shape 2gbit -- --models mlp,transformer \
#       --configs default,fp16_compress_hook,powerSGD_hook --rounds 3 --steps 5
#
# Needs root, ip netns and ../shared/tools/netns-nodes.sh (--netns-tools DIR),
# the torch venv (MCI_PYTHON, default /var/cache/mci/venv-torch-2.15.0/bin/python)
# and a build with the torch extension (--build DIR, default build). Each
# rank gets its own MCI_HOST_ID, so mci goes over the link as gloo does
# rather than through shared memory (both namespaces share this kernel).
# The namespaces are removed on exit, whatever happens.
set -euo pipefail

shape=2gbit
netns_tools=../shared/tools
build=build
out=""
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --shape) shape=$2; shift ;;
    --netns-tools) netns_tools=$2; shift ;;
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "ddp_two_hosts.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "ddp_two_hosts.sh: needs root (ip netns)" >&2; exit 1; }
[ -f "$netns_tools/netns-nodes.sh" ] || { echo "ddp_two_hosts.sh: no $netns_tools/netns-nodes.sh (set --netns-tools DIR)" >&2; exit 1; }
python=${MCI_PYTHON:-/var/cache/mci/venv-torch-2.15.0/bin/python}
[ -x "$python" ] || { echo "ddp_two_hosts.sh: no torch python at $python (set MCI_PYTHON)" >&2; exit 1; }
if [ ! -x "$build/bin/mcirun" ] || [ ! -d "$build/python" ]; then
  echo "ddp_two_hosts.sh: build $build has no mcirun or python/ (build with the torch extension)" >&2
  exit 1
fi
out=${out:-$(mktemp -d /tmp/mci-ddp-two-hosts.XXXXXX)}
mkdir -p "$out"

nodes="$netns_tools/netns-nodes.sh"
bash "$nodes" down >/dev/null 2>&1 || true
bash "$nodes" up 2 >/dev/null
pids=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash "$nodes" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
[ "$shape" = none ] || bash "$nodes" shape "$shape" >/dev/null

here=$(pwd)
for i in 0 1; do
  # A fresh namespace: its ports are all free, so a fixed one is safe.
  ip netns exec "node$i" env MCI_PYTHON="$python" PYTHONPATH="$here/$build/python:$here/bench" \
    GLOO_SOCKET_IFNAME=eth0 MCI_HOST_ID="node$i" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    "$build/bin/mcirun" --nnodes=2 --node_rank="$i" --nproc_per_node=1 --master_addr=10.77.0.1 \
    --master_port=29500 bench/ddp_models.py "$@" >"$out/node$i.out" 2>"$out/node$i.err" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
pids=()
cat "$out/node0.out"
echo "link: $shape each way; logs: $out"
[ "$rc" = 0 ] || { echo "ddp_two_hosts.sh: a node failed (exit $rc); see $out/node*.err" >&2; tail -5 "$out"/node*.err >&2; }
exit "$rc"
