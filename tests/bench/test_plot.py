#!/usr/bin/env python3
"""bench/plot against real mci-perf output, a bench/compare.sh-style folder,
a hand-made one with known medians, an nccl-tests fixture, and its errors.

Usage: test_plot.py MCIRUN MCI_PERF   (run with a python3 that has matplotlib)
"""
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOT = os.path.join(ROOT, "bench", "plot")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "plot", "nccl_tests_all_reduce.json")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

failures = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def plot(*args, env=None):
    # The interpreter running this test, not the one the shebang finds:
    # it is the one known to import matplotlib.
    return subprocess.run([sys.executable, PLOT, *args], capture_output=True, text=True, env=env, timeout=120)


def data(*args):
    """{title: {label: {size: value}}} from --data."""
    r = plot(*args, "--data")
    if r.returncode != 0:
        check(False, f"plot {' '.join(args)} --data exits 0 (got {r.returncode}: {r.stderr.strip()})")
        return {}
    charts, title = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("# label\t"):
            continue
        if line.startswith("# "):
            title = line[2:]
            charts[title] = {}
            continue
        label, size, value = line.split("\t")
        charts[title].setdefault(label, {})[int(size)] = float(value)
    return charts


def only(charts):
    check(len(charts) == 1, f"one chart (got {list(charts)})")
    return next(iter(charts.values()), {})


def same(got, want, what):
    """got and want: {size: value}; the same sizes, values within print precision."""
    ok = set(got) == set(want) and all(math.isclose(got[s], want[s], rel_tol=1e-8, abs_tol=1e-15) for s in want)
    if not ok:
        diff = {s: (got.get(s), want.get(s)) for s in sorted(set(got) | set(want)) if got.get(s) != want.get(s)}
        what += f" (size: (plotted, expected)) {diff}"
    check(ok, what)


def fails_with(args, text, code=None, env=None):
    r = plot(*args, env=env)
    ok = r.returncode != 0 and (code is None or r.returncode == code) and text in r.stderr \
        and "Traceback" not in r.stderr
    check(ok, f"plot {' '.join(args)}: exit {'non-zero' if code is None else code}, says '{text}'"
              + ("" if ok else f" (got {r.returncode}: {r.stderr.strip()})"))


def from_json(path, placement, key):
    with open(path) as f:
        doc = json.load(f)
    return {r["size"]: r[placement][key] for r in doc["results"] if r[placement] is not None}


