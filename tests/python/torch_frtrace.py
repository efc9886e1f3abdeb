"""mci's flight recorder read by torch's own analyser: a torch job on
backend "mci" (3 ranks under mcirun) goes wrong, every rank writes its
flight recorder in torch's dump format, and the wheel's torchfrtrace must
name what went wrong. Usage:

    torch_frtrace.py MCIRUN CASE

CASE:
  missing_rank   ranks 0 and 1 call all_reduce #3, rank 2 never does; the
                 timeout writes the dumps (MCI_FR_DUMP_DIR): ranks 0 and 1
                 on their own timeout, rank 2 when their hang report asks
                 it (it never calls mci again). torchfrtrace must say rank 2
                 never joined all_reduce #3.
  mismatch       rank 2 calls broadcast where ranks 0 and 1 call all_reduce
                 #3; after the error every rank calls
                 mci_torch.dump_flight_recorder() (TORCH_FR_DUMP_TEMP_FILE
                 gives the prefix). torchfrtrace must name rank 2 and both
                 collectives.
  signal         MCI_FR_DUMP_ON_SIGNAL=SIGUSR2: each rank signals itself
                 after two all_reduces; its file must appear, and
                 torchfrtrace must find every collective matched.

The driver checks the dumps with pickle too (torch's 2.10 fields), that
mcirun ends 0 and that no process of the run is left."""

import os
import pathlib
import pickle
import secrets
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "support"))
from marked_processes import marked_processes  # noqa: E402

HERE = pathlib.Path(__file__).resolve()
WORLD = 3
PREFIX = "mci_trace_rank_"  # MCI_FR_DUMP_DIR's file names
TIMEOUT_S = 3


# ---------------------------------------------------------------- a rank

def wait_for(paths, seconds=60):
    """Until every path exists; False when the time runs out."""
    deadline = time.monotonic() + seconds
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def worker(case, folder):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    import mci_torch

    dist.init_process_group("mci", timeout=timedelta(seconds=TIMEOUT_S))
    rank = dist.get_rank()
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or str(folder / PREFIX)
    files = [pathlib.Path(f"{prefix}{r}") for r in range(WORLD)]

    def fail(what):
        print(f"rank {rank}: FAILED {what}", flush=True)
        os._exit(3)

    t = torch.ones(4)
    for _ in range(2):
        dist.all_reduce(t)

    if case == "signal":
        os.kill(os.getpid(), signal.SIGUSR2)
        if not wait_for([files[rank]]):
            fail(f"no dump at {files[rank]} after SIGUSR2")
        dist.barrier()  # every rank's file is written before any exits
        dist.destroy_process_group()
        return

    if case == "missing_rank" and rank == 2:
        # Never calls mci again: its hang responder must write its dump.
        if not wait_for([files[rank]]):
            fail(f"rank 2 never wrote {files[rank]} (its hang responder should when asked)")
        return

    try:
        if case == "mismatch" and rank == 2:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
    except (mci_torch.TimeoutError, mci_torch.MismatchError, mci_torch.PeerError) as e:
        text = str(e)
        print(f"rank {rank}: {type(e).__name__}: {text.splitlines()[0]}", flush=True)
        if case == "missing_rank" and "torchfrtrace" not in text:
            fail(f"the TimeoutError does not point to the dump: {text}")
        if isinstance(e, mci_torch.MismatchError) and "the odd one out: rank 2," not in text:
            fail(f"the MismatchError does not name rank 2 as the odd one out: {text}")
    else:
        fail("collective #3 returned")
    # A mismatch writes every rank's dump by itself, as a timeout does: no
    # rank calls dump_flight_recorder() first.
    if not wait_for(files):
        fail(f"not every rank's dump appeared: {[str(f) for f in files if not f.exists()]}")
    if case == "mismatch":
        path = mci_torch.dump_flight_recorder()
        if path != str(files[rank]):
            fail(f"dump_flight_recorder() wrote {path}, want {files[rank]}")


# ---------------------------------------------------------------- the driver

def leftovers(mark):
    """Processes still carrying this run's mark in their environment."""
    return marked_processes(mark)


