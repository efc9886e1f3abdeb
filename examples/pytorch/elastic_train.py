"""elastic_train.py: torch DDP on backend "mci" that goes on when a rank is
lost, in place, with no restart (docs/fault-tolerance.md, "In place"); the
torch twin of the C++ example elastic_train, same flags, same lines:

    mcirun --nproc_per_node=4 --on-rank-loss=continue elastic_train.py --steps 40 --step-ms 50

Group rank 0 prints "step S world W loss L" after each step; every rank
prints "final rank R world W sum X bits H" at the end (X the sum of the
parameters, %.12e, H a hash of the parameters' and the optimizer's bits,
both the same on every rank). When a peer is lost, the
survivors shrink the group (mci_torch.shrink_group: torch 2.x's
shrink_group on mci), take the model and optimizer state of the survivor
that completed the most steps, wrap the model in DDP again and redo the
interrupted step. The step's samples do not depend on the world size.

Under --on-rank-loss=replace (torch 2.15), the process mcirun starts in a
lost rank's place joins the running group (mci_torch.join_running_group),
which the members grow at their next step boundary
(mci_torch.joiners_waiting, grow_group: torch's reconfigure contract on
mci); it takes the model and optimizer state of the most advanced replica,
prints "joined as rank R of world W at step S", and rank 0 prints "grew
world W joined K in T ms at step S".

--whole: under replace, no step runs on fewer ranks than WORLD_SIZE: after
a loss the members wait at each step boundary (at most --join-timeout)
for the replacements. With MCI_REPRODUCIBLE=1 every step then sums the
same shares in the same order, and the run ends with the bits of the run
never interrupted (docs/env.md, "Same bits").

--die R@S:POINT: the process started as RANK R kills itself with SIGKILL at
step S, at POINT: between, backward (mid-compute), collective (in DDP's
all-reduce: a communication hook), recovery; only on a job's first start,
never in a replacement.
"""
import argparse
import hashlib
import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mci_torch

DIM, BATCH, LR, MOMENTUM = 8, 48, 0.05, 0.9
MASK = (1 << 64) - 1


def sample_input(sample, k):
    h = (sample * 0x9E3779B97F4A7C15 + k * 0xBF58476D1CE4E5B9) & MASK
    return ((h >> 11) % 2001) / 1000.0 - 1.0


def batch(step, rank, world):
    ids = [step * BATCH + i for i in range(rank, BATCH, world)]
    x = torch.tensor([[sample_input(s, k) for k in range(DIM)] for s in ids], dtype=torch.float64)
    y = 0.5 + sum((k % 3 - 1) * 0.75 * x[:, k] for k in range(DIM))
    return x, y.unsqueeze(1)


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--step-ms", type=int, default=0)
    ap.add_argument("--timestamps", action="store_true")
    ap.add_argument("--die", action="append", default=[], metavar="R@S:POINT")
    ap.add_argument("--join-timeout", type=float, default=60, metavar="SECONDS",
                    help="how long a replacement waits to be taken in (and the members for it to form the group)")
    ap.add_argument("--wait-joiners-at", type=int, default=0, metavar="STEP",
                    help="under replace: before step STEP, wait (at most --join-timeout) until a replacement "
                         "waits to join, rather than go on smaller")
    ap.add_argument("--whole", action="store_true",
                    help="under replace: no step on fewer ranks than WORLD_SIZE (wait for the replacements)")
    a = ap.parse_args()
    deaths = set()
    for d in a.die:
        try:
            r, rest = d.split("@")
            s, point = rest.split(":")
            deaths.add((int(r), int(s), point))
        except ValueError:
            ap.error(f"--die takes RANK@STEP:POINT (e.g. 1@10:backward), not {d!r}")
        if point not in ("between", "backward", "collective", "recovery"):
            ap.error(f"--die's POINT is between, backward, collective or recovery, not {point!r}")
    a.deaths = deaths
    a.join_timeout = timedelta(seconds=a.join_timeout)
    return a


