"""torch 2.15's reconfigure contract on "mci" (dist._supports_reconfigure,
dist._get_reconfigure_handle, dist._reconfigure), as a fault-tolerance
library uses it: every process starts as a world of one with
enable_reconfigure=True, publishes its handle out of band (a torch
TCPStore this driver hosts), and the members then reconfigure into
whatever group the scenario needs.

    torch_reconfigure.py MCIRUN              the scenarios, 5 processes
    torch_reconfigure.py MCIRUN --bench N    reconfigure-to-first-all-reduce time, mci and gloo (N rounds)

Scenarios, in order (ids 0-4; id 4 joins late):
identity; send/recv after it; shrink without the last and without a middle
one (ranks renumbered; the one left out alone in a world of one); down to
one each and back; split into two disjoint groups, then merged from a set
of handles (the backend's order); recovery after abort() with a fresh uuid;
a reused uuid refused; a late joiner; handles that disagree (an error on
every member, at once); a member that is gone (an error naming it within
the timeout), and the first member gone (its store cannot be reached)."""

import datetime
import os
import subprocess
import sys
import time

N = 5
TIMEOUT = datetime.timedelta(seconds=30)


# ---------------------------------------------------------------- a process

def worker(me, port, backend):
    import torch
    import torch.distributed as dist

    if backend == "mci":
        import mci_torch  # noqa: F401

    oob = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=120))
    dist.init_process_group(backend, store=dist.PrefixStore(f"own/{me}", oob), rank=0, world_size=1,
                            enable_reconfigure=True, timeout=TIMEOUT)

    def check(ok, what):
        if not ok:
            print(f"id {me}: FAILED {what}", flush=True)
            os._exit(3)

    def sync(name, ids):
        """Every id in ids arrives before any goes on."""
        if me not in ids:
            return
        if oob.add(f"sync/{name}", 1) == len(ids):
            oob.set(f"sync/{name}/go", "1")
        oob.wait([f"sync/{name}/go"])

    check(dist._supports_reconfigure(), "the group does not support reconfigure")
    mine = dist._get_reconfigure_handle()
    check(mine == dist._get_reconfigure_handle(), "the handle changes between calls")
    oob.set(f"handle/{me}", mine)

    def handle(i):
        return oob.get(f"handle/{i}").decode()

    def reconfigure(uuid, members, timeout=None, as_set=False):
        hs = [handle(i) for i in members]
        started = time.monotonic()
        dist._reconfigure(uuid, set(hs) if as_set else hs, timeout=timeout).wait()
        return time.monotonic() - started

    def expect_error(f, *pieces, within=None):
        started = time.monotonic()
        try:
            f()
        except RuntimeError as e:
            took = time.monotonic() - started
            text = str(e)
            missing = [p for p in pieces if p not in text]
            check(not missing, f"the error lacks {missing}: {text}")
            if within is not None:
                check(took < within, f"the error took {took:.1f} s (at most {within} s)")
            return text
        check(False, f"no error (wanted one with {pieces})")

    def sum_of(members):
        t = torch.tensor([float(me + 1)])
        dist.all_reduce(t)
        want = float(sum(i + 1 for i in members))
        check(t.item() == want, f"all_reduce over {members} gave {t.item()}, want {want}")

    first = [0, 1, 2, 3]
    if me != 4:
        # Before any reconfigure: one rank of one, and an operation says
        # what to do (the group has no members yet).
        check(dist.get_rank() == 0 and dist.get_world_size() == 1, "a world of one before reconfigure")
        expect_error(lambda: dist.all_reduce(torch.ones(1)), "enable_reconfigure=True", "_reconfigure")

        # Identity: the ids in order are the ranks.
        reconfigure(1, first)
        check(dist.get_rank() == me and dist.get_world_size() == 4, f"rank {dist.get_rank()} of "
              f"{dist.get_world_size()} after identity")
        sum_of(first)
        # send/recv around the ring.
        out, got = torch.full((3,), float(me)), torch.empty(3)
        reqs = [dist.isend(out, (me + 1) % 4), dist.irecv(got, (me + 3) % 4)]
        for r in reqs:
            r.wait()
        check(got.tolist() == [float((me + 3) % 4)] * 3, f"ring send/recv {got}")

        # Shrink without the last, then without a middle one.
        for uuid, out_id in ((2, 3), (3, 1)):
            members = [i for i in first if i != out_id]
            reconfigure(uuid, members if me != out_id else [me])
            if me == out_id:
                check(dist.get_world_size() == 1 and dist.get_rank() == 0, "the one left out is a world of one")
                sum_of([me])
            else:
                check(dist.get_world_size() == 3 and dist.get_rank() == members.index(me),
                      f"rank {dist.get_rank()} of {dist.get_world_size()} without {out_id}")
                sum_of(members)

        # Down to one each, then back.
        reconfigure(4, [me])
        sum_of([me])
        reconfigure(5, first)
        sum_of(first)

        # Split in two, then merged from a set of handles: the backend
        # orders them, alike on every member.
        half = [0, 1] if me < 2 else [2, 3]
        reconfigure(6, half)
        check(dist.get_world_size() == 2 and dist.get_rank() == half.index(me), "rank in a half")
        sum_of(half)
        reconfigure(7, first, as_set=True)
        ids = torch.empty(4)
        dist.all_gather_into_tensor(ids, torch.tensor([float(me)]))
        order = sorted(first, key=handle)
        check(ids.tolist() == [float(i) for i in order], f"merged order {ids.tolist()}, want {order}")
        check(dist.get_rank() == order.index(me), "the merged rank is the handle's place")

        # abort() from another thread, with an operation pending (a recv
        # nobody sends): abort returns at once and the operation fails with
        # a reason, well before the group's 30 s; then back through
        # reconfigure with a fresh uuid.
        import threading

        pending = dist.irecv(torch.empty(1), src=(dist.get_rank() + 1) % 4)
        aborter = threading.Thread(target=dist.distributed_c10d._get_default_group().abort)
        started = time.monotonic()
        aborter.start()
        aborter.join()
        check(time.monotonic() - started < 5, "abort() did not return at once")
        # Its text: this rank's abort, or a peer's (whichever came first).
        expect_error(pending.wait, within=15)
        expect_error(lambda: dist.all_reduce(torch.ones(1)), "aborted")
        reconfigure(8, first)
        sum_of(first)
        # A uuid is taken once.
        expect_error(lambda: reconfigure(8, first), "already used", within=5)
        sync("before_late", first)

    # The late joiner: a process that was not in any group so far.
    everyone = first + [4]
    reconfigure(9, everyone)
    check(dist.get_rank() == me and dist.get_world_size() == 5, "the late joiner's group")
    sum_of(everyone)

    # Handles that disagree: id 1 swaps two. Every member fails, none
    # waits for the timeout.
    wrong = [0, 2, 1, 3, 4] if me == 1 else everyone
    expect_error(lambda: reconfigure(10, wrong), "other handles", within=TIMEOUT.total_seconds() / 2)
    sync("after_disagree", everyone)

    # A member that is gone: id 4 leaves; the others name it within their
    # (short) timeout.
    if me == 4:
        os._exit(0)
    expect_error(lambda: reconfigure(11, everyone, timeout=datetime.timedelta(seconds=3)), "rank 4",
                 "did not arrive within 3000 ms", within=20)
    # The first member gone: its store cannot be reached.
    sync("before_first_gone", first)
    if me == 0:
        os._exit(0)
    expect_error(lambda: reconfigure(12, first, timeout=datetime.timedelta(seconds=3)),
                 "cannot reach the store of handle 0", within=20)
    # The survivors still form a group without it.
    reconfigure(13, [1, 2, 3])
    sum_of([1, 2, 3])
    print(f"id {me}: reconfigure scenarios ok", flush=True)
    os._exit(0)


