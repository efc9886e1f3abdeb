"""tests/python/torch_batch.py, the harness the batched torch cases run in,
on scenarios whose outcome is known: one that passes, one where a rank
fails a check, one where a rank hangs (past a short limit), one that
raises, and one that passes after all of them. Each failure must be named
on the ranks, every later case must still run and pass, and the job must
exit non-zero. Usage, with a torch tier's interpreter:

    torch_batch_check.py MCIRUN

(Run by MCIRUN, this file is also the worker: its argument is the batch.)"""

import os
import pathlib
import subprocess
import sys
import time
from datetime import timedelta

LIMIT_S = 6


def worker():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    import torch
    import torch.distributed as dist

    import mci_torch  # noqa: F401  registers "mci"
    import torch_batch

    torch_batch.SCENARIO_LIMIT_S = LIMIT_S

    def passes():
        t = torch.ones(2)
        dist.all_reduce(t)
        if t.tolist() != [2.0, 2.0]:
            sys.exit(3)

    def fails():
        if dist.get_rank() == 1:
            sys.exit(3)
        dist.all_reduce(torch.ones(2))  # its peer is gone: a PeerError

    def hangs():
        if dist.get_rank() == 0:
            time.sleep(10 * LIMIT_S)
        dist.all_reduce(torch.ones(2))  # rank 1: the group's timeout

    def raises():
        raise ValueError("raised on purpose")

    def teardown(name):
        dist.barrier()
        dist.destroy_process_group()

    scenarios = dict(passes=passes, fails=fails, hangs=hangs, raises=raises)
    # A short group timeout only where a rank is meant to wait for a peer
    # that is gone or stuck; the others keep a long one, so that forming a
    # group on a busy machine is never what fails them.
    def init_timeout(name):
        return timedelta(seconds=3 if name.lower() in ("fails", "hangs") else 60)

    torch_batch.main(sys.argv[1:], scenarios, "mci", init_timeout, teardown)


def main():
    mcirun = sys.argv[1]
    env = dict(os.environ, MCI_PYTHON=sys.executable)
    cases = "First=passes,Fails=fails,Hangs=hangs,Raises=raises,Last=passes"
    p = subprocess.run([mcirun, "--standalone", "--nproc_per_node=2", __file__, cases], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    print(p.stdout)
    want = [f"rank {r}: {case} passed" for r in (0, 1) for case in ("First (passes)", "Last (passes)")]
    want += ["rank 1: Fails (fails) FAILED: exit 3", "rank 0: Fails (fails) FAILED: exit 1",
             f"rank 0: Hangs (hangs) FAILED: did not end within {LIMIT_S} s (killed)",
             "rank 1: Hangs (hangs) FAILED: exit 1", "ValueError: raised on purpose"]
    want += [f"rank {r}: 3 of 5 cases FAILED: Fails Hangs Raises" for r in (0, 1)]
    missing = [w for w in want if w not in p.stdout]
    if missing or p.returncode == 0:
        print(f"FAILED: mcirun exit {p.returncode} (want non-zero); missing lines: {missing}")
        return 1
    print("ok: each failing case named, every later case run, the job failed")
    return 0


if __name__ == "__main__":
    sys.exit(worker() if "=" in sys.argv[1] else main())