def run_perf(mcirun, perf, *args):
    cmd = [mcirun, "--nproc_per_node=2", "--standalone", perf, "all_gather", "-b", "8", "-e", "64K", "-f", "2",
           "-n", "2", "-w", "1", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")


def svg_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_json(tmp, mcirun, perf):
    # all_gather: with 2 ranks its busbw is half its algbw, so a wrong
    # column shows (all_reduce's would be equal).
    shm, tcp = os.path.join(tmp, "shm.json"), os.path.join(tmp, "tcp.json")
    run_perf(mcirun, perf, "-J", shm)
    run_perf(mcirun, perf, "--transport", "tcp", "-J", tcp)
    with open(shm) as f:
        transport = json.load(f)["transport"]
    label = f"mci cpu/{transport} 2 ranks"

    charts = data(shm)
    check(any("all_gather" in t and "2 ranks" in t and "out of place" in t for t in charts),
          f"the title names the collective, ranks and placement ({list(charts)})")
    lines = only(charts)
    check(list(lines) == [label], f"the label is '{label}' (got {list(lines)})")
    same(lines.get(label, {}), from_json(shm, "out_of_place", "busbw_GBps"), "busbw = the JSON's, every size")
    same(only(data(shm, "--placement", "in")).get(label, {}), from_json(shm, "in_place", "busbw_GBps"),
         "--placement in: the in-place busbw")
    same(only(data(shm, "--metric", "algbw")).get(label, {}), from_json(shm, "out_of_place", "algbw_GBps"),
         "--metric algbw")
    same(only(data(shm, "--metric", "time")).get(label, {}), from_json(shm, "out_of_place", "time_us"),
         "--metric time")

    lines = only(data(shm, f"Forced TCP={tcp}"))
    check(sorted(lines) == sorted([label, "Forced TCP"]), f"LABEL=FILE names the line (got {list(lines)})")
    same(lines.get("Forced TCP", {}), from_json(tcp, "out_of_place", "busbw_GBps"), "the labelled file's values")
    again = os.path.join(tmp, "again.json")
    shutil.copy(shm, again)
    lines = only(data(shm, again))
    check(sorted(lines) == sorted([f"{label} (shm.json)", f"{label} (again.json)"]),
          f"two files with one label get their names added (got {list(lines)})")
    lines = only(data(shm, shm))
    check(len(lines) == 2, f"the same file twice: two lines still (got {list(lines)})")

    png, svg, pdf = (os.path.join(tmp, f"chart.{x}") for x in ("png", "svg", "pdf"))
    r = plot(shm, tcp, "-o", png)
    with open(png, "rb") as f:
        check(r.returncode == 0 and f.read(8) == PNG_MAGIC, "-o chart.png writes a PNG")
    check(png in r.stderr, "it says which file it wrote")
    r = plot(shm, f"Forced TCP={tcp}", "--ceiling", "memcpy=9.1", "--ceiling", "2 Gbit/s link=0.25",
             "--title", "Plot test chart", "-o", svg)
    text = svg_text(svg) if r.returncode == 0 else ""
    for want in (label, "Forced TCP", "memcpy", "2 Gbit/s link", "Plot test chart"):
        check(want in text, f"the SVG shows '{want}'")
    r = plot(shm, "--logy", "-o", pdf)
    with open(pdf, "rb") as f:
        check(r.returncode == 0 and f.read(5) == b"%PDF-", "-o chart.pdf writes a PDF (--logy)")
    return shm


def write_runs_and_header(out, runs, header):
    """The two files bench/compare.sh writes beside raw/."""
    with open(os.path.join(out, "runs.csv"), "w") as f:
        f.write("\n".join(runs) + "\n")
    with open(os.path.join(out, "header.txt"), "w") as f:
        f.write(header)


def write_raw(path, rows):
    cols = ["collective", "backend", "transport", "algo", "ranks", "size", "count", "type", "redop", "root",
            "placement", "time_us", "algbw_GBps", "busbw_GBps", "wrong", "barrier_us"]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        w.writeheader()
        w.writerows(rows)


def test_compare_real(tmp, mcirun, perf):
    # compare.sh runs one size per call; one sweep per tool and round, split
    # by size, gives the same files.
    out = os.path.join(tmp, "compare")
    os.makedirs(os.path.join(out, "raw"))
    runs = ["round,ranks,tool,size,load1,rc"]
    expected = {}  # tool -> size -> [busbw per round]
    for rnd in (1, 2):
        for tool, transport in (("mci-auto", "auto"), ("mci-tcp", "tcp")):
            sweep = os.path.join(tmp, f"{tool}.{rnd}.csv")
            run_perf(mcirun, perf, "--transport", transport, "--csv", sweep)
            with open(sweep, newline="") as f:
                rows = list(csv.DictReader(f))
            for size in sorted({int(r["size"]) for r in rows}):
                mine = [r for r in rows if int(r["size"]) == size]
                write_raw(os.path.join(out, "raw", f"{tool}.n2.s{size}.r{rnd}.csv"), mine)
                runs.append(f"{rnd},2,{tool},{size},0.5,0")
                for r in mine:
                    if r["placement"] == "out_of_place":
                        expected.setdefault(tool, {}).setdefault(size, []).append(float(r["busbw_GBps"]))
    write_runs_and_header(out, runs, "# mci compare: all_gather float sum, ranks: 2, rounds: 2, sizes: 8 .. 65536, "
                          "iters 2 warmup 1\n# tools: mci-auto mci-tcp\n")

    charts = data(out)
    check(any(t.startswith("all_gather float sum, 2 ranks") and "median of 2 rounds" in t for t in charts),
          f"the title comes from header.txt ({list(charts)})")
    lines = only(charts)
    check(list(lines) == ["mci (auto)", "mci (tcp)"], f"one line per tool, named (got {list(lines)})")
    for tool, name in (("mci-auto", "mci (auto)"), ("mci-tcp", "mci (tcp)")):
        same(lines.get(name, {}), {s: statistics.median(v) for s, v in expected[tool].items()},
             f"{name}: the median over the 2 rounds")
    lines = only(data(out, "--stat", "best"))
    same(lines.get("mci (auto)", {}), {s: max(v) for s, v in expected["mci-auto"].items()},
         "--stat best: the highest busbw")
    r = plot(out, "-o", os.path.join(tmp, "compare.png"))
    check(r.returncode == 0 and os.path.exists(os.path.join(tmp, "compare.png")),
          "one world size: -o writes that very file")


def test_compare_made(tmp):
    # Three rounds whose median is neither the mean, the first, the last nor
    # the best; two world sizes; one failed run; Open MPI out of place only (as
    # an mpi-perf older than its in-place columns wrote).
    out = os.path.join(tmp, "made")
    os.makedirs(os.path.join(out, "raw"))
    factors = {1: 3.0, 2: 1.0, 3: 0.25}  # round -> busbw factor: the median is round 2's
    want = {}  # (ranks, name, placement, metric) -> {size: value}
    runs = ["round,ranks,tool,size,load1,rc"]
    for n in (2, 4):
        for k, (tool, name) in enumerate((("mci-auto", "mci (auto)"), ("gloo", "Gloo"), ("ompi", "Open MPI"))):
            for size in (1024, 1 << 20):
                base = (k + 1) * n * size / 1e5
                for rnd, fct in factors.items():
                    rows = []
                    for placement in ("out_of_place",) if tool == "ompi" else ("out_of_place", "in_place"):
                        extra = 1.0 if placement == "out_of_place" else 0.5
                        bw = base * fct * extra
                        rows.append({"collective": "all_reduce", "ranks": n, "size": size, "placement": placement,
                                     "time_us": f"{size / bw / 1e3:.3f}", "algbw_GBps": f"{bw * 2:.6f}",
                                     "busbw_GBps": f"{bw:.6f}"})
                        if rnd == 2:
                            want.setdefault((n, name, placement, "busbw"), {})[size] = float(f"{bw:.6f}")
                            want.setdefault((n, name, placement, "time"), {})[size] = float(f"{size / bw / 1e3:.3f}")
                        if rnd == 1:
                            want.setdefault((n, name, placement, "best"), {})[size] = float(f"{bw:.6f}")
                            want.setdefault((n, name, placement, "time best"), {})[size] = \
                                float(f"{size / bw / 1e3:.3f}")
                    write_raw(os.path.join(out, "raw", f"{tool}.n{n}.s{size}.r{rnd}.csv"), rows)
                    runs.append(f"{rnd},{n},{tool},{size},1.0,0")
    runs.append("3,4,gloo,2097152,1.0,137")
    write_runs_and_header(out, runs, "# mci compare: all_reduce float sum, ranks: 1 2, rounds: 3, sizes: 1024 1048576, "
                          "iters 20 warmup 5\n# hosts: 2 network namespaces, ranks per host: 1 2 (the ranks column "
                          "counts all), links: 2gbit\n")

    charts = data(out)
    check(len(charts) == 2, f"two world sizes, two charts (got {list(charts)})")
    for n in (2, 4):
        title = next((t for t in charts if f", {n} ranks," in t), None)
        check(title is not None and "2 hosts, links 2gbit" in title, f"a {n}-rank chart, naming hosts and links "
              f"({title})")
        lines = charts.get(title, {})
        check(list(lines) == ["mci (auto)", "Gloo", "Open MPI"], f"{n} ranks: tools in order (got {list(lines)})")
        for name in ("mci (auto)", "Gloo", "Open MPI"):
            same(lines.get(name, {}), want[(n, name, "out_of_place", "busbw")], f"{n} ranks, {name}: the median")
    lines = only(data(out, "--ranks", "4", "--stat", "best"))
    same(lines.get("Gloo", {}), want[(4, "Gloo", "out_of_place", "best")], "--ranks 4 --stat best")
    lines = only(data(out, "--ranks", "2", "--metric", "time"))
    same(lines.get("mci (auto)", {}), want[(2, "mci (auto)", "out_of_place", "time")], "--metric time: median time")
    lines = only(data(out, "--ranks", "2", "--metric", "time", "--stat", "best"))
    same(lines.get("Open MPI", {}), want[(2, "Open MPI", "out_of_place", "time best")], "--stat best: the lowest time")
    lines = only(data(out, "--ranks", "2", "--placement", "in"))
    check("Open MPI" not in lines, "--placement in: Open MPI (out of place only here) has no line")
    same(lines.get("Gloo", {}), want[(2, "Gloo", "in_place", "busbw")], "--placement in: the in-place median")
    r = plot(out, "--data")
    check("failed" in r.stderr, f"a failed run is noted ({r.stderr.strip()})")

    chart = os.path.join(tmp, "made.png")
    r = plot(out, "-o", chart)
    written = [os.path.join(tmp, f"made.n{n}.png") for n in (2, 4)]
    check(r.returncode == 0 and all(os.path.exists(p) for p in written) and not os.path.exists(chart),
          "several world sizes: made.n2.png and made.n4.png, no made.png")
    check(all(p in r.stderr for p in written), f"it names both files ({r.stderr.strip()})")
    fails_with([out, "--ranks", "8", "--data"], "no results for --ranks 8")
    return out


def test_nccl_tests():
    charts = data(FIXTURE)
    check(any(t.startswith("all_reduce float sum, 4 ranks, 2 hosts") for t in charts),
          f"nccl-tests: title from args[0], devices x GPUs and hostnames ({list(charts)})")
    lines = only(charts)
    check(list(lines) == ["nccl-tests 4 ranks"], f"nccl-tests: its label (got {list(lines)})")
    same(lines.get("nccl-tests 4 ranks", {}), from_json(FIXTURE, "out_of_place", "bus_bw"), "nccl-tests: bus_bw")
    same(only(data(FIXTURE, "--placement", "in", "--metric", "time")).get("nccl-tests 4 ranks", {}),
         from_json(FIXTURE, "in_place", "time"), "nccl-tests: in-place time")


def test_errors(tmp, shm, folder):
    fails_with([os.path.join(tmp, "nope.json"), "--data"], "no such file or folder")
    other = os.path.join(tmp, "other.json")
    with open(other, "w") as f:
        json.dump({"results": [{"size": 8, "time": 1.0}]}, f)
    fails_with([other, "--data"], "neither mci-perf's -J output nor nccl-tests'")
    text = os.path.join(tmp, "table.txt")
    with open(text, "w") as f:
        f.write("# size time busbw\n8 1.0 0.1\n")
    fails_with([text, "--data"], "not a JSON file")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    fails_with([empty, "--data"], "without runs.csv")
    os.makedirs(os.path.join(tmp, "norounds", "raw"))
    with open(os.path.join(tmp, "norounds", "runs.csv"), "w") as f:
        f.write("round,ranks,tool,size,load1,rc\n")
    fails_with([os.path.join(tmp, "norounds"), "--data"], "no raw/")
    # send_recv's shape: nothing in place.
    with open(shm) as f:
        doc = json.load(f)
    for r in doc["results"]:
        r["in_place"] = None
    ring = os.path.join(tmp, "ring.json")
    with open(ring, "w") as f:
        json.dump(doc, f)
    fails_with([ring, "--placement", "in", "--data"], "no in place busbw results")
    fails_with([shm, "-o", os.path.join(tmp, "chart.jpg")], "cannot write")
    fails_with([shm, "-o", os.path.join(tmp, "chart.jpg")], ".png, .svg, .pdf")
    fails_with([shm, "-o", os.path.join(tmp, "no", "such", "dir", "chart.png")], "cannot write")
    fails_with([shm, "--ceiling", "memcpy", "--data"], "LABEL=GBPS")
    fails_with([shm, "--ceiling", "memcpy=fast", "--data"], "LABEL=GBPS")
    fails_with([shm, "--metric", "time", "--ceiling", "memcpy=9", "--data"], "--ceiling is in GB/s")
    fails_with([shm], "nothing to do")
    fails_with([folder, "--ranks", "3", "--data"], "no results for --ranks 3")
    # A python without matplotlib: one whose import of it fails.
    fake = os.path.join(tmp, "fake")
    os.makedirs(os.path.join(fake, "matplotlib"))
    with open(os.path.join(fake, "matplotlib", "__init__.py"), "w") as f:
        f.write("raise ImportError('No module named matplotlib (test)')\n")
    env = dict(os.environ, PYTHONPATH=fake)
    fails_with([shm, "-o", os.path.join(tmp, "x.png")], "apt-get install python3-matplotlib", code=2, env=env)
    r = plot(shm, "--data", env=env)
    check(r.returncode == 0, "--data alone needs no matplotlib")
    # Run by a python without matplotlib (a venv of this one, without its
    # packages), it runs itself again under MCI_PYTHON, which has it.
    venv = os.path.join(tmp, "venv")
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True, text=True)
    bare = os.path.join(venv, "bin", "python3")
    if made.returncode != 0 or subprocess.run([bare, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        print("note: no python without matplotlib to run bench/plot with: its re-run is not exercised")
    else:
        chart = os.path.join(tmp, "rerun.png")
        r = subprocess.run([bare, PLOT, shm, "-o", chart], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, MCI_PYTHON=sys.executable))
        check(r.returncode == 0 and os.path.getsize(chart) > 0,
              f"under a python without matplotlib, bench/plot draws with MCI_PYTHON's ({r.stderr.strip()})")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    mcirun, perf = sys.argv[1:]
    with open(PLOT) as f:
        check(f.readline().strip() == "#!/usr/bin/env python3" and os.access(PLOT, os.X_OK),
              "bench/plot is an executable python3 script")
    tmp = tempfile.mkdtemp(prefix="mci-plot-test.")
    try:
        shm = test_json(tmp, mcirun, perf)
        test_compare_real(tmp, mcirun, perf)
        made = test_compare_made(tmp)
        test_nccl_tests()
        test_errors(tmp, shm, made)
    finally:
        if failures:
            print(f"kept {tmp} for a look")
        else:
            shutil.rmtree(tmp)
    if failures:
        print(f"{len(failures)} checks failed:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
