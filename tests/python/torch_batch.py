"""Several scenarios of one torch worker in one mcirun job, as torch's own
suite runs its cases: each rank imports torch once (1.5-3 s of CPU a rank,
most of what a short case costs) and forks one child per scenario. The
child forms its own default group on a store of its own (a prefix of one
TCPStore that rank 0's parent hosts on MASTER_PORT, for the whole job),
runs the scenario and the worker's teardown, and exits; its group, its
threads and whatever it broke go with it. A scenario that fails, or does
not end within SCENARIO_LIMIT_S, is reported by name on each rank, and the
next one runs all the same; the rank exits 1 if any failed.

What runs here is the scenario as a fresh process would run it, less the
import and the env:// rendezvous (the store is given to
init_process_group): a scenario about a program's first start or its exit
(the launcher's view of it) keeps a job of its own. A worker's __main__:

    torch_batch.main(sys.argv[1:], globals(), backend, init_timeout, teardown)

One scenario runs in this process, as before; several (or one argument
with commas, LABEL=SCENARIO each) run as a batch."""

import ctypes
import os
import select
import signal
import sys
import time
import traceback
from datetime import timedelta

import torch.distributed as dist

# A scenario's own limit: the longest (TorchBackend's dead_peer, the mesh
# worker's FSDP2 on 4 ranks) take under 30 s on a loaded machine.
SCENARIO_LIMIT_S = 170
PR_SET_PDEATHSIG = 1


def _store(is_master, timeout):
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=is_master,
                         timeout=timeout, wait_for_workers=False)


def _child(index, name, scenario, backend, init_timeout, teardown, rank, world):
    """Runs in the forked child; never returns."""
    code = 1
    try:
        # A rank killed by mcirun (its timeout, a peer lost) takes its
        # running scenario with it.
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        timeout = init_timeout(name)
        store = dist.PrefixStore(f"torch_batch/{index}/{name}/", _store(False, timeout))
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
        scenario()
        teardown(name)
        code = 0
    except SystemExit as e:  # a check that failed, or a scenario's own exit
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - whatever it is, it is this scenario's failure
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid, limit_s):
    """The child's wait status, or None if it did not end within limit_s
    (it is then killed)."""
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], limit_s)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        return os.waitpid(pid, 0)[1]
    finally:
        os.close(fd)


def _verdict(status):
    if status is None:
        return f"did not end within {SCENARIO_LIMIT_S} s (killed)"
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    code = os.WEXITSTATUS(status)
    return None if code == 0 else f"exit {code}"


def _all_ranks_done(server, rank, world):
    """Rank 0's store outlives every rank's last scenario and every rank's
    wait: each says it is done, waits for the others, then says it leaves;
    rank 0 goes last."""
    store = server or _store(False, timedelta(seconds=SCENARIO_LIMIT_S))
    store.set(f"torch_batch/done/{rank}", "1")
    store.wait([f"torch_batch/done/{r}" for r in range(world)], timedelta(seconds=SCENARIO_LIMIT_S))
    if server is None:
        store.set(f"torch_batch/left/{rank}", "1")
    else:
        store.wait([f"torch_batch/left/{r}" for r in range(1, world)], timedelta(seconds=SCENARIO_LIMIT_S))


def batch(cases, scenarios, backend, init_timeout, teardown):
    """Every (label, scenario) of cases, each in a child of its own; 0 if
    all passed."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    server = _store(True, timedelta(seconds=SCENARIO_LIMIT_S)) if rank == 0 else None
    failed = []
    for index, (label, name) in enumerate(cases):
        sys.stdout.flush()
        sys.stderr.flush()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(index, name, scenarios[name], backend, init_timeout, teardown, rank, world)
        why = _verdict(_wait(pid, SCENARIO_LIMIT_S))
        took = time.monotonic() - started
        if why:
            failed.append(label)
            print(f"rank {rank}: {label} ({name}) FAILED: {why} ({took:.1f} s)", flush=True)
        else:
            print(f"rank {rank}: {label} ({name}) passed ({took:.1f} s)", flush=True)
    _all_ranks_done(server, rank, world)
    if failed:
        print(f"rank {rank}: {len(failed)} of {len(cases)} cases FAILED: {' '.join(failed)}", flush=True)
        return 1
    return 0


def main(argv, scenarios, backend, init_timeout, teardown):
    """argv: the scenarios, each SCENARIO or LABEL=SCENARIO (the label, a
    test's case name, is what the output calls it); several, or one
    argument with commas, make a batch. An unknown one stops it before
    anything runs."""
    cases = [c.split("=", 1) if "=" in c else [c, c] for arg in argv for c in arg.split(",") if c]
    unknown = [name for _, name in cases if not callable(scenarios.get(name))]
    if not cases or unknown:
        sys.exit(f"unknown scenario(s): {' '.join(unknown) or '(none given)'}")
    if len(cases) > 1:
        sys.exit(batch(cases, scenarios, backend, init_timeout, teardown))
    name = cases[0][1]
    dist.init_process_group(backend, timeout=init_timeout(name))
    scenarios[name]()
    teardown(name)