class Trainer:
    def __init__(self, args, joined):
        self.args = args
        self.start_rank = int(os.environ["RANK"])
        self.first_start = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0
        self.replacement = mci_torch.is_replacement()
        self.start_world = int(os.environ["WORLD_SIZE"])
        self.step = 0
        self.done = 0
        self.joined = joined
        self.gave_up = False  # --whole: no replacement came within --join-timeout
        self.model = torch.nn.Linear(DIM, 1, dtype=torch.float64)
        with torch.no_grad():
            for p in self.model.parameters():
                p.zero_()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)
        if joined:
            # The members grew the group at a step boundary and take the
            # same steps next: the most advanced replica's state, then DDP.
            self.done = self.sync(0)
            self.share_gave_up()
            print(f"joined as rank {dist.get_rank()} of world {dist.get_world_size()} at step {self.done + 1}",
                  flush=True)
        self.wrap()

    def wrap(self):
        self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)
        self.ddp.register_comm_hook(None, self.hook)

    def maybe_die(self, step, point):
        if self.first_start and not self.replacement and (self.start_rank, step, point) in self.args.deaths:
            print(f"dying: rank {self.start_rank} at step {step} at {int(time.time() * 1000)}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    def hook(self, _state, bucket):
        # DDP's default averaging, with the "collective" death point inside it.
        t = bucket.buffer()
        fut = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).get_future()
        self.maybe_die(self.step, "collective")
        return fut.then(lambda f: f.value()[0])

    def train_step(self, step):
        self.step = step
        self.maybe_die(step, "between")
        world, rank = dist.get_world_size(), dist.get_rank()
        x, y = batch(step, rank, world)
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.ddp(x), y)
        half = self.args.step_ms / 2000.0
        time.sleep(half)
        self.maybe_die(step, "backward")
        time.sleep(self.args.step_ms / 1000.0 - half)
        loss.backward()
        avg = loss.detach().clone()
        dist.all_reduce(avg, op=dist.ReduceOp.AVG)
        self.opt.step()  # only after every all-reduce of the step succeeded
        return avg.item()

    def recover(self, done, err):
        self.maybe_die(done + 1, "recovery")
        t0 = time.monotonic()
        _, lost = mci_torch.shrink_group()
        most = self.sync(done)
        self.wrap()
        if dist.get_rank() == 0:
            ms = (time.monotonic() - t0) * 1000
            lost_text = ",".join(str(r) for r in lost)
            print(f"recovered world {dist.get_world_size()} lost {lost_text} in {ms:.1f} ms: redo step "
                  f"{most + 1} ({str(err).splitlines()[0]})", flush=True)
        return most

    def sync(self, done):
        """The member that completed the most steps gives everyone its model
        and optimizer state: a step some rank finished counts, one nobody
        finished is redone. Returns the steps done."""
        src, most = mci_torch.most_advanced(done)
        for p in self.model.parameters():
            dist.broadcast(p.data, src)
            buf = self.opt.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
            dist.broadcast(buf, src)
        self.opt.zero_grad()
        return most

    def joiners_waiting(self, step):
        """Whether replacements wait to join (collective). Before
        --wait-joiners-at's step (every step under --whole), while the group
        is smaller than at the start, the members wait for one, at most
        --join-timeout."""
        waiting = mci_torch.joiners_waiting()
        wait_here = (self.args.whole and not self.gave_up) or step == self.args.wait_joiners_at
        if not wait_here or dist.get_world_size() >= self.start_world:
            return waiting
        until = time.monotonic() + self.args.join_timeout.total_seconds()
        while not waiting:
            # Rank 0's clock decides for all: each check is collective.
            over = torch.tensor([int(time.monotonic() >= until)])
            dist.broadcast(over, 0)
            if over.item():
                if self.args.whole:
                    # Every rank heard rank 0: none waits at a later boundary.
                    self.gave_up = True
                    if dist.get_rank() == 0:
                        print(f"no replacement within {self.args.join_timeout.total_seconds():.0f} s: going on "
                              f"with world {dist.get_world_size()} of {self.start_world} at step {step}; its bits "
                              "will differ from a run that was never interrupted", flush=True)
                break
            time.sleep(0.05)
            waiting = mci_torch.joiners_waiting()
        return waiting

    def share_gave_up(self):
        """--whole: a replacement that joins after the members gave up
        waiting hears it from rank 0 (both sides call this right after the
        grow), so it does not wait at the next boundary while they step."""
        if self.args.whole:
            g = torch.tensor([int(self.gave_up)])
            dist.broadcast(g, 0)
            self.gave_up = bool(g.item())

    def short(self):
        """--whole: the group is smaller than WORLD_SIZE, and its members
        still wait for replacements."""
        return self.args.whole and not self.gave_up and dist.get_world_size() < self.start_world

    def grow(self, step):
        """A step boundary under replace: replacements waiting join here."""
        t0 = time.monotonic()
        joined = mci_torch.grow_group(timeout=self.args.join_timeout)
        self.done = self.sync(self.done)
        self.share_gave_up()
        self.wrap()
        if dist.get_rank() == 0:
            ms = (time.monotonic() - t0) * 1000
            print(f"grew world {dist.get_world_size()} joined {joined} in {ms:.1f} ms at step {step}", flush=True)

    def run(self):
        replace = os.environ.get("MCI_ON_RANK_LOSS") == "replace"
        # A replacement joined at the members' boundary check, after which
        # they go on to the step: so does it (the checks are collective).
        checked = self.joined
        while self.done < self.args.steps:
            step = self.done + 1
            done = self.done
            try:
                # --whole: while the group is smaller than at the start, every
                # rank looks (and waits) at each boundary, a replacement that
                # just joined included, until it is whole again; each look is
                # collective.
                look, checked = replace and (not checked or self.short()), False
                while look and self.joiners_waiting(step):
                    self.grow(step)
                    done = self.done
                    step = done + 1
                    look = self.short()
                loss = self.train_step(step)
            except (mci_torch.PeerError, RuntimeError) as e:
                self.done = self.recover(done, e)
                continue
            self.done = done = done + 1
            if dist.get_rank() == 0:
                at = f" at {int(time.time() * 1000)}" if self.args.timestamps else ""
                print(f"step {step} world {dist.get_world_size()} loss {loss:.6f}{at}", flush=True)
        total = sum(p.detach().sum().item() for p in self.model.parameters())
        h = hashlib.blake2b(digest_size=8)
        for p in self.model.parameters():
            h.update(p.detach().numpy().tobytes())
            buf = self.opt.state[p].get("momentum_buffer")
            if buf is not None:
                h.update(buf.numpy().tobytes())
        print(f"final rank {dist.get_rank()} world {dist.get_world_size()} sum {total:.12e} bits {h.hexdigest()}",
              flush=True)


def main():
    args = parse()
    torch.set_num_threads(1)
    joined = mci_torch.is_replacement()
    if joined:
        mci_torch.join_running_group(timeout=args.join_timeout)
    else:
        dist.init_process_group("mci")
    Trainer(args, joined).run()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
