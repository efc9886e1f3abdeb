#!/usr/bin/env bash
# What mcirun --monitor costs the ranks: 8 B all_reduce latency and 64 KiB
# busbw with the monitor off and on, interleaved (off, on, off, on, ...) in
# one run so both see the same machine, 2 ranks on this host; then mcirun's
# memory (VmRSS) over a long monitored job, sampled every 2 s, which must
# stay flat. Prints the medians, each run's figures and the steal (vmstat).
#
#   bench/monitor_overhead.sh [BUILD_DIR] [ROUNDS] [LONG_SECONDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
long=${3:-60}
mcirun=$build/bin/mcirun
perf=$build/bin/mci-perf
export OMP_NUM_THREADS=1

one() {  # $1: off|on -> "LAT8_US BUSBW64K_GBPS"
  local flag=()
  [ "$1" = on ] && flag=(--monitor)
  "$mcirun" --standalone --nproc_per_node=2 "${flag[@]}" "$perf" all_reduce -b 8 -e 64K -f 8192 -n 3000 -w 300 -c 0 \
    2>/dev/null | awk '$1 == 8 {lat = $6} $1 == 65536 {bw = $8} END {print lat, bw}'
}

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

steal_before=$(vmstat 1 2 | tail -1 | awk '{print $17}')
declare -a lat_off lat_on bw_off bw_on
for ((i = 0; i < rounds; i++)); do
  read -r l b < <(one off); lat_off+=("$l"); bw_off+=("$b")
  read -r l b < <(one on); lat_on+=("$l"); bw_on+=("$b")
  echo "round $i: off ${lat_off[-1]} us ${bw_off[-1]} GB/s | on ${lat_on[-1]} us ${bw_on[-1]} GB/s"
done
steal_after=$(vmstat 1 2 | tail -1 | awk '{print $17}')
mlo=$(printf '%s\n' "${lat_off[@]}" | median); mln=$(printf '%s\n' "${lat_on[@]}" | median)
mbo=$(printf '%s\n' "${bw_off[@]}" | median); mbn=$(printf '%s\n' "${bw_on[@]}" | median)
echo "median 8 B all_reduce: off $mlo us, on $mln us (on/off $(awk -v a="$mln" -v b="$mlo" 'BEGIN {printf "%.3f", a / b}'))"
echo "median 64 KiB busbw:   off $mbo GB/s, on $mbn GB/s (on/off $(awk -v a="$mbn" -v b="$mbo" 'BEGIN {printf "%.3f", a / b}'))"
echo "steal (vmstat st): $steal_before% before, $steal_after% after"

# Memory over a long job: 8 B all_reduce back to back for LONG_SECONDS.
"$mcirun" --standalone --nproc_per_node=2 --monitor "$perf" all_reduce -b 8 -e 8 -n 100000000 -w 0 -c 0 \
  >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 2
first=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
samples=()
for ((t = 0; t < long; t += 2)); do
  sleep 2
  samples+=("$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo gone)")
done
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
echo "mcirun VmRSS over ${long} s of back-to-back 8 B all_reduce (KiB): start $first, then ${samples[*]}"
