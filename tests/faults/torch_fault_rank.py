"""One rank of the fault matrix on torch 2.15 (tests/faults/matrix.py): the
same training, flags, lines and faults as fault_rank.cpp, through
torch.distributed on backend "mci" or "gloo" (FAULT_BACKEND). Under
--policy continue (backend "mci"), a rank that meets a failure shrinks the
group in place (mci_torch.shrink_group), the survivors take the model of
the one that completed the most steps and redo the step.

Moments here: init, first, large, p2p, shrink, exit. Faults: sigkill,
sigstop, abort (the group's abort, from another thread), destroy
(destroy_process_group with an all_reduce in flight), external.
"""
import argparse
import json
import os
import signal
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

KDIM, KBATCH = 16, 60
MASK = (1 << 64) - 1


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def grad(s, j, k):
    return mix(((s << 32) ^ (j << 8) ^ k) & MASK) % 2001 - 1000


def model_hash(w):
    h = 1469598103934665603
    for v in w:
        h = mix(h ^ (v & MASK))
    return f"{h:016x}"


class Rank:
    def __init__(self, o):
        self.o = o
        self.me = int(os.environ["RANK"])
        self.last = int(os.environ["WORLD_SIZE"]) - 1
        self.w = [0] * KDIM
        self.done = 0
        self.injected = False
        self.first_loss = False
        self.group = None
        self.log = open(os.path.join(o.dir, f"rank{self.me}.jsonl"), "a")

    def line(self, **kv):
        self.log.write(json.dumps(kv) + "\n")
        self.log.flush()

    def victim(self):
        return self.me == self.o.victim and self.o.fault != "none"

    def fault_time(self):
        with open(os.path.join(self.o.dir, f"fault.{self.me}"), "w") as f:
            f.write(f"{time.time_ns()}\n")

    def do_fault(self):
        self.fault_time()
        f = self.o.fault
        if f == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif f == "sigstop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif f == "abort":
            (self.group or dist.group.WORLD).abort()  # c10d's ProcessGroup::abort: every backend's
        elif f == "external":
            with open(os.path.join(self.o.dir, f"at.{self.me}"), "w") as fh:
                fh.write(f"{time.time_ns()}\n")

    def inject_later(self, seconds):
        if self.injected:
            return
        self.injected = True

        def later():
            time.sleep(seconds)
            self.do_fault()

        threading.Thread(target=later, daemon=True).start()

    def share(self, s):
        g = [0] * KDIM
        rank, world = dist.get_rank(self.group), dist.get_world_size(self.group)
        for j in range(rank, KBATCH, world):
            for k in range(KDIM):
                g[k] += grad(s, j, k)
        return torch.tensor(g, dtype=torch.int64)

    def destroy_in_flight(self, g):
        self.injected = True
        self.fault_time()
        work = dist.all_reduce(g, group=self.group, async_op=True)
        dist.destroy_process_group()
        try:
            work.wait()
        except Exception:  # noqa: BLE001 - whatever the destroyed group says
            pass
        raise RuntimeError("this rank destroyed its process group with an all_reduce in flight, and leaves")

    def step(self, s):
        time.sleep(self.o.step_ms / 1000)
        if s == self.o.step and self.o.moment == "shrink" and self.me == self.last and not self.first_loss:
            self.first_loss = True
            os.kill(os.getpid(), signal.SIGKILL)
        g = self.share(s)
        here = s == (1 if self.o.moment == "first" else self.o.step) and self.victim() and not self.injected
        if self.o.moment == "first" and s == 1 and self.me != self.o.victim:
            time.sleep(0.02)
        if here and self.o.moment == "first":
            if self.o.fault == "destroy":
                self.destroy_in_flight(g)
            self.inject_later(0.005)
        dist.all_reduce(g, group=self.group)
        if s == self.o.step and self.o.moment in ("large", "p2p"):
            self.moment_op(here)
        self.w = [a + b for a, b in zip(self.w, g.tolist())]

    def moment_op(self, here):
        if here and self.o.fault == "destroy":
            self.destroy_in_flight(torch.zeros(KDIM, dtype=torch.int64))
        if self.o.moment == "large":
            big = torch.ones(self.o.large_mib << 18, dtype=torch.float32)
            if here:
                self.inject_later(0.005)
            dist.all_reduce(big, group=self.group)
            n = dist.get_world_size(self.group)
            if big[0].item() != n or big[-1].item() != n:
                raise RuntimeError(f"the large all_reduce gave {big[0].item()} instead of {n}")
        else:
            n, r = dist.get_world_size(self.group), dist.get_rank(self.group)
            if n < 2:
                return  # a survivor left alone has no ring
            out = torch.full((1 << 18,), float(self.me))
            inp = torch.full((1 << 18,), -1.0)
            if here:
                self.inject_later(0.005)
            elif self.me != self.o.victim:
                time.sleep(0.02)
            to = dist.get_global_rank(self.group, (r + 1) % n) if self.group is not None else (r + 1) % n
            frm = dist.get_global_rank(self.group, (r + n - 1) % n) if self.group is not None else (r + n - 1) % n
            reqs = [dist.irecv(inp, frm, group=self.group, tag=3), dist.isend(out, to, group=self.group, tag=3)]
            for q in reqs:
                q.wait()

    def recover(self, s):
        import mci_torch

        if self.o.moment == "shrink" and self.victim() and s == self.o.step and not self.injected:
            self.inject_later(0)
        # A rank lost inside the recovery, after the survivors agreed and
        # before they shared the model, is one more loss: shrink again, as a
        # program must (each shrink leaves out at least the rank just lost).
        for _ in range(dist.get_world_size()):
            group, _ = mci_torch.shrink_group(self.group)
            self.group = group
            try:
                return self.sync_model()
            except mci_torch.PeerError as e:
                self.line(error=str(e)[:2000], step=s, t_ns=time.time_ns())
        raise RuntimeError("the recovery lost a rank at every try")

    def sync_model(self):
        most = torch.tensor([self.done], dtype=torch.int64)
        dist.all_reduce(most, op=dist.ReduceOp.MAX, group=self.group)
        rank = dist.get_rank(self.group)
        who = torch.tensor([rank if self.done == most.item() else 1 << 30], dtype=torch.int64)
        dist.all_reduce(who, op=dist.ReduceOp.MIN, group=self.group)
        w = torch.tensor(self.w, dtype=torch.int64)
        src = dist.get_global_rank(self.group, who.item()) if self.group is not None else who.item()
        dist.broadcast(w, src, group=self.group)
        self.w = w.tolist()
        self.done = most.item()

    def run(self):
        import mci_torch  # noqa: F401  (registers "mci")

        backend = os.environ.get("FAULT_BACKEND", "mci")
        timeout = timedelta(milliseconds=int(os.environ.get("FAULT_TIMEOUT_MS", "2000")))
        if self.o.moment == "init" and self.victim():
            self.inject_later(0.005)
        # On several hosts whose mcirun start apart (the etcd paths), the
        # ranks meet within FAULT_INIT_TIMEOUT_MS (each imports torch, on a
        # loaded machine, seconds apart); the group's timeout is then set.
        init_ms = int(os.environ.get("FAULT_INIT_TIMEOUT_MS", "0"))
        try:
            dist.init_process_group(backend, timeout=timedelta(milliseconds=init_ms) if init_ms else timeout)
            if init_ms:
                dist.set_timeout(timeout)
        except Exception as e:  # noqa: BLE001
            return self.failed(e, "init")
        s = 1
        while s <= self.o.steps:
            try:
                self.step(s)
                self.done += 1
                self.line(step=s, world=dist.get_world_size(self.group), t_ns=time.time_ns())
                s = self.done + 1
            except Exception as e:  # noqa: BLE001 - mci's and gloo's errors alike
                self.line(error=str(e)[:2000], step=s, t_ns=time.time_ns())
                if self.o.policy == "stop" or not dist.is_initialized():
                    return self.failed(e, "step")
                try:
                    self.recover(s)
                except Exception as again:  # noqa: BLE001
                    return self.failed(again, "recovery")
                s = self.done + 1
        expected = [0] * KDIM
        for st in range(1, self.o.steps + 1):
            for j in range(KBATCH):
                for k in range(KDIM):
                    expected[k] += grad(st, j, k)
        self.line(final=model_hash(self.w), expected=model_hash(expected), world=dist.get_world_size(self.group),
                  t_ns=time.time_ns())
        if self.o.moment == "exit" and self.victim():
            self.injected = True
            self.do_fault()
        dist.destroy_process_group()
        return 0

    def failed(self, e, where):
        self.line(error=str(e)[:2000], where=where, t_ns=time.time_ns())
        print(f"torch_fault_rank: rank {self.me} ({where}): {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--fault", default="none")
    ap.add_argument("--moment", default="first")
    ap.add_argument("--victim", type=int, default=-1)
    ap.add_argument("--policy", default="stop")
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--large-mib", type=int, default=64)
    ap.add_argument("--step-ms", type=int, default=50)
    o = ap.parse_args()
    torch.set_num_threads(1)
    code = Rank(o).run()
    sys.stdout.flush()
    os._exit(code)  # no interpreter teardown racing the fault's threads


if __name__ == "__main__":
    main()