def check_dumps(case, files, failures):
    """torch's 2.10 fields, as torchfrtrace reads them."""
    for rank, f in enumerate(files):
        if not f.exists():
            failures.append(f"no dump from rank {rank} ({f})")
            continue
        with open(f, "rb") as inp:
            d = pickle.load(inp)
        if d.get("version") != "2.10":
            failures.append(f"rank {rank}: version {d.get('version')!r}, want '2.10'")
        cfg = d.get("pg_config", {})
        if list(cfg) != ["0"] or cfg["0"] != {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}:
            failures.append(f"rank {rank}: pg_config {cfg}, want torch's default group '0' over [0, 1, 2]")
        names = [(e["collective_seq_id"], e["profiling_name"], e["state"]) for e in d.get("entries", [])]
        want = [(1, "mci:all_reduce", "completed"), (2, "mci:all_reduce", "completed")]
        # #3 failed where it was called: it started and never completed.
        if case == "missing_rank" and rank != 2:
            want.append((3, "mci:all_reduce", "started"))
        elif case == "mismatch":
            want.append((3, "mci:broadcast" if rank == 2 else "mci:all_reduce", "started"))
        if names != want:
            failures.append(f"rank {rank}: entries {names}, want {want}")
        for e in d.get("entries", []):
            if e["input_sizes"] != [[4]] or e["input_dtypes"] != ["Float"] or e["process_group"] != ("0", "default_pg"):
                failures.append(f"rank {rank}: entry {e}")
                break


def main():
    mcirun, case = sys.argv[1], sys.argv[2]
    torchfrtrace = pathlib.Path(sys.executable).parent / "torchfrtrace"
    if not torchfrtrace.exists():
        print(f"skipped: {torchfrtrace} does not exist (torch's wheel ships it from 2.5)")
        return 77
    mark = secrets.token_hex(8)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp) / "dumps"
        env = dict(os.environ, MCI_PYTHON=sys.executable, MCI_TEST_MARK=mark)
        for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK", "MCI_FR_DUMP_DIR",
                  "TORCH_FR_DUMP_TEMP_FILE", "MCI_FR_DUMP_ON_SIGNAL"):
            env.pop(v, None)
        prefix = PREFIX
        if case == "mismatch":
            # torch's variable, as a torch user has it set already.
            prefix = "trace_"
            env["TORCH_FR_DUMP_TEMP_FILE"] = str(folder / prefix)
        else:
            env["MCI_FR_DUMP_DIR"] = str(folder)
        if case == "signal":
            env["MCI_FR_DUMP_ON_SIGNAL"] = "SIGUSR2"
        cmd = [mcirun, "--standalone", f"--nproc_per_node={WORLD}", "--grace=5", str(HERE), "--worker", case,
               str(folder)]
        # Its own session: what is left of it on a timeout is ended with it.
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=150)
            print(out)
            if p.returncode != 0:
                failures.append(f"mcirun exited {p.returncode}, want 0")
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            print(p.communicate()[0])
            failures.append("mcirun did not end within 150 s")
        files = [folder / f"{prefix}{r}" for r in range(WORLD)]
        check_dumps(case, files, failures)

        if all(f.exists() for f in files):
            a = subprocess.run([str(torchfrtrace), str(folder), "-p", prefix], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120)
            print(f"$ torchfrtrace {folder} -p {prefix}\n{a.stdout}")
            out = a.stdout
            if a.returncode != 0:
                failures.append(f"torchfrtrace exited {a.returncode}")
            if case == "missing_rank":
                want = ["Not all ranks joining collective, sequence number: 3", "collective: mci:all_reduce",
                        "missing ranks: {2}"]
            elif case == "mismatch":
                want = ["Collective sequence number: 3 has errors", "COLLECTIVE_TYPE_MISMATCH", "'all_reduce'",
                        "'broadcast'"]
                # torchfrtrace takes the first file it lists as the
                # reference and blames the ranks that differ from it: rank 2
                # alone, or ranks 0 and 1 when rank 2's file came first.
                odd_one = "Culprit rank 2" in out or all(
                    w in out for w in ("collective: mci:broadcast", "Culprit rank 0", "Culprit rank 1"))
                if not odd_one:
                    failures.append("torchfrtrace's analysis does not single out rank 2")
            else:
                want = []
                for bad in ("Not all ranks joining", "has errors", "mismatch", "Traceback"):
                    if bad in out:
                        failures.append(f"torchfrtrace found a problem where there is none ('{bad}')")
            failures += [f"torchfrtrace's analysis lacks '{w}'" for w in want if w not in out]

    deadline = time.monotonic() + 10
    while leftovers(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    if leftovers(mark):
        for pid in leftovers(mark):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        failures.append("processes of the run were left running (killed now)")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], pathlib.Path(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
