#!/usr/bin/env bash
# mci beside Open MPI on a busy or shared CPU: short runs (as a user who
# runs a benchmark once meets them), interleaved run by run, under each
# contention mode:
#   idle     nothing else runs
#   hog      one busy loop per CPU beside the ranks (nice 0)
#   thief    bench/cpu_thief.c takes each CPU away for STEAL of every
#            PERIOD, at random moments, each CPU on its own: what a busy
#            hypervisor's steal does to a VM (needs root: SCHED_FIFO)
#   oversub  twice as many ranks as CPUs
#   quota    the ranks (and their launcher) in a cgroup whose CPU quota is
#            (1 - STEAL) of the CPUs per PERIOD (CFS bandwidth control,
#            cgroup v1 cpu.cfs_quota_us or v2 cpu.max): once the ranks have
#            used their share, every one of them stops until the next period,
#            as all vCPUs of a VM do when the hypervisor runs another guest
#            (needs root and a writable cpu cgroup)
# Broadcast is timed in place: MPI_Bcast has a single buffer (so does
# torch's broadcast), where mci's out-of-place call also copies the root's
# input to its output.
# Prints per mode, collective and size the median, min and max time per call
# and busbw of each tool over the runs, max/min, and the median ratio
# mci/Open MPI (time; below 1 mci is faster); vmstat's steal during the
# runs is printed beside (the thief's stolen time shows as user time).
#
#   bench/contention.sh [--runs N] [--iters N] [--modes "idle hog thief oversub quota"]
#                       [--cases "all_gather:64K reduce_scatter:1M ..."] [--steal 0.3] [--period-us 2000]
#                       [--build DIR] [--baseline DIR] [--ranks N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=5 iters=20 ranks=2 build=build baseline="" steal=0.3 period=2000
modes="idle hog thief oversub"
cases="all_reduce:64K all_gather:64K reduce_scatter:64K all_to_all:64K all_reduce:1M all_gather:1M reduce_scatter:1M all_to_all:1M"
while [ $# -gt 0 ]; do
  case $1 in
    --runs) runs=$2; shift ;;
    --iters) iters=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --modes) modes=$2; shift ;;
    --cases) cases=$2; shift ;;
    --steal) steal=$2; shift ;;
    --period-us) period=$2; shift ;;
    --build) build=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "contention.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for b in $build $baseline; do
  [ -x "$b/bin/mci-perf" ] || { echo "contention.sh: $b/bin/mci-perf is missing (build first)" >&2; exit 1; }
done
work=$(mktemp -d /tmp/mci-contention.XXXXXX)
pids=()
cgroup=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -z "$cgroup" ] || rmdir "$cgroup" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -pthread -o "$work/cpu-thief" bench/cpu_thief.c
have_mpi=0
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mpicc -O2 -std=gnu11 -o "$work/mpi-perf" bench/peers/mpi_perf.c && have_mpi=1
fi
cpus=$(nproc)

# quota: a cpu cgroup of our own, v2 if the cpu controller is there, else v1.
if [[ " $modes " == *" quota "* ]]; then
  quota=$(python3 -c "print(int($cpus * $period * (1 - $steal)))")
  if [ -w /sys/fs/cgroup/cgroup.subtree_control ] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    cgroup=/sys/fs/cgroup/mci-contention-$$
    mkdir "$cgroup"
    echo "$quota $period" > "$cgroup/cpu.max"
  elif [ -w /sys/fs/cgroup/cpu ]; then
    cgroup=/sys/fs/cgroup/cpu/mci-contention-$$
    mkdir "$cgroup"
    echo "$period" > "$cgroup/cpu.cfs_period_us"
    echo "$quota" > "$cgroup/cpu.cfs_quota_us"
  else
    echo "contention.sh: mode quota needs root and a writable cpu cgroup (v2 cpu.max or v1 cpu.cfs_quota_us)" >&2
    exit 1
  fi
fi

# disturb MODE: starts what the mode runs beside the ranks (pids in $pids).
disturb() {
  pids=()
  case $1 in
    hog) for ((c = 0; c < cpus; c++)); do (while :; do :; done) & pids+=($!); done ;;
    thief) "$work/cpu-thief" "$steal" "$period" 3600 & pids+=($!); sleep 0.2 ;;
  esac
}
calm() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}

