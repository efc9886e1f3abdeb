#!/usr/bin/env bash
# Side-by-side, on this machine: mci-perf (cpu backend, --transport auto and
# tcp), mci-perf --backend gloo and an Open MPI program (bench/peers/
# mpi_perf.c) measuring the same sizes the same way. One interleaved run:
# every round visits every size, and at every size every tool runs once,
# in an order that rotates, so a machine that drifts (this VM's latency
# flips between a fast and a slow state within seconds) hurts all tools
# alike. Prints, per world size, the median over rounds of each tool's time
# and busbw, its spread across rounds, the ratios mci/Open MPI and mci/Gloo,
# the load average and a barrier time.
#
#   bench/compare.sh                  all_reduce float sum, 2 and 4 ranks
#   bench/compare.sh --setup          first install Open MPI (apt-get)
#   bench/compare.sh -c all_gather --ranks "2 3" --rounds 3 -e 4M
#   bench/compare.sh --baseline /tmp/old-build --tools "mci-auto base-auto"
#                                     before/after a change, in the same run
#   bench/compare.sh --hosts 2 --shape 2gbit --ranks 2
#                                     across 2 network-namespace hosts of 2
#                                     ranks each, links shaped to 2 Gbit/s,
#                                     every tool started by Slurm's srun
#                                     (Open MPI with --mpi=pmix); needs root
#
# Open MPI is used only when mpicc/mpirun are installed (--setup installs
# them); Gloo only when this build of mci has the gloo backend. Extra
# mpirun arguments go in MPIRUN_ARGS (e.g. "--mca btl self,vader").
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
  cat <<'USAGE'
Options:
  --setup            apt-get update; apt-get install -y openmpi-bin libopenmpi-dev, then run
  -c, --collective C all_reduce (default), broadcast, reduce, all_gather, gather, scatter,
                     reduce_scatter, all_to_all, barrier, send_recv
  --ranks "N ..."    world sizes (default "2 4"; more ranks than cores is oversubscribed)
  --rounds R         rounds (default 5)
  -b, -e, -f         sizes: min, max (K/M/G), factor (default 8, 16M, 4)
  -n, -w             timed and warmup iterations per size (default 20, 5)
  -d, -o             dtype and reduce op (default float, sum)
  --tools "T ..."    subset of: mci-auto mci-tcp mci-mpi gloo ompi (default all available), and
                     repro-auto repro-tcp: mci-auto and mci-tcp with MCI_REPRODUCIBLE=1 (only when named)
  --build DIR        mci build directory (default build); configured and built here
  --no-build         use DIR as it is
  --out DIR          keep raw results there (default a new /tmp/mci-compare.XXXXXX)
  --stat best|median what the busbw and ratio columns use (default best: the fast state)
  --placement out|in the table of out-of-place (default) or in-place calls; both are measured
  --baseline DIR     another mci build (e.g. of the previous commit): adds the tools
                     base-auto and base-tcp, its mci-perf with --transport auto and tcp
  --hosts H          H hosts (network namespaces node0..), --ranks ranks on each; needs
                     root, ip netns, slurm-wlm + munge and the namespace and Slurm scripts
  --shape RATE       with --hosts: limit each host's link (tc tbf), e.g. 2gbit, 10gbit
  --netns-tools DIR  with --hosts: where netns-nodes.sh and slurm-local.sh are
                     (default ../shared/tools)
USAGE
}

collective=all_reduce ranks="2 4" rounds=5 minb=8 maxb=16M factor=4 iters=20 warmup=5
dtype=float op=sum tools="" build=build do_build=1 out="" setup=0 stat=best placement=out baseline=""
hosts=1 shape="" netns_tools=../shared/tools
while [ $# -gt 0 ]; do
  case $1 in
    --setup) setup=1 ;;
    -c|--collective) collective=$2; shift ;;
    --ranks) ranks=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    -b) minb=$2; shift ;;
    -e) maxb=$2; shift ;;
    -f) factor=$2; shift ;;
    -n) iters=$2; shift ;;
    -w) warmup=$2; shift ;;
    -d) dtype=$2; shift ;;
    -o) op=$2; shift ;;
    --tools) tools=$2; shift ;;
    --build) build=$2; shift ;;
    --no-build) do_build=0 ;;
    --out) out=$2; shift ;;
    --stat) stat=$2; shift ;;
    --placement) placement=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    --hosts) hosts=$2; shift ;;
    --shape) shape=$2; shift ;;
    --netns-tools) netns_tools=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$setup" = 1 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "== setup: installing Open MPI"
  $sudo apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y openmpi-bin libopenmpi-dev
fi

command -v python3 >/dev/null || { echo "compare.sh: needs python3 for the table" >&2; exit 1; }

if [ "$do_build" = 1 ]; then
  echo "== building mci-perf and mcirun in $build"
  cmake -S . -B "$build" -G Ninja >/dev/null
  ninja -C "$build" mci-perf mcirun >/dev/null
