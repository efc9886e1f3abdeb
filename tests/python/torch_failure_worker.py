"""One rank of a failure case of the mci backend (tests/python/torch_failures.py
runs it under mcirun): a torch program written as a user writes it, whose
operation fails. The rank that must see the failure writes what it caught
to REPORT_DIR/rank<R> (type, text, whether the output tensor kept its old
values), waits until every rank that must fail has written (so that mcirun
stopping the job on the first failure cannot hide the second), then lets
the error go on: the process must end non-zero with mci's text.

A rank that must not take part waits on REPORT_DIR/release, which nobody
writes: mcirun stops it when the failing rank exits."""

import os
import pathlib
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mci_torch

REPORT_DIR = pathlib.Path(os.environ["MCI_TEST_REPORT_DIR"])
TIMEOUT_S = 3
GROUP = None  # the group every case runs on (main() makes it)


def absent(seconds=120):
    """A rank that never calls: alive, but elsewhere."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not (REPORT_DIR / "release").exists():
        time.sleep(0.05)
    sys.exit(0)


def report(error, untouched, failing):
    rank = dist.get_rank()
    text = f"{type(error).__module__}.{type(error).__name__}\n{'untouched' if untouched else 'WRITTEN'}\n{error}"
    (REPORT_DIR / f"rank{rank}.tmp").write_text(text)
    (REPORT_DIR / f"rank{rank}.tmp").rename(REPORT_DIR / f"rank{rank}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all((REPORT_DIR / f"rank{r}").exists() for r in failing):
        time.sleep(0.05)


def expect_failure(failing, f, output=None):
    """Runs f on the ranks in failing; it must raise. Reports, then re-raises."""
    before = output.clone() if output is not None else None
    try:
        f()
    except Exception as e:  # noqa: BLE001 - what the user would see
        untouched = before is None or torch.equal(before, output)
        report(e, untouched, failing)
        raise
    print(f"rank {dist.get_rank()}: UNEXPECTED: the failing operation returned", flush=True)
    sys.exit(5)


def skip_wait():
    """Rank 1 never calls: async all_reduce's wait() raises on rank 0."""
    if dist.get_rank() == 1:
        absent()
    t = torch.ones(4)
    work = dist.all_reduce(t, async_op=True, group=GROUP)
    expect_failure([0], work.wait, t)


def set_timeout():
    """torch.distributed.set_timeout lowers the group's timeout (3 s) to
    200 ms: rank 0's all_reduce, which rank 1 skips, fails after 200 ms."""
    dist.set_timeout(timedelta(milliseconds=200), group=GROUP)
    if dist.get_rank() == 1:
        absent()
    t = torch.ones(4)
    expect_failure([0], lambda: dist.all_reduce(t, group=GROUP), t)


def skip_future():
    """The same, waited through the Work's Future."""
    if dist.get_rank() == 1:
        absent()
    t = torch.ones(4)
    work = dist.all_reduce(t, async_op=True, group=GROUP)
    expect_failure([0], lambda: work.get_future().wait(), t)


def skip_blocking():
    """The same, blocking."""
    if dist.get_rank() == 1:
        absent()
    t = torch.ones(4)
    expect_failure([0], lambda: dist.all_reduce(t, group=GROUP), t)


def mismatch_async():
    """4 floats against 8: both ranks' wait() raise MismatchError."""
    t = torch.ones(4 if dist.get_rank() == 0 else 8)
    work = dist.all_reduce(t, async_op=True, group=GROUP)
    expect_failure([0, 1], work.wait, t)


def irecv_never_sent():
    if dist.get_rank() == 0:
        absent()
    t = torch.full((4,), -1.0)
    work = dist.irecv(t, src=0, group=GROUP)
    expect_failure([1], work.wait, t)


def send_never_received():
    """Blocking send of a large tensor (no eager copy can absorb it) to a
    rank that never receives."""
    if dist.get_rank() == 1:
        absent()
    expect_failure([0], lambda: dist.send(torch.ones(1 << 20), dst=1, group=GROUP))


def unwaited_failure():
    """An async operation that failed and was never waited on: the next
    call on the group raises its error instead of computing on."""
    if dist.get_rank() == 1:
        absent()
    t = torch.ones(4)
    work = dist.all_reduce(t, async_op=True, group=GROUP)
    while not work.is_completed():  # it times out meanwhile; asking does not wait on it
        time.sleep(0.01)
    expect_failure([0], lambda: dist.all_reduce(torch.ones(4), async_op=True, group=GROUP).wait(), t)


def _model(width):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.ReLU(), torch.nn.Linear(width, 2))


def ddp_extra_step():
    """Rank 0 runs one step more than rank 1 (which then stays alive,
    elsewhere): rank 0's step raises a TimeoutError naming rank 1."""
    rank = dist.get_rank()
    ddp = torch.nn.parallel.DistributedDataParallel(_model(16), process_group=GROUP)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    steps = 3 if rank == 0 else 2
    for step in range(steps):
        def one():
            opt.zero_grad()
            ddp(torch.randn(4, 8)).sum().backward()
            opt.step()
        if step == 2:
            expect_failure([0], one, None)
            return
        one()
        print(f"rank {rank}: step {step} done", flush=True)
    absent()


def ddp_models():
    """Different models: DDP's construction fails on every rank."""
    width = 16 if dist.get_rank() == 0 else 24
    expect_failure([0, 1], lambda: torch.nn.parallel.DistributedDataParallel(_model(width), process_group=GROUP))


def new_group_alone():
    """Only rank 1 creates a group: it names the rank that never came."""
    if dist.get_rank() == 0:
        absent()
    expect_failure([1], lambda: dist.new_group(backend="mci", timeout=timedelta(seconds=TIMEOUT_S)))


def monitored_barrier_missing():
    """mci_torch.monitored_barrier: rank 0 names the rank that never came,
    within the barrier's own timeout (not the group's)."""
    if dist.get_rank() == 1:
        absent()
    expect_failure([0], lambda: mci_torch.monitored_barrier(GROUP, timeout=timedelta(seconds=1), wait_all_ranks=True))


def main():
    global GROUP
    case = sys.argv[1]
    # The job's start gets a long timeout (a loaded machine starts slowly);
    # the group the case fails on, a short one.
    dist.init_process_group("mci", timeout=timedelta(seconds=60))
    if case == "new_group_alone":
        new_group_alone()
    GROUP = dist.new_group(backend="mci", timeout=timedelta(seconds=TIMEOUT_S))
    globals()[case]()
    print(f"rank {dist.get_rank()}: UNEXPECTED: the case ended without a failure", flush=True)
    sys.exit(6)


if __name__ == "__main__":
    main()
