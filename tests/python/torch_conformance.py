"""torch's own distributed test suite against "mci", beside gloo.

torch ships the suite it runs for gloo and nccl in the wheel:
DistributedTest._DistTestBase (torch.testing._internal.distributed.
distributed_test). This harness runs it on CPU tensors at one world size,
once with gloo and once with "mci" standing in for gloo: the suite is told
BACKEND=gloo (its own skip logic), and every init_process_group/new_group
that names gloo is sent to "mci". Every test that passes on gloo must pass
on mci, except the few in EXPECTED_DIFFERENCES (each with its reason).

    torch_conformance.py MCIRUN --world 2                 both columns, compared
    torch_conformance.py MCIRUN --world 2 --only mci -k test_barrier
    torch_conformance.py MCIRUN --world 2 --json out.json (the columns as JSON)

Ranks are forked from the harness (torch's MultiProcessTestCase starts them;
fork costs about 1 s a test where spawn costs about 13), each test in a fresh
set of processes, as torch's own CI does. A column runs in a child
interpreter of its own, so mci's redirection never touches gloo's run.
The mci column runs the tests that gloo's did not skip: the suite's skip
logic reads BACKEND (gloo for both), the GPUs and the like, never the
backend itself, and a test gloo skips is never compared; most skips
happen in the forked ranks, so this halves what the mci column costs. A
test that hangs is ended by the suite's join timeout
(DISTRIBUTED_TESTS_DEFAULT_TIMEOUT, set to 120 s here).

The gloo column's skips (two thirds of the suite, each costing its forks)
are kept between runs beside scripts/test.sh's other caches (outside the
clone), under a name made of everything that decides them: torch's version,
the suite's and this harness's text, the world size, the GPUs and the
suite's TEST_/PYTORCH_ settings. A run that finds them runs only the tests
gloo ran, on both columns; it says so, and where the record is."""

import argparse
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

# Tests whose gloo result mci cannot give by design, with why. Everything
# else that passes on gloo must pass on mci.
EXPECTED_DIFFERENCES = {
    "test_get_backend": 'asserts that the backend\'s name is "gloo" itself; mci names itself "mci"',
}

# Exit codes of a column: 0, or the count of tests that failed in it.
COLUMN_TIMEOUT_S = 1500