def bench_worker(me, port, backend, rounds, n):
    """Times dist._reconfigure to the end of the first all_reduce after it,
    the n members forming a fresh communicator each round. The handles are
    exchanged before the clock starts, each round (gloo's change with every
    communicator; mci's stay)."""
    import torch
    import torch.distributed as dist

    if backend == "mci":
        import mci_torch  # noqa: F401
    oob = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=120))
    dist.init_process_group(backend, store=dist.PrefixStore("init", oob), rank=me, world_size=n,
                            enable_reconfigure=True, timeout=TIMEOUT)
    times = []
    for r in range(rounds):
        oob.set(f"handle/{r}/{me}", dist._get_reconfigure_handle())
        hs = [oob.get(f"handle/{r}/{i}").decode() for i in range(n)]
        t0 = time.perf_counter()
        dist._reconfigure(r + 1, hs).wait()
        dist.all_reduce(torch.ones(1))
        times.append(time.perf_counter() - t0)
    if me == 0:
        times.sort()
        print(f"{backend}: reconfigure of {n} + first all_reduce: median {times[len(times) // 2] * 1e3:.2f} ms "
              f"(min {times[0] * 1e3:.2f}, max {times[-1] * 1e3:.2f}, {rounds} rounds)", flush=True)
    os._exit(0)


# ---------------------------------------------------------------- the driver

def run(backend, args, n):
    import torch.distributed as dist

    oob = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                        timeout=datetime.timedelta(seconds=120))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--id", str(i), str(oob.port), backend]
                              + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(n)]
    failed = 0
    try:
        for i, p in enumerate(procs):
            out, _ = p.communicate(timeout=240)
            print(out, end="")
            if p.returncode != 0:
                print(f"id {i} exited with {p.returncode}")
                failed += 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return failed


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--id":
        me, port, backend = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
        if len(sys.argv) > 5:
            return bench_worker(me, port, backend, int(sys.argv[5]), int(sys.argv[6]))
        return worker(me, port, backend)
    mcirun = sys.argv[1]
    python_dir = os.path.join(os.path.dirname(os.path.realpath(mcirun)), "..", "python")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (python_dir, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("MCI_TORCH_PATH", "ext")
    import torch.distributed as dist

    if not hasattr(dist, "_reconfigure"):
        import torch

        print(f"skipped: torch {torch.__version__} has no reconfigure contract (torch 2.15 added it)")
        return 77
    if "--bench" in sys.argv:
        rounds = int(sys.argv[sys.argv.index("--bench") + 1])
        for backend in ("mci", "gloo", "mci", "gloo"):
            if run(backend, [str(rounds), "2"], 2):
                return 1
        return 0
    failed = run("mci", [], N)
    print("reconfigure scenarios: " + ("all passed" if not failed else f"{failed} process(es) failed"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
