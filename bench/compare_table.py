#!/usr/bin/env python3
"""The table of bench/compare.sh, from the raw results in its output folder.

Per world size and message size, for each tool: its best time over the
rounds (the machine's fast state), its median time, the bus bandwidth of
the chosen statistic, and the spread of its times across rounds
((max - min) / median: the noise). Then the time ratios mci/Open MPI and
mci/Gloo of the chosen statistic (below 1: mci is faster), the 1-minute
load average when the runs started, and the median barrier time of mci
(auto) and of Open MPI measured in the same runs (--barrier-ref), which
shows the machine's latency state.

Usage: compare_table.py OUT_DIR [--stat best|median] [--placement out|in] [--markdown]
"""
import csv
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

TOOLS = ["mci-auto", "mci-tcp", "mci-mpi", "base-auto", "base-tcp", "repro-auto", "repro-tcp", "gloo", "ompi"]
RATIOS = [("mci-auto", "ompi", "auto/ompi"), ("mci-tcp", "ompi", "tcp/ompi"), ("mci-auto", "gloo", "auto/gloo"),
          ("mci-mpi", "ompi", "mpi/ompi"), ("mci-auto", "base-auto", "auto/base"), ("mci-tcp", "base-tcp", "tcp/base"),
          ("repro-auto", "mci-auto", "rauto/auto"), ("repro-tcp", "mci-tcp", "rtcp/tcp"), ("repro-tcp", "ompi", "rtcp/ompi")]


def num(v, width, digits=2):
    if v is None:
        return "-".rjust(width)
    if v >= 10 ** (width - 3):
        return f"{v:{width}.0f}"
    return f"{v:{width}.{digits}f}"


def load(out, placement):
    times = defaultdict(list)  # (ranks, tool, size) -> [(time_us, busbw)]
    barrier = defaultdict(list)
    wrong = defaultdict(int)
    # Keyed by the size each run was asked for (its file name): the size
    # column of split collectives is rounded down to whole blocks per rank.
    for path in glob.glob(os.path.join(out, "raw", "*.csv")):
        m = re.match(r"(.+)\.n(\d+)\.s(\d+)\.r(\d+)\.csv$", os.path.basename(path))
        if not m:
            continue
        key = (int(m.group(2)), m.group(1), int(m.group(3)))
        with open(path) as f:
            for row in csv.DictReader(f):
                if row["placement"] != placement:
                    continue
                times[key].append((float(row["time_us"]), float(row["busbw_GBps"])))
                if row.get("barrier_us"):
                    barrier[key].append(float(row["barrier_us"]))
                if row.get("wrong") and int(row["wrong"]) > 0:
                    wrong[key] += int(row["wrong"])
    loads = defaultdict(list)
    runs = defaultdict(int)
    failed = defaultdict(int)
    with open(os.path.join(out, "runs.csv")) as f:
        for row in csv.DictReader(f):
            n = int(row["ranks"])
            loads[(n, int(row["size"]))].append(float(row["load1"]))
            runs[(n, row["tool"])] += 1
            if row["rc"] != "0":
                failed[(n, row["tool"])] += 1
    return times, barrier, wrong, loads, runs, failed


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    out = args[0]
    markdown = "--markdown" in args
    stat = args[args.index("--stat") + 1] if "--stat" in args else "best"
    if stat not in ("best", "median"):
        sys.exit("--stat is best or median")
    where = args[args.index("--placement") + 1] if "--placement" in args else "out"
    if where not in ("out", "in"):
        sys.exit("--placement is out or in")
    placement = "in_place" if where == "in" else "out_of_place"
    times, barrier, wrong, loads, runs, failed = load(out, placement)
    if not times:
        sys.exit(f"compare_table.py: no {placement} results in {out}/raw (barrier and send_recv have no in-place form)")
    with open(os.path.join(out, "header.txt")) as f:
        header = f.read().rstrip("\n")
    # In Markdown the run's description stays verbatim in a code block.
    print(f"```\n{header}\n```" if markdown else header)

    tools = [t for t in TOOLS if any(k[1] == t for k in times)]
    ratios = [r for r in RATIOS if r[0] in tools and r[1] in tools]
    for n in sorted({k[0] for k in times}):
        sizes = sorted({k[2] for k in times if k[0] == n})
        rounds = max(len(times[(n, t, s)]) for t in tools for s in sizes)
        print()
        print(f"{'###' if markdown else '##'} {n} ranks, {rounds} rounds, {placement.replace('_', ' ')}. Per tool: best and median time (us) over the rounds, busbw (GB/s) "
              f"of the {stat} time, +-% = (max-min)/median of the times. Ratios: {stat} time of mci / the other "
              "(below 1: mci is faster). load1: /proc/loadavg at the start of the runs. bar: median barrier "
              "time (us) in the same runs.")
        cols, widths = ["size"], [10]
        for t in tools:
            cols += [f"{t} best", "median", "busbw", "+-%"]
            widths += [13, 9, 6, 5]
        cols += [r[2] for r in ratios] + ["load1", "bar mci", "bar ompi"]
        widths += [9] * len(ratios) + [5, 7, 8]
        if markdown:
            print("| " + " | ".join(cols) + " |")
            print("|" + "|".join("---:" for _ in cols) + "|")
        else:
            print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
        spreads = defaultdict(list)
        for s in sizes:
            cells = [str(s).rjust(widths[0])]
            chosen = {}
            w = iter(widths[1:])
            for t in tools:
                samples = times.get((n, t, s), [])
                if not samples:
                    cells += [num(None, next(w)) for _ in range(4)]
                    continue
                ts = [x[0] for x in samples]
                best = min(samples)
                med = statistics.median(ts)
                pick = best if stat == "best" else min(samples, key=lambda x: abs(x[0] - med))
                chosen[t] = best[0] if stat == "best" else med
                spread = (max(ts) - min(ts)) / med * 100 if med > 0 else 0.0
                spreads[t].append(spread)
                cells += [num(best[0], next(w)), num(med, next(w)), num(pick[1], next(w)), num(spread, next(w), 0)]
            for a, b, _ in ratios:
                ok = a in chosen and b in chosen and chosen[b] > 0
                cells.append(num(chosen[a] / chosen[b] if ok else None, next(w)))
            ld = loads.get((n, s), [])
            cells.append(num(statistics.mean(ld) if ld else None, next(w), 1))
            for t in ("mci-auto", "ompi"):
                b = barrier.get((n, t, s), [])
                cells.append(num(statistics.median(b) if b else None, next(w), 1))
            if markdown:
                print("| " + " | ".join(c.strip() for c in cells) + " |")
            else:
                print("  ".join(cells))
        print()
        for t in tools:
            sp = spreads[t]
            note = f"{'-' if markdown else ' '} {t:9s} spread of its times across rounds: median {statistics.median(sp):.0f}%, max {max(sp):.0f}%"
            if failed[(n, t)]:
                note += f"; {failed[(n, t)]} of {runs[(n, t)]} runs FAILED"
            bad = sum(v for k, v in wrong.items() if k[0] == n and k[1] == t)
            if bad:
                note += f"; {bad} WRONG elements"
            print(note)


if __name__ == "__main__":
    main()
