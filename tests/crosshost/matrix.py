#!/usr/bin/env python3
"""The cross-host correctness matrix: mci's collectives across network-namespace
hosts joined by real links, every rank's result checked element by element
(xcheck_rank.cpp says how) and bitwise against the other ranks'.

A cell is one layout of hosts and ranks (2x2: two hosts of two ranks;
2+1+2: three hosts, uneven; 1x4: one host, shared memory), one MTU, one way of choosing algorithms
(mci's own, or MCI_ALGO / MCI_TRANSPORT forcing one), and one moment:
"steady" runs every case of the cell twice in one job (each case's first
call, then again on other data); "first" starts fresh jobs whose calls are
each the first of their kind in the job, the very first one rotating (a
job's first large call is where a buffer, a socket's window or a segment
is used for the first time).

    matrix.py --mcirun BUILD/bin/mcirun --rank-program BUILD/bin/xcheck_rank
              [--full] [--cell PATTERN] [--list] [--json OUT] [--table OUT]

Without --full it runs the fixed subset CI runs (every cell named in
SUBSET below); --full runs every cell. --cell runs the cells whose name
contains PATTERN (a failing cell's name, to rerun it alone). Exits 0 when
every cell passed, 1 otherwise, 77 when namespace hosts cannot be made
here (not root).
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from netns_hosts import NetnsHosts  # noqa: E402

DTYPE_BYTES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}
# Every rank holds the same bits after these (the others' outputs differ by rank).
SAME_EVERYWHERE = {"all_reduce", "broadcast", "all_gather"}

# The sizes where mci changes its way, in bytes of the (per-rank) count:
# a shared-memory box's small payload (80), the counterparts' all-reduce
# (4 KiB), shm direct/sliced and single-copy (16 KiB), the pipeline chunk
# (64 KiB - 128) and recursive doubling/ring (64 KiB), the hierarchical
# all-to-all's block (256 KiB), the shm buffer (512 KiB), a piece between
# hosts (1 MiB) and pipelining (2 MiB), then many pieces.
BOUNDARIES = [80, 4096, 16384, 65408, 65536, 262144, 524288, 1 << 20, 2 << 20, 4 << 20]


def counts_around(dtype, sizes, deltas=(-1, 0, 1)):
    es = DTYPE_BYTES[dtype]
    out = {1, 7}
    for b in sizes:
        for d in deltas:
            out.add(max(1, b // es + d))
    return sorted(out)


def case(kind, dtype, count, op=None, root=None, asynchronous=False, in_place=False):
    words = [kind, dtype, str(count)]
    if op:
        words.append(f"op={op}")
    if root is not None:
        words.append(f"root={root}")
    if asynchronous:
        words.append("async")
    if in_place:
        words.append("inplace")
    return ",".join(words)


def steady_cases(world, full, kinds=None):
    """Every kind x dtype x size around the boundaries x sync/async (the
    subset: fewer dtypes and sizes)."""
    out = []
    dtypes = ["f32", "bf16", "i32", "i64"] if full else ["f32", "i32"]
    if kinds == REDUCING and "bf16" not in dtypes:
        dtypes.append("bf16")  # the same-bits cells: one rounding of 16-bit floats, whatever the layout
    per_rank_cap = 4 << 20 if full else 1 << 20
    sizes = BOUNDARIES if full else [80, 4096, 16384, 65536, 524288, 1 << 20, 2 << 20, 4 << 20]
    deltas = (-1, 0, 1) if full else (1,)
    last = world - 1
    for dtype in dtypes:
        ints = dtype.startswith("i")
        for n, count in enumerate(counts_around(dtype, sizes, deltas)):
            bytes_ = count * DTYPE_BYTES[dtype]
            asynchronous = n % 2 == 1  # alternate, so both modes meet every region
            root = [0, 1, last][n % 3]
            want = lambda k: kinds is None or k in kinds  # noqa: E731
            if want("all_reduce"):
                out.append(case("all_reduce", dtype, count, "sum", asynchronous=asynchronous))
                if full or n % 3 == 0:
                    out.append(case("all_reduce", dtype, count, "avg" if not ints else "max", in_place=True,
                                    asynchronous=not asynchronous))
            if want("broadcast"):
                out.append(case("broadcast", dtype, count, root=root, asynchronous=asynchronous,
                                in_place=n % 2 == 0))
            if want("reduce"):
                out.append(case("reduce", dtype, count, "sum", root=root, asynchronous=asynchronous,
                                in_place=n % 2 == 1))
            if bytes_ <= per_rank_cap:
                if want("all_gather"):
                    out.append(case("all_gather", dtype, count, asynchronous=asynchronous, in_place=n % 2 == 0))
                if want("reduce_scatter"):
                    out.append(case("reduce_scatter", dtype, count, "sum", asynchronous=not asynchronous))
                if want("all_to_all"):
                    out.append(case("all_to_all", dtype, count, asynchronous=asynchronous))
                if want("gather"):
                    out.append(case("gather", dtype, count, root=root, asynchronous=asynchronous))
                if want("scatter"):
                    out.append(case("scatter", dtype, count, root=root, asynchronous=not asynchronous))
                if want("send"):
                    out.append(case("send", dtype, count, asynchronous=asynchronous))
    if kinds is None or "barrier" in kinds:
        out.append(case("barrier", "f32", 0))
        out.append(case("barrier", "f32", 0, asynchronous=True))
    return out


def first_cases(world):
    """Large calls, each the first of its kind in a fresh job; a job's
    very first call rotates through them. The first is issue 49's: 4 MiB of
    floats summed across two hosts."""
    last = world - 1
    return [
        case("all_reduce", "f32", 1 << 20, "sum"),
        case("all_reduce", "i32", (2 << 20) // 4 + 1, "sum", asynchronous=True),
        case("broadcast", "f32", (1 << 20) + 1, root=last),
        case("reduce_scatter", "i32", (1 << 18) + 1, "sum"),
        case("all_gather", "bf16", (1 << 19) + 1, asynchronous=True),
        case("reduce", "f32", (1 << 20) - 1, "sum", root=1 % world),
        case("all_to_all", "i64", (1 << 15) + 1),
        case("scatter", "f32", (1 << 18) + 3, root=0),
        case("gather", "i32", (1 << 18) + 3, root=last),
        case("send", "f32", (1 << 20) + 1),
    ]


class Cell:
    def __init__(self, name, layout, mtu, env, moment, jobs=1, kinds=None, same_data=None):
        self.name = name
        # Cells with the same tag run on the same data (one seed) so that
        # their outputs can be compared bit for bit (compare_layouts).
        self.same_data = same_data
        self.layout = layout  # ranks per host
        self.mtu = mtu
        self.env = env
        self.moment = moment  # "steady" or "first"
        self.jobs = jobs
        self.kinds = kinds

    @property
    def world(self):
        return sum(self.layout)


LAYOUTS = {"2x2": [2, 2], "2+1+2": [2, 1, 2], "1+3": [1, 3], "4x1": [1, 1, 1, 1], "1x4": [4], "1x5": [5]}
# The collectives whose bits depend on the order of the additions.
REDUCING = {"all_reduce", "reduce", "reduce_scatter"}
# What MCI_ALGO can force across hosts, and the kinds each serves there.
FORCED = {
    "direct": {"all_reduce", "broadcast", "all_gather", "gather", "scatter", "reduce_scatter"},
    "ring": {"all_reduce", "all_gather", "reduce_scatter"},
    "recursive_doubling": {"all_reduce"},
    "tree": {"broadcast", "reduce"},
    "pairwise": {"all_to_all"},
    "dissemination": {"barrier"},
}


def all_cells():
    cells = []
    for lname, layout in LAYOUTS.items():
        # One host has no link: its cells once, shared memory and loopback.
        for mtu in (1500, 9000) if len(layout) > 1 else (1500,):
            base = f"{lname}/mtu{mtu}"
            cells.append(Cell(f"{base}/auto/steady", layout, mtu, {}, "steady"))
            cells.append(Cell(f"{base}/auto/first", layout, mtu, {}, "first", jobs=20))
            cells.append(Cell(f"{base}/tcp-only/steady", layout, mtu, {"MCI_TRANSPORT": "tcp"}, "steady"))
            cells.append(Cell(f"{base}/lazy/first", layout, mtu, {"MCI_CONNECT": "lazy"}, "first", jobs=5))
            for algo, kinds in FORCED.items():
                cells.append(Cell(f"{base}/{algo}/steady", layout, mtu, {"MCI_ALGO": algo}, "steady", kinds=kinds))
    # Same bits whatever the layout (docs/env.md, "Same bits"): the same
    # cases on the same data, 4 ranks as 1x4, 2x2 and 4x1; with
    # MCI_REPRODUCIBLE=1 every output must hash the same in the three
    # (compare_layouts), without it the runner says how many differ.
    for lname in ("1x4", "2x2", "4x1"):
        for mode, env in (("reproducible", {"MCI_REPRODUCIBLE": "1"}), ("default-bits", {})):
            cells.append(Cell(f"{lname}/mtu1500/{mode}/steady", LAYOUTS[lname], 1500, env, "steady",
                              kinds=REDUCING, same_data=mode))
    # Five ranks on three uneven hosts against one host: the chain of hosts
    # (host_chain) through a host of one rank.
    for lname in ("1x5", "2+1+2"):
        cells.append(Cell(f"{lname}/mtu1500/reproducible/steady", LAYOUTS[lname], 1500, {"MCI_REPRODUCIBLE": "1"},
                          "steady", kinds=REDUCING, same_data="reproducible-5"))
    return cells


# The fixed subset every CI run takes: the layout of issue 49 at its MTU,
# its first calls in 20 fresh jobs; the uneven three hosts at the other
# MTU; one forced algorithm of each shape (flat ring, tree) across hosts;
# everything over TCP; and one host's shared memory, first calls too.
SUBSET = [
    "1x4/mtu1500/auto/steady",
    "1x4/mtu1500/auto/first",
    "2x2/mtu1500/auto/first",
    "2x2/mtu1500/auto/steady",
    "2+1+2/mtu9000/auto/steady",
    "2+1+2/mtu9000/auto/first",
    "2x2/mtu9000/ring/steady",
    "2+1+2/mtu1500/tree/steady",
    "2x2/mtu1500/tcp-only/steady",
    "1x4/mtu1500/reproducible/steady",
    "2x2/mtu1500/reproducible/steady",
    "4x1/mtu1500/reproducible/steady",
    "1x5/mtu1500/reproducible/steady",
    "2+1+2/mtu1500/reproducible/steady",
]
SUBSET_FIRST_JOBS = {"2+1+2/mtu9000/auto/first": 5, "1x4/mtu1500/auto/first": 10}


class JobResult:
    def __init__(self):
        self.hashes = {}  # (call, rank) -> (case, hash)
        self.calls = 0
        self.wrong = 0
        self.problems = []


def run_job(args, hosts, cell, cases, repeat, seed):
    res = JobResult()
    out_dir = tempfile.mkdtemp(prefix="mci-xcheck-", dir="/var/tmp")  # not /tmp: each host has its own
    try:
        port = hosts.free_port(0)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MCI_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_"))}
        env.update({"MCI_JOB_TOKEN": f"xcheck-{seed}", "OMP_NUM_THREADS": "1", "XCHECK_TIMEOUT_MS": "60000"})
        env.update(cell.env)
        procs = []
        logs = []
        for i, nproc in enumerate(cell.layout):
            log = open(os.path.join(out_dir, f"node{i}.log"), "w+")
            logs.append(log)
            argv = [args.mcirun, f"--nnodes={len(cell.layout)}", f"--node_rank={i}", f"--nproc_per_node={nproc}",
                    f"--master_addr={hosts.address(0)}", f"--master_port={port}", args.rank_program, "--dir", out_dir,
                    "--seed", str(seed), "--repeat", str(repeat), *cases]
            procs.append(hosts.popen(i, argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.monotonic() + args.job_timeout
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        if None in codes:
            res.problems.append(f"hang: the job did not end within {args.job_timeout} s (seed {seed})")
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        for i, rc in enumerate(codes):
            if rc not in (0, None):
                logs[i].seek(0)
                tail = logs[i].read()[-1500:]
                res.problems.append(f"node {i}'s mcirun exited {rc} (seed {seed}):\n{tail}")
        for log in logs:
            log.close()
        check_outputs(out_dir, cell.world, len(cases) * repeat, res, seed)
        # A job that ended leaves nothing: no process in any host, nothing
        # in any host's /dev/shm.
        end = time.monotonic() + 5
        while hosts.leftovers() and time.monotonic() < end:
            time.sleep(0.05)
        for line in hosts.leftovers():
            res.problems.append(f"leak after the job (seed {seed}): {line}")
        hosts.clear_shm()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    return res


def check_outputs(out_dir, world, calls, res, seed):
    by_call = {}
    for r in range(world):
        path = os.path.join(out_dir, f"rank{r}.jsonl")
        if not os.path.exists(path):
            res.problems.append(f"rank {r} wrote no results (seed {seed})")
            continue
        lines = [json.loads(line) for line in open(path) if line.strip()]
        errors = [line["error"] for line in lines if "error" in line]
        if errors:
            res.problems.append(f"rank {r} failed (seed {seed}): {errors[0]}")
        done = [line for line in lines if "error" not in line]
        if len(done) != calls and not errors:
            res.problems.append(f"rank {r} reported {len(done)} calls of {calls} (seed {seed})")
        for line in done:
            res.calls += 1
            res.hashes[(line["call"], r)] = (line["case"], line["hash"])
            by_call.setdefault(line["call"], []).append(line)
            if line["wrong"] or line["input_changed"]:
                res.wrong += line["wrong"]
                where = (f" first at element {line['first']}: {line['got']} instead of {line['want']}"
                         if "first" in line else "")
                res.problems.append(
                    f"WRONG: rank {r}, call {line['call']} ({line['case']}): {line['wrong']} wrong element(s),"
                    f" {line['input_changed']} input element(s) changed;{where} (seed {seed})")
    for call, lines in sorted(by_call.items()):
        kind = lines[0]["case"].split(",")[0]
        if kind in SAME_EVERYWHERE and len({line["hash"] for line in lines}) > 1:
            res.problems.append(f"DIFFERENT BITS: call {call} ({lines[0]['case']}): the ranks' outputs differ: "
                                + ", ".join(f"rank {line['rank']} {line['hash']}" for line in lines)
                                + f" (seed {seed})")


def compare_layouts(cells, results):
    """Cells run on the same data in several layouts: under
    MCI_REPRODUCIBLE=1 every rank's output of every call must be the same
    bits in each layout (the first cell's problems say which differ); in
    the default mode the count of differing outputs is only said."""
    by_name = {r["cell"]: r for r in results}
    tags = {}
    for c in cells:
        if c.same_data and c.name in by_name:
            tags.setdefault(c.same_data, []).append(by_name[c.name])
    for tag, runs in tags.items():
        if len(runs) < 2:
            continue
        ref = runs[0]
        for other in runs[1:]:
            differ = [key for key, (case, h) in ref["hashes"].items()
                      if key in other["hashes"] and other["hashes"][key][1] != h]
            compared = sum(1 for key in ref["hashes"] if key in other["hashes"])
            line = (f"{tag}: {len(differ)} of {compared} outputs differ between {ref['cell']} and {other['cell']}")
            reproducible = tag.startswith("reproducible")
            print(("     " if not reproducible or not differ else "FAIL ") + line, flush=True)
            if reproducible and (differ or compared == 0):
                other["ok"] = False
                detail = ", ".join(f"call {call} rank {rank} ({ref['hashes'][(call, rank)][0]})"
                                   for call, rank in differ[:5])
                other["problems"].append(f"DIFFERENT BITS ACROSS LAYOUTS under MCI_REPRODUCIBLE=1: {line}"
                                         + (f"; first: {detail}" if detail else ": nothing compared"))


def run_cell(args, hosts, cell, rng):
    start = time.monotonic()
    total = JobResult()
    jobs = failed_jobs = 0
    if cell.moment == "steady":
        cases = steady_cases(cell.world, args.full, cell.kinds)
        jobs_plan = [(cases, 2)]
    else:
        first = [args.first] if args.first else first_cases(cell.world)
        n = SUBSET_FIRST_JOBS.get(cell.name, cell.jobs) if not args.full else cell.jobs
        n = args.jobs or n
        jobs_plan = [(first[j % len(first):] + first[:j % len(first)], 1) for j in range(n)]
    hashes = {}
    for cases, repeat in jobs_plan:
        seed = rng.getrandbits(48) if cell.same_data is None else args.same_data_seed
        r = run_job(args, hosts, cell, cases, repeat, seed)
        hashes.update(r.hashes)
        jobs += 1
        failed_jobs += 1 if r.problems else 0
        total.calls += r.calls
        total.wrong += r.wrong
        total.problems += r.problems
    return {"cell": cell.name, "jobs": jobs, "failed_jobs": failed_jobs, "calls": total.calls, "wrong": total.wrong,
            "seconds": round(time.monotonic() - start, 1), "ok": not total.problems,
            "problems": total.problems, "hashes": hashes}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mcirun", required=True)
    ap.add_argument("--rank-program", required=True)
    ap.add_argument("--full", action="store_true", help="every cell (else the CI subset)")
    ap.add_argument("--cell", help="only the cells whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the cells and exit")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--table", help="write the results as a Markdown table here")
    # A backstop only: every call of a job is bounded by mci's own timeout
    # (XCHECK_TIMEOUT_MS, 60 s), which turns a hang into a rank's error; a
    # whole steady job of --full makes thousands of calls (minutes under a
    # sanitizer or a loaded machine).
    ap.add_argument("--job-timeout", type=float, default=1200)
    ap.add_argument("--seed", type=int, help="the random seed of the run (default: drawn, and printed)")
    ap.add_argument("--jobs", type=int, help="fresh jobs per first-call cell (default: the cell's)")
    ap.add_argument("--first", help="the one case every fresh job of a first-call cell runs (default: they rotate)")
    args = ap.parse_args()
    args.mcirun = os.path.abspath(args.mcirun)
    args.rank_program = os.path.abspath(args.rank_program)

    cells = all_cells()
    if args.cell:
        cells = [c for c in cells if args.cell in c.name]
    elif not args.full:
        cells = [c for c in cells if c.name in SUBSET]
    if args.list:
        for c in cells:
            print(c.name)
        return 0
    why = NetnsHosts.unavailable()
    if why:
        print(f"matrix.py: skipped: {why}")
        return 77
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    args.same_data_seed = random.Random(seed).getrandbits(48) + 1
    print(f"matrix.py: {len(cells)} cell(s), seed {seed} (rerun with --seed {seed})", flush=True)
    rng = random.Random(seed)
    results = []
    started = time.monotonic()
    # Cells that share a number of hosts and an MTU share the namespaces.
    groups = {}
    for c in cells:
        groups.setdefault((len(c.layout), c.mtu), []).append(c)
    for (count, mtu), group in groups.items():
        with NetnsHosts(count, mtu=mtu) as hosts:
            for c in group:
                r = run_cell(args, hosts, c, rng)
                results.append(r)
                status = "ok  " if r["ok"] else "FAIL"
                print(f"{status} {c.name}: {r['jobs']} job(s) ({r['failed_jobs']} failed), {r['calls']} checked "
                      f"call(s) over all ranks, {r['wrong']} wrong element(s), {r['seconds']} s", flush=True)
                for p in r["problems"][:10]:
                    print("     " + p.replace("\n", "\n     "), flush=True)
                if not r["ok"]:
                    print(f"     rerun alone: {sys.argv[0]} --mcirun ... --rank-program ... --cell '{c.name}'"
                          f" --seed {seed}", flush=True)
    compare_layouts(cells, results)
    for r in results:
        r.pop("hashes", None)
    elapsed = time.monotonic() - started
    failed = [r for r in results if not r["ok"]]
    print(f"matrix.py: {len(results) - len(failed)} passed, {len(failed)} failed in {elapsed:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seed": seed, "seconds": round(elapsed, 1), "cells": results}, f, indent=1)
    if args.table:
        with open(args.table, "w") as f:
            f.write("| cell | jobs | failed jobs | checked calls | wrong elements | seconds | result |\n"
                    "|---|---|---|---|---|---|---|\n")
            for r in results:
                f.write(f"| {r['cell']} | {r['jobs']} | {r['failed_jobs']} | {r['calls']} | {r['wrong']} | "
                        f"{r['seconds']} | {'pass' if r['ok'] else 'FAIL'} |\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
