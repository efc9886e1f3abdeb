"""A failing torch program on backend "mci" under mcirun, as a user runs it,
and what the user must see: the error's type and mci's text on every rank
that waited on the failed operation, its output tensor not written, mcirun
exiting non-zero (never a crash signal), and nothing left running. Usage:

    torch_failures.py MCIRUN CASE

CASE is a function of torch_failure_worker.py; the expectations are in
CASES below. The worker runs under this script's interpreter (MCI_PYTHON)."""

import os
import pathlib
import secrets
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "support"))
from marked_processes import marked_processes  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
WORKER = HERE / "torch_failure_worker.py"

# case: {failing rank: (exception type, pieces of its text)}
HANG = ["Timed out", "rank 1"]
CASES = {
    "skip_wait": {0: ("mci_torch.TimeoutError", ["Timed out", "rank 1", "all_reduce"])},
    "skip_future": {0: ("builtins.RuntimeError", ["TimeoutError", "Timed out", "rank 1"])},
    "skip_blocking": {0: ("mci_torch.TimeoutError", ["Timed out", "rank 1"])},
    "mismatch_async": {r: ("mci_torch.MismatchError", ["rank 0", "rank 1", "x 4", "x 8"]) for r in (0, 1)},
    "irecv_never_sent": {1: ("mci_torch.TimeoutError", ["Timed out", "rank 0", "recv"])},
    "send_never_received": {0: ("mci_torch.TimeoutError", ["Timed out", "rank 1", "send"])},
    "unwaited_failure": {0: ("mci_torch.TimeoutError", ["earlier async all_reduce", "never written", "rank 1"])},
    "ddp_extra_step": {0: ("builtins.RuntimeError", ["TimeoutError", "Timed out", "rank 1"])},
    "ddp_models": {r: ("mci_torch.ConfigError", ["same model on every rank", "parameter 0 is [16, 8] float32 on rank 0",
                                              "[24, 8] float32 on rank 1"]) for r in (0, 1)},
    "new_group_alone": {1: ("mci_torch.TimeoutError", ["group rank 0 never came", "within 3s", "new_group"])},
    "monitored_barrier_missing": {0: ("mci_torch.TimeoutError", ["monitored_barrier #1", "rank 1 did not reach it",
                                                                 "within 1s"])},
    "set_timeout": {0: ("mci_torch.TimeoutError", ["Timed out waiting 200ms", "rank 1", "all_reduce"])},
}


def leftovers(mark):
    """Processes still carrying this run's mark in their environment."""
    return marked_processes(mark)


def main():
    mcirun, case = sys.argv[1], sys.argv[2]
    want = CASES[case]
    mark = f"MCI_TEST_MARK={secrets.token_hex(8)}"
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, MCI_PYTHON=sys.executable, MCI_TEST_REPORT_DIR=folder)
        env[mark.split("=")[0]] = mark.split("=")[1]
        for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
            env.pop(v, None)
        cmd = [mcirun, "--standalone", "--nproc_per_node=2", "--grace=5", str(WORKER), case]
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=150, start_new_session=True)
        print(p.stdout)
        if p.returncode != 1:
            failures.append(f"mcirun exited {p.returncode}, want 1 (a rank's uncaught error; never a signal)")
        for rank, (kind, pieces) in want.items():
            path = pathlib.Path(folder) / f"rank{rank}"
            if not path.exists():
                failures.append(f"rank {rank} reported no error")
                continue
            got_kind, touched, text = path.read_text().split("\n", 2)
            if got_kind != kind:
                failures.append(f"rank {rank} raised {got_kind}, want {kind}: {text}")
            if touched != "untouched":
                failures.append(f"rank {rank}: the failed operation wrote its output tensor")
            failures += [f"rank {rank}'s error lacks '{w}': {text}" for w in pieces if w not in text]
        short = kind.rsplit(".", 1)[1] if kind.startswith("mci_torch.") else "RuntimeError"
        if short not in p.stdout:
            failures.append(f"the job's output never shows {short}")
        if "UNEXPECTED" in p.stdout:
            failures.append("a rank went on as if the operation had succeeded")
        for crash in ("ended with signal", "failed: signal", "terminate called", "Segmentation fault"):
            if crash in p.stdout:
                failures.append(f"a rank crashed ('{crash}' in the job's output)")
    deadline = time.monotonic() + 10
    while leftovers(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = leftovers(mark)
    if left:
        failures.append(f"processes left running: {left}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