def column(backend, world, pattern, names_path, out_path):
    """Runs the suite in this process (a child of the harness): one backend,
    one world size, the tests named in names_path (one a line) if given;
    writes {test: [outcome, detail]} to out_path."""
    os.environ.update(BACKEND="gloo", WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=os.environ.get("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120"))
    if "TEMP_DIR" not in os.environ:
        os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="mci-conformance-")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import unittest

    import torch
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d

    if backend == "mci":
        import mci_torch  # noqa: F401  registers "mci"

        def to_mci(name):
            return "mci" if isinstance(name, str) and name.lower() == "gloo" else name

        init, new_group = dist.init_process_group, dist.new_group

        def init_mci(*args, **kwargs):
            if "backend" in kwargs:
                kwargs["backend"] = to_mci(kwargs["backend"])
            elif args:
                args = (to_mci(args[0]),) + args[1:]
            return init(*args, **kwargs)

        def new_group_mci(*args, **kwargs):
            if "backend" in kwargs:
                kwargs["backend"] = to_mci(kwargs["backend"])
            elif len(args) > 2:
                args = args[:2] + (to_mci(args[2]),) + args[3:]
            return new_group(*args, **kwargs)

        for mod in (dist, c10d):
            mod.init_process_group = init_mci
            mod.new_group = new_group_mci

    from torch.testing._internal.distributed import distributed_test as dt

    class Suite(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._start_processes(torch.multiprocessing.get_context("fork").Process)

    names = sorted(n for n in dir(Suite) if n.startswith("test_") and (not pattern or re.search(pattern, n)))
    if names_path:
        with open(names_path) as f:
            wanted = set(f.read().split())
        names = [n for n in names if n in wanted]
    results = {}

    class Result(unittest.TextTestResult):
        def addSuccess(self, test):
            super().addSuccess(test)
            results[test._testMethodName] = ["pass", ""]

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            results[test._testMethodName] = ["skip", str(reason)[:300]]

        def addFailure(self, test, err):
            super().addFailure(test, err)
            results[test._testMethodName] = ["fail", self._exc_info_to_string(err, test)[-3000:]]

        def addError(self, test, err):
            super().addError(test, err)
            results[test._testMethodName] = ["error", self._exc_info_to_string(err, test)[-3000:]]

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            results[test._testMethodName] = ["xfail", ""]

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            results[test._testMethodName] = ["fail", "unexpected success"]

    suite = unittest.TestSuite(Suite(n) for n in names)
    started = time.monotonic()
    unittest.TextTestRunner(stream=sys.stderr, verbosity=2, resultclass=Result).run(suite)
    print(f"{backend} world {world}: {len(names)} tests in {time.monotonic() - started:.0f} s", file=sys.stderr)
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


def run_column(mcirun, backend, world, pattern, workdir, only_names=None):
    """One column in a child interpreter (only the tests only_names lists,
    if given); its results, or None if it died."""
    out = os.path.join(workdir, f"{backend}-world{world}.json")
    python_dir = os.path.join(os.path.dirname(os.path.realpath(mcirun)), "..", "python")
    # TMPDIR too: torch's test case leaves a file per test in it (its
    # FileStore's), which the harness's folder takes away with it.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (python_dir, os.environ.get("PYTHONPATH")) if p),
               TEMP_DIR=tempfile.mkdtemp(prefix=f"mci-conformance-{backend}-", dir=workdir), TMPDIR=workdir)
    cmd = [sys.executable, os.path.abspath(__file__), mcirun, "--column", backend, "--world", str(world), "--out", out]
    if pattern:
        cmd += ["-k", pattern]
    if only_names is not None:
        names_path = os.path.join(workdir, f"{backend}-world{world}.names")
        with open(names_path, "w") as f:
            f.write("\n".join(sorted(only_names)) + "\n")
        cmd += ["--names", names_path]
    log = os.path.join(workdir, f"{backend}-world{world}.log")
    started = time.monotonic()
    with open(log, "w") as f:
        # A new session, so that every rank it forked can be ended with it.
        p = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            p.wait(timeout=COLUMN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
        finally:
            try:
                os.killpg(p.pid, 9)
            except ProcessLookupError:
                pass
            p.wait()
    print(f"{backend:5} world {world}: ran in {time.monotonic() - started:.0f} s (log: {log})")
    if not os.path.exists(out):
        print(f"{backend} column died before writing its results; the end of its log:")
        print("".join(open(log).readlines()[-40:]))
        return None
    with open(out) as f:
        return json.load(f)


def gloo_skips_path(world):
    """Where the gloo column's skips at this world size are kept: a file
    named by the hash of what decides them, in scripts/cache-root.sh's
    folder; None outside a source checkout."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    if not (repo / "scripts" / "cache-root.sh").exists():
        return None
    root = subprocess.run(["bash", "-c", ". scripts/cache-root.sh && printf %s \"$mci_cache_root\""], cwd=repo,
                          stdout=subprocess.PIPE, text=True).stdout
    if not root:  # never a relative folder, that is, the test's working directory
        return None
    torch_dir = pathlib.Path(importlib.util.find_spec("torch").origin).parent
    key = hashlib.sha256()
    key.update(f"torch {importlib.metadata.version('torch')} world {world}\n".encode())
    for path in (pathlib.Path(__file__), torch_dir / "testing/_internal/distributed/distributed_test.py",
                 torch_dir / "testing/_internal/common_distributed.py"):
        key.update(path.read_bytes())
    key.update(" ".join(sorted(glob.glob("/dev/nvidia[0-9]*"))).encode())
    for name in sorted(os.environ):
        if name.startswith(("TEST_", "PYTORCH_", "CUDA_VISIBLE")):
            key.update(f"{name}={os.environ[name]}\n".encode())
    return pathlib.Path(root) / "torch-conformance" / f"gloo-skips-world{world}-{key.hexdigest()[:16]}.json"


def load_gloo_skips(path):
    """{"skipped": {test: reason}, "ran": [test, ...]} of an earlier full
    gloo column, or None."""
    try:
        with open(path) as f:
            record = json.load(f)
        return record if set(record) == {"skipped", "ran"} else None
    except (OSError, ValueError, TypeError):
        return None


def save_gloo_skips(path, gloo):
    record = {"skipped": {n: v[1] for n, v in gloo.items() if v[0] == "skip"},
              "ran": sorted(n for n, v in gloo.items() if v[0] != "skip")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    tmp.replace(path)


def first_line(detail):
    """The line of a traceback that says what went wrong."""
    lines = [ln.strip() for ln in detail.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception|Failure)\b", ln) or "Error:" in ln:
            return ln[:400]
    return lines[-1][:400] if lines else ""


def compare(gloo, mci, world):
    """Prints the columns' counts and every difference; returns the number of
    tests that pass on gloo but not on mci (less the expected ones)."""
    def count(col, what):
        return sum(1 for v in col.values() if v[0] == what)

    print(f"world {world}: gloo passes {count(gloo, 'pass')}, mci passes {count(mci, 'pass')} "
          f"(skipped: gloo {count(gloo, 'skip')}; mci ran the {len(mci)} gloo did not skip and skipped "
          f"{count(mci, 'skip')} of them)")
    broken = 0
    for name in sorted(gloo):
        g = gloo[name][0]
        m = mci.get(name, ["missing", "not run"])
        if g != "pass" or m[0] == "pass":
            continue
        if name in EXPECTED_DIFFERENCES:
            print(f"  expected: {name}: {EXPECTED_DIFFERENCES[name]}")
            continue
        broken += 1
        print(f"  FAILED on mci, passes on gloo: {name}: {m[0]}: {first_line(m[1])}")
    for name in sorted(mci):
        if mci[name][0] == "pass" and gloo.get(name, ["missing"])[0] != "pass":
            print(f"  mci passes where gloo does not ({gloo.get(name, ['missing'])[0]}): {name}")
    for name in sorted(EXPECTED_DIFFERENCES):
        if name in gloo and gloo[name][0] == "pass" and mci.get(name, [""])[0] == "pass":
            print(f"  note: {name} now passes on mci; drop it from EXPECTED_DIFFERENCES")
    return broken


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mcirun", help="mcirun of the build (mci_torch is found beside it, in ../python)")
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--only", choices=["gloo", "mci"], help="run one column and list its results")
    ap.add_argument("-k", dest="pattern", help="only the tests whose name matches this regular expression")
    ap.add_argument("--json", help="write both columns here")
    ap.add_argument("--column", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--names", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.column:
        return column(a.column, a.world, a.pattern, a.names, a.out)
    try:
        import expecttest  # noqa: F401  torch's test utilities import it
    except ImportError:
        print("skipped: torch's test suite needs expecttest (scripts/torch-venv.sh installs it from "
              "scripts/torch-pin.txt)")
        return 77
    # The whole suite only: a -k run is short and its own.
    skips_path = None if a.pattern else gloo_skips_path(a.world)
    known = load_gloo_skips(skips_path) if skips_path and a.only != "mci" else None
    if known:
        print(f"gloo world {a.world}: the {len(known['skipped'])} tests an earlier run with this torch, suite and "
              f"machine saw gloo skip are not run again; {len(known['ran'])} run (record: {skips_path})")
    with tempfile.TemporaryDirectory(prefix="mci-conformance-") as workdir:
        cols = {}
        for backend in ([a.only] if a.only else ["gloo", "mci"]):
            ran_on_gloo = [n for n, v in cols["gloo"].items() if v[0] != "skip"] if "gloo" in cols else None
            if backend == "gloo" and known:
                ran_on_gloo = known["ran"]
            cols[backend] = run_column(a.mcirun, backend, a.world, a.pattern, workdir, ran_on_gloo)
            if cols[backend] is None:
                return 1
            if backend == "gloo" and known:
                cols["gloo"] = {**{n: ["skip", why] for n, why in known["skipped"].items()}, **cols["gloo"]}
            elif backend == "gloo" and skips_path:
                save_gloo_skips(skips_path, cols["gloo"])
        if a.json:
            with open(a.json, "w") as f:
                json.dump(cols, f, indent=1, sort_keys=True)
        if a.only:
            for name, (outcome, detail) in sorted(cols[a.only].items()):
                print(f"{outcome:5} {name}" + (f": {first_line(detail)}" if outcome in ("fail", "error") else ""))
            return 0
        broken = compare(cols["gloo"], cols["mci"], a.world)
        if broken:
            print(f"{broken} test(s) pass on gloo but not on mci")
            return 1
        print(f"every test that passes on gloo passes on mci at world {a.world}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