# One run: prints "time_us busbw" of the out-of-place column (in place for
# broadcast), or "fail". Under mode quota the launcher starts inside the
# cgroup, so every rank it starts is throttled with it.
one() {
  local tool=$1 coll=$2 size=$3 n=$4 mode=$5 line
  local -a wrap=()
  # shellcheck disable=SC2016  # $$, $0 and $@ are the inner shell's
  [ "$mode" = quota ] && wrap=(sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cgroup")
  case $tool in
    mci) line=$(MCI_LOG_LEVEL=error timeout 120 "${wrap[@]}" "$build/bin/mcirun" --standalone --nproc_per_node="$n" \
                  "$build/bin/mci-perf" "$coll" -b "$size" -e "$size" -n "$iters" -w 5 -c 0 2>/dev/null | grep -v '^#' | tail -1) ;;
    base) line=$(MCI_LOG_LEVEL=error timeout 120 "${wrap[@]}" "$baseline/bin/mcirun" --standalone --nproc_per_node="$n" \
                  "$baseline/bin/mci-perf" "$coll" -b "$size" -e "$size" -n "$iters" -w 5 -c 0 2>/dev/null | grep -v '^#' | tail -1) ;;
    ompi) line=$(timeout 120 "${wrap[@]}" mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
                  "$work/mpi-perf" "$coll" -b "$size" -e "$size" -n "$iters" -w 5 2>/dev/null | grep -v '^#' | tail -1) ;;
  esac
  set -- $line
  if [ $# -lt 12 ]; then echo fail
  elif [ "$coll" = broadcast ]; then echo "${10} ${12}"
  else echo "$6 $8"; fi
}

tools="mci"
[ -n "$baseline" ] && tools="$tools base"
[ $have_mpi = 1 ] && tools="$tools ompi"
vmstat 1 > "$work/vmstat" & vmpid=$!
echo "# contention.sh $(date -u +%FT%TZ): $runs runs x $iters iterations, ${ranks} ranks ($cpus CPUs), thief ${steal} of every ${period} us; tools: $tools"
for ((r = 0; r < runs; r++)); do
  for mode in $modes; do
    n=$ranks
    [ "$mode" = oversub ] && n=$((2 * cpus))
    disturb "$mode"
    for c in $cases; do
      # The tools' order rotates with the run.
      set -- $tools
      ordered=("${@:$((r % $# + 1))}" "${@:1:$((r % $#))}")
      for t in "${ordered[@]}"; do
        echo "$mode ${c%%:*} ${c##*:} $t $(one "$t" "${c%%:*}" "${c##*:}" "$n" "$mode")" >> "$work/results"
      done
    done
    calm
  done
done
kill $vmpid 2>/dev/null || true
steal_st=$(awk 'NR > 2 { s += $17; n++ } END { if (n) printf "%.0f", s / n; else print "?" }' "$work/vmstat")
echo "# vmstat steal (st) during the runs: mean ${steal_st}%"
python3 - "$work/results" "$tools" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
tools = sys.argv[2].split()
data = {}
for mode, coll, size, tool, *rest in rows:
    if rest[0] == "fail":
        continue
    data.setdefault((mode, coll, size), {}).setdefault(tool, []).append((float(rest[0]), float(rest[1])))
print("| mode | collective | size | " + " | ".join(f"{t} median us (min-max) | {t} busbw GB/s | {t} max/min" for t in tools)
      + " | mci/ompi time |")
print("|" + " --- |" * (4 + 3 * len(tools)))
for key in data:
    cells = []
    med = {}
    for t in tools:
        v = data[key].get(t)
        if not v:
            cells += ["-", "-", "-"]
            continue
        times = sorted(x[0] for x in v)
        m = statistics.median(times)
        med[t] = m
        bw = statistics.median(x[1] for x in v)
        cells += [f"{m:.1f} ({times[0]:.1f}-{times[-1]:.1f})", f"{bw:.2f}", f"{times[-1] / times[0]:.1f}"]
    ratio = f"{med['mci'] / med['ompi']:.2f}" if "mci" in med and "ompi" in med else "-"
    print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + f" | {ratio} |")
PY
