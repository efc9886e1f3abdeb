#!/usr/bin/env bash
# mcirun holding the crowd across hosts: 8 network-namespace "hosts" x 32
# ranks (/work/shared/tools/netns-nodes.sh: own address, hostname, /tmp and
# /dev/shm per host), one mcirun per host. Checks that the 256 ranks start,
# join one group and all-reduce (hierarchical: shared memory in each host,
# TCP between hosts), that every line of every rank is relayed whole, and
# that nothing is left: no process of the job, no shared-memory segment.
# Root only (namespaces); without root it says why and exits 77 (skipped).
#
#   flock /work/notes/netns.lock scripts/netns_scale.sh [--hosts 8] [--ranks 32] [--build build]
#
# The namespaces have global names (node0.., node-hub) that other users of
# netns-nodes.sh share: hold the lock above for the whole run. They are
# torn down on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

hosts=8
per_host=32
build=build
nodes_tool=${NETNS_NODES:-/work/shared/tools/netns-nodes.sh}
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts="$2"; shift 2 ;;
    --ranks) per_host="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "netns_scale.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "netns_scale.sh: skipped: network namespaces need root (run it as root, under flock /work/notes/netns.lock)"
  exit 77
fi
if ! command -v ip >/dev/null || [ ! -x "$nodes_tool" ]; then
  echo "netns_scale.sh: skipped: needs iproute2 and $nodes_tool"
  exit 77
fi
mcirun="$root/$build/bin/mcirun"
perf="$root/$build/bin/mci-perf"
for f in "$mcirun" "$perf"; do
  [ -x "$f" ] || { echo "netns_scale.sh: $f is missing: build first" >&2; exit 1; }
done

out=$(mktemp -d /var/tmp/mci-netns-scale.XXXXXX)  # not /tmp: each host has its own
cleanup() {
  "$nodes_tool" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
"$nodes_tool" up "$hosts" >/dev/null
world=$((hosts * per_host))
export MCI_JOB_TOKEN=netns-scale-$$ OMP_NUM_THREADS=1

# One job per program, all hosts at once; every mcirun must exit 0.
run_job() {
  local name=$1; shift
  local pids=() i
  for ((i = 0; i < hosts; i++)); do
    "$nodes_tool" exec "node$i" "$mcirun" --nnodes "$hosts" --node_rank "$i" --nproc_per_node "$per_host" \
      --master_addr 10.77.0.1 --master_port 29555 "$@" >"$out/$name.$i.out" 2>"$out/$name.$i.err" &
    pids+=($!)
  done
  local failed=0
  for ((i = 0; i < hosts; i++)); do
    if ! wait "${pids[$i]}"; then
      echo "netns_scale.sh: $name: mcirun on node$i failed; $out/$name.$i.err says:" >&2
      tail -5 "$out/$name.$i.err" >&2
      failed=1
    fi
  done
  return $failed
}

t0=$(date +%s.%N)
run_job perf "$perf" all_reduce -b 8 -e 64K -n 5 -c 1
t1=$(date +%s.%N)
grep -q "ranks $world" "$out/perf.0.out" || { echo "netns_scale.sh: mci-perf did not report $world ranks" >&2; exit 1; }
grep -q "status=OK" "$out/perf.0.out" || { echo "netns_scale.sh: mci-perf's check failed" >&2; exit 1; }
echo "all_reduce over $hosts hosts x $per_host ranks: OK, job start to end $(echo "$t1 - $t0" | bc) s"

# Each rank prints 20 lines at once; each host's mcirun must relay its 32
# ranks' lines whole.
line='relay 0123456789 the quick brown fox jumps over the lazy dog'
run_job relay /bin/sh -c "for i in \$(seq 20); do echo \"\$RANK \$i $line\"; done; echo \$\$ >> $out/pids"
for ((i = 0; i < hosts; i++)); do
  whole=$(grep -c -E "^[0-9]+ [0-9]+ $line\$" "$out/relay.$i.out" || true)
  total=$(wc -l <"$out/relay.$i.out")
  if [ "$whole" != $((per_host * 20)) ] || [ "$total" != "$whole" ]; then
    echo "netns_scale.sh: node$i relayed $whole whole lines of $total (expected $((per_host * 20)))" >&2
    exit 1
  fi
done
echo "output relay: $((world * 20)) lines, all whole"

# Nothing left behind: the ranks' processes, and shared memory on any host.
left=0
while read -r pid; do
  if kill -0 "$pid" 2>/dev/null; then echo "netns_scale.sh: rank process $pid still runs" >&2; left=1; fi
done <"$out/pids"
if ls /dev/shm/netns-nodes/*/mci-* >/dev/null 2>&1; then
  echo "netns_scale.sh: shared-memory segments left: $(ls /dev/shm/netns-nodes/*/mci-*)" >&2
  left=1
fi
[ $left = 0 ] || exit 1
grep -h "open-file" "$out"/*.err | sort -u || true
echo "netns_scale.sh: OK ($hosts hosts x $per_host ranks; logs in $out)"
