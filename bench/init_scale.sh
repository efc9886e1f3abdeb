#!/usr/bin/env bash
# Job start to first all-reduce against ranks: mcirun starting N local ranks
# of `mci-perf all_reduce -b 8 -e 8 -n 5 -c 1 --transport tcp`, wall time
# from launch to exit, with connections made at init (MCI_CONNECT=eager) and
# on first use (MCI_CONNECT=lazy) in the same run. Modes alternate inside
# every round (their order rotates), so a machine that drifts hurts both
# alike; prints per size the median and the spread over rounds, the ratio
# eager/lazy, and the load average before and after.
#
#   bench/init_scale.sh                       16 64 128 256 ranks, 3 rounds
#   bench/init_scale.sh --ranks "16 64" --rounds 5
#   bench/init_scale.sh --baseline /tmp/old/build   adds mode "before": that
#                                             build's mcirun and mci-perf
#   bench/init_scale.sh --etcd 127.0.0.1:2379  adds mode "etcd": lazy, with
#                                             the job's store on that etcd
#                                             (--rdzv_backend=etcd)
#
# More ranks than cores is oversubscribed: each figure includes that.
set -euo pipefail
cd "$(dirname "$0")/.."

ranks="16 64 128 256"
rounds=3
build=build
modes="eager lazy"
baseline=""
etcd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --etcd) etcd="$2"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "init_scale.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mcirun="$build/bin/mcirun"
perf="$build/bin/mci-perf"
for f in "$mcirun" "$perf"; do
  [ -x "$f" ] || { echo "init_scale.sh: $f is missing: build first (ninja -C $build mcirun mci-perf)" >&2; exit 1; }
done
if [ -n "$baseline" ]; then
  for f in "$baseline/bin/mcirun" "$baseline/bin/mci-perf"; do
    [ -x "$f" ] || { echo "init_scale.sh: $f is missing: build the baseline first" >&2; exit 1; }
  done
  modes="before $modes"
fi
if [ -n "$etcd" ]; then modes="$modes etcd"; fi

# 256 ranks need about 1,100 descriptors in mcirun (pipes and store
# connections) and, eagerly connected, 300 in each rank.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

out=$(mktemp -d /tmp/mci-init-scale.XXXXXX)
echo "# init_scale: ranks '$ranks', $rounds rounds, modes '$modes', fd limit $(ulimit -n), $(nproc) cores"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 0; round < rounds; round++)); do
  for n in $ranks; do
    # Rotate the order of the modes each round.
    read -r -a list <<<"$modes"
    order=()
    for ((k = 0; k < ${#list[@]}; k++)); do order+=("${list[$(((k + round) % ${#list[@]}))]}"); done
    for mode in "${order[@]}"; do
      run_mcirun=$mcirun run_perf=$perf connect=$mode store=()
      if [ "$mode" = before ]; then run_mcirun=$baseline/bin/mcirun run_perf=$baseline/bin/mci-perf connect=eager; fi
      if [ "$mode" = etcd ]; then
        connect=lazy
        store=(--nnodes=1 --node_rank=0 --rdzv_backend=etcd "--rdzv_endpoint=$etcd" "--rdzv_id=init-scale-$$-$n-$round")
      fi
      t0=$(date +%s.%N)
      if ! MCI_CONNECT=$connect "$run_mcirun" "${store[@]}" --nproc_per_node "$n" "$run_perf" all_reduce -b 8 -e 8 -n 5 -c 1 \
           --transport tcp >"$out/run-$mode-$n-$round.log" 2>&1; then
        echo "init_scale.sh: $mode at $n ranks failed; see $out/run-$mode-$n-$round.log" >&2
        exit 1
      fi
      t1=$(date +%s.%N)
      echo "$mode $n $(echo "$t1 - $t0" | bc)" >>"$out/times"
    done
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/times" "$ranks" "$modes" <<'PY'
import sys, statistics
times = {}
for line in open(sys.argv[1]):
    mode, n, t = line.split()
    times.setdefault((mode, int(n)), []).append(float(t))
ranks = [int(x) for x in sys.argv[2].split()]
modes = sys.argv[3].split()
others = [m for m in modes if m != "lazy"]
print("| ranks | " + " | ".join(f"{m} median s (min-max)" for m in modes) + " | "
      + " | ".join(f"{m}/lazy" for m in others) + " |")
print("|---|" + "---|" * (len(modes) + len(others)))
for n in ranks:
    cells, med = [], {}
    for m in modes:
        v = times.get((m, n), [])
        med[m] = statistics.median(v) if v else float("nan")
        cells.append(f"{med[m]:.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-")
    ratios = [f"{med[m] / med['lazy']:.1f}x" if "lazy" in med else "-" for m in others]
    print(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
for m in modes:
    lo, hi = min(ranks), max(ranks)
    if (m, lo) in times and (m, hi) in times:
        g = statistics.median(times[(m, hi)]) / statistics.median(times[(m, lo)])
        print(f"# {m}: {hi} ranks / {lo} ranks = {g:.1f}x for {hi // lo}x the ranks")
PY
echo "# raw results in $out"