fi
case $build in
  /*) ;;
  *) build=$root/$build ;;
esac
perf=$build/bin/mci-perf
mcirun=$build/bin/mcirun
if [ ! -x "$perf" ] || [ ! -x "$mcirun" ]; then
  echo "compare.sh: $perf or $mcirun is missing" >&2
  exit 1
fi

# Several hosts: network namespaces as hosts, one slurmd each; srun starts
# every tool. Each namespace host has its own /tmp, so nothing the ranks
# read or write may live there.
if [ "$hosts" -gt 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "compare.sh: --hosts needs root (it creates network namespaces); run it as root" >&2; exit 1; }
  for f in netns-nodes.sh slurm-local.sh; do
    [ -f "$netns_tools/$f" ] || { echo "compare.sh: --hosts needs $netns_tools/$f (set --netns-tools DIR)" >&2; exit 1; }
  done
  command -v srun >/dev/null || { echo "compare.sh: --hosts needs Slurm: apt-get install slurm-wlm munge" >&2; exit 1; }
  case $build in /tmp/*) echo "compare.sh: --hosts: the build $build is under /tmp, which each host sees differently" >&2; exit 1 ;; esac
  [ -n "$out" ] || out=$(mktemp -d /var/tmp/mci-compare.XXXXXX)
  case $out in /tmp/*) echo "compare.sh: --hosts: --out must not be under /tmp" >&2; exit 1 ;; esac
  bash "$netns_tools/slurm-local.sh" down >/dev/null 2>&1 || true
  bash "$netns_tools/netns-nodes.sh" up "$hosts" >/dev/null
  trap 'bash "$netns_tools/slurm-local.sh" down >/dev/null 2>&1; bash "$netns_tools/netns-nodes.sh" down >/dev/null 2>&1' EXIT
  [ -z "$shape" ] || bash "$netns_tools/netns-nodes.sh" shape "$shape"
  bash "$netns_tools/slurm-local.sh" up --netns "$hosts" >/dev/null
fi
[ -n "$out" ] || out=$(mktemp -d /tmp/mci-compare.XXXXXX)
mkdir -p "$out/raw"

# Sizes as mci-perf sweeps them, so each run measures exactly one of them.
to_bytes() {
  local v=$1 n=${1%[KkMmGg]}
  case $v in
    *[Kk]) echo $((n << 10)) ;;
    *[Mm]) echo $((n << 20)) ;;
    *[Gg]) echo $((n << 30)) ;;
    *) echo "$v" ;;
  esac
}
sizes=()
s=$(to_bytes "$minb")
maxbytes=$(to_bytes "$maxb")
while [ "$s" -le "$maxbytes" ]; do
  sizes+=("$s")
  [ "$s" -gt 0 ] || break
  s=$((s * factor))
done

# Which tools this machine can run.
available=(mci-auto mci-tcp)
# The reproducible mode's tools run only when --tools names them.
case " $tools " in *" repro-"*) available+=(repro-auto repro-tcp) ;; esac
if [ -n "$baseline" ]; then
  case $baseline in /*) ;; *) baseline=$root/$baseline ;; esac
  if [ -x "$baseline/bin/mci-perf" ] && [ -x "$baseline/bin/mcirun" ]; then
    available+=(base-auto base-tcp)
  else
    echo "compare.sh: --baseline $baseline has no bin/mci-perf and bin/mcirun" >&2
    exit 1
  fi
fi
if "$mcirun" --nproc_per_node=1 --standalone "$perf" barrier -b 0 -e 0 -n 1 -w 0 --backend gloo >/dev/null 2>&1; then
  available+=(gloo)
else
  echo "note: this build of mci has no gloo backend: Gloo is left out"
fi
mpi_note=""
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
  mpicc -O2 -std=gnu11 -o "$out/mpi-perf" bench/peers/mpi_perf.c
  available+=(ompi)
  # mci over MPI (backend mpi), when this build has it.
  if [ "$hosts" = 1 ] && mpirun --allow-run-as-root -np 1 "$perf" barrier -b 0 -e 0 -n 1 -w 0 --backend mpi >/dev/null 2>&1; then
    available+=(mci-mpi)
  fi
  mpi_note=$(mpirun --version 2>/dev/null | head -1)
else
  echo "note: Open MPI is not installed: run bench/compare.sh --setup to include it"
fi
if [ -n "$tools" ]; then
  wanted=()
  for t in $tools; do
    case " ${available[*]} " in
      *" $t "*) wanted+=("$t") ;;
      *) echo "note: $t is not available here: left out" ;;
    esac
  done
  available=("${wanted[@]}")
fi
[ ${#available[@]} -gt 0 ] || { echo "compare.sh: no tool to run" >&2; exit 1; }

read -r -a mpirun_extra <<<"${MPIRUN_ARGS:-}"

# One run of one tool at one size; its CSV lands in raw/.
run_tool() {
  local tool=$1 n=$2 size=$3 round=$4
  # With --hosts, n ranks on each host: the results count them all.
  local total=$((n * hosts))
  local csv="$out/raw/$tool.n$total.s$size.r$round.csv"
  local common=(-b "$size" -e "$size" -n "$iters" -w "$warmup" -d "$dtype" -o "$op" --barrier-ref --csv "$csv")
  # What runs on every rank, and the environment it needs.
  local -a prog env=()
  case $tool in
    mci-auto|mci-tcp) prog=("$perf" "$collective" "${common[@]}" -c 1 --backend cpu --transport "${tool#mci-}") ;;
    # MCI_REPRODUCIBLE=1 (docs/env.md, "Same bits"): what the same bits cost.
    repro-auto|repro-tcp)
      env=(MCI_REPRODUCIBLE=1)
      prog=("$perf" "$collective" "${common[@]}" -c 1 --backend cpu --transport "${tool#repro-}") ;;
    base-auto|base-tcp)
      # Its own library first: the baseline's binaries may point at this build's.
      env=("LD_LIBRARY_PATH=$baseline/src${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
      prog=("$baseline/bin/mci-perf" "$collective" "${common[@]}" -c 1 --backend cpu --transport "${tool#base-}") ;;
    gloo) prog=("$perf" "$collective" "${common[@]}" -c 1 --backend gloo) ;;
    mci-mpi) prog=("$perf" "$collective" "${common[@]}" -c 1 --backend mpi) ;;
    ompi) prog=("$out/mpi-perf" "$collective" "${common[@]}") ;;
  esac
  local -a cmd
  if [ "$hosts" -gt 1 ]; then
    local -a srun_cmd=(ip netns exec node0 srun -N "$hosts" --ntasks-per-node="$n")
    case $tool in
      # Ranks outnumber cores here: Open MPI must yield while it waits.
      ompi) cmd=("${srun_cmd[@]}" --mpi=pmix env OMPI_MCA_mpi_yield_when_idle=1 "${env[@]}" "${prog[@]}") ;;
      *) cmd=("${srun_cmd[@]}" env MCI_JOB_TOKEN=compare-sh "${env[@]}" "${prog[@]}") ;;
    esac
  else
    case $tool in
      mci-mpi|ompi) cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none "${mpirun_extra[@]}" -np "$n"
                         "${prog[@]}") ;;
      base-*) cmd=(env "${env[@]}" "$baseline/bin/mcirun" --nproc_per_node="$n" --standalone "${prog[@]}") ;;
      repro-*) cmd=(env "${env[@]}" "$mcirun" --nproc_per_node="$n" --standalone "${prog[@]}") ;;
      *) cmd=("$mcirun" --nproc_per_node="$n" --standalone "${prog[@]}") ;;
    esac
  fi
  local load rc=0 log="$out/raw/$tool.n$total.s$size.r$round.log"
  load=$(cut -d' ' -f1 /proc/loadavg)
  OMP_NUM_THREADS=1 timeout 300 "${cmd[@]}" >"$log" 2>&1 || rc=$?
  echo "$round,$total,$tool,$size,$load,$rc" >>"$out/runs.csv"
  [ "$rc" = 0 ] || echo "  $tool on $total ranks at $size B failed (exit $rc): see $log" >&2
}

{
  echo "# mci compare: $collective $dtype $op, ranks: $ranks, rounds: $rounds, sizes: ${sizes[*]}, iters $iters warmup $warmup"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(uname -r)"
  echo "# tools: ${available[*]}${mpi_note:+ ($mpi_note)}"
  [ "$hosts" = 1 ] || echo "# hosts: $hosts network namespaces, ranks per host: $ranks (the ranks column counts all), links: ${shape:-unshaped}"
  echo "# started $(date '+%Y-%m-%d %H:%M:%S')"
} >"$out/header.txt"
cat "$out/header.txt"
echo "round,ranks,tool,size,load1,rc" >"$out/runs.csv"
start=$SECONDS
for ((round = 1; round <= rounds; ++round)); do
  echo "== round $round/$rounds ($((SECONDS - start)) s so far)"
  for n in $ranks; do
    for ((si = 0; si < ${#sizes[@]}; ++si)); do
      # Rotate the order at every step so no tool always runs first.
      k=${#available[@]}
      for ((j = 0; j < k; ++j)); do
        run_tool "${available[$(((j + round + si) % k))]}" "$n" "${sizes[$si]}" "$round"
      done
    done
  done
done
echo "# finished $(date '+%Y-%m-%d %H:%M:%S') after $((SECONDS - start)) s" >>"$out/header.txt"

python3 bench/compare_table.py "$out" --stat "$stat" --placement "$placement" | tee "$out/table.txt"
python3 bench/compare_table.py "$out" --stat "$stat" --placement "$placement" --markdown >"$out/table.md"
echo "raw results and the table (table.txt, table.md): $out"
