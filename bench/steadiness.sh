#!/usr/bin/env bash
# Steadiness: many short back-to-back runs, as a user who runs a benchmark
# once (or a training step) meets them. Each run is one mcirun of mci-perf
# with -n ITERS timed iterations of one collective at one size; the builds
# (this one, and --baseline ones in the same run) alternate run by run, so
# a machine that drifts hurts all alike. Prints per collective, size and
# build the min, median and max busbw over the runs and max/min: a run stuck
# in a slow mode shows as a large max/min.
#
#   bench/steadiness.sh [--runs N] [--iters N] [--ranks N] [--build DIR] [--baseline DIR]...
#                       [--cases "broadcast:64K all_reduce:1M ..."] [-- MCI-PERF-ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=10 iters=20 ranks=2 build=build
builds=()
cases="broadcast:64K all_reduce:64K all_gather:64K broadcast:1M all_reduce:1M all_gather:1M"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --iters) iters=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --build) build=$2; shift ;;
    --baseline) builds+=("$2"); shift ;;
    --cases) cases=$2; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "steadiness.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
builds=("$build" "${builds[@]}")
for b in "${builds[@]}"; do
  if [ ! -x "$b/bin/mci-perf" ] || [ ! -x "$b/bin/mcirun" ]; then
    echo "steadiness.sh: $b has no bin/mci-perf and bin/mcirun" >&2
    exit 1
  fi
done
results=$(mktemp /tmp/mci-steadiness.XXXXXX)
for ((i = 0; i < runs; i++)); do
  for c in $cases; do
    for b in "${builds[@]}"; do
      # Each build's own libraries first: its binaries may point at another build's.
      bw=$(LD_LIBRARY_PATH="$b/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$b/bin/mcirun" --standalone \
             --nproc_per_node="$ranks" "$b/bin/mci-perf" "${c%%:*}" -b "${c#*:}" -e "${c#*:}" -n "$iters" -w 5 "$@" \
             2>/dev/null | grep -o 'avg_busbw_GBps=[0-9.]*' | cut -d= -f2 || true)
      echo "$b|${c/:/ }|$bw" >>"$results"
    done
  done
done
echo "# $runs runs x $iters iterations, $ranks ranks, load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    build, case, bw = line.rstrip("\n").split("|")
    if bw:
        runs[(case, build)].append(float(bw))
print(f"{'collective size':18} {'build':28} {'runs':>4} {'min':>7} {'median':>7} {'max':>7} {'max/min':>7}  (busbw GB/s)")
for (case, build), xs in sorted(runs.items()):
    xs.sort()
    print(f"{case:18} {build[-28:]:28} {len(xs):4} {xs[0]:7.2f} {statistics.median(xs):7.2f} {xs[-1]:7.2f} {xs[-1] / xs[0]:7.2f}")
PY
echo "raw: $results"
