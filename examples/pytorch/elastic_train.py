"""elastic_train.py: torch DDP on backend "mci" that goes on when a rank is
lost, in place, with no restart (docs/fault-tolerance.md, "In place"); the
torch twin of the C++ example elastic_train, same flags, same lines:

    mcirun --nproc_per_node=4 --on-rank-loss=continue elastic_train.py --steps 40 --step-ms 50

Group rank 0 prints "step S world W loss L" after each step; every rank
prints "final rank R world W sum X" at the end (X the sum of the
parameters, %.12e, the same on every rank). When a peer is lost, the
survivors shrink the group (mci_torch.shrink_group: torch 2.x's
shrink_group on mci), take the model and optimizer state of the survivor
that completed the most steps, wrap the model in DDP again and redo the
interrupted step. The step's samples do not depend on the world size.

--die R@S:POINT: the process started as RANK R kills itself with SIGKILL at
step S, at POINT: between, backward (mid-compute), collective (in DDP's
all-reduce: a communication hook), recovery; only on a job's first start.
"""
import argparse
import os
import signal
import sys
import time

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
    return a


class Trainer:
    def __init__(self, args):
        self.args = args
        self.start_rank = int(os.environ["RANK"])
        self.first_start = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) == 0
        self.step = 0
        self.model = torch.nn.Linear(DIM, 1, dtype=torch.float64)
        with torch.no_grad():
            for p in self.model.parameters():
                p.zero_()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)
        self.wrap()

    def wrap(self):
        self.ddp = torch.nn.parallel.DistributedDataParallel(self.model)
        self.ddp.register_comm_hook(None, self.hook)

    def maybe_die(self, step, point):
        if self.first_start and (self.start_rank, step, point) in self.args.deaths:
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
        # The survivor that completed the most steps gives everyone its model
        # and optimizer state: a step some rank finished counts, one nobody
        # finished is redone.
        most = torch.tensor([done], dtype=torch.int64)
        dist.all_reduce(most, op=dist.ReduceOp.MAX)
        src = torch.tensor([dist.get_rank() if done == most.item() else dist.get_world_size()], dtype=torch.int64)
        dist.all_reduce(src, op=dist.ReduceOp.MIN)
        for p in self.model.parameters():
            dist.broadcast(p.data, int(src.item()))
            buf = self.opt.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
            dist.broadcast(buf, int(src.item()))
        self.opt.zero_grad()
        self.wrap()
        if dist.get_rank() == 0:
            ms = (time.monotonic() - t0) * 1000
            lost_text = ",".join(str(r) for r in lost)
            print(f"recovered world {dist.get_world_size()} lost {lost_text} in {ms:.1f} ms: redo step "
                  f"{most.item() + 1} ({str(err).splitlines()[0]})", flush=True)
        return int(most.item())

    def run(self):
        done = 0
        while done < self.args.steps:
            step = done + 1
            try:
                loss = self.train_step(step)
            except (mci_torch.PeerError, RuntimeError) as e:
                done = self.recover(done, e)
                continue
            done += 1
            if dist.get_rank() == 0:
                at = f" at {int(time.time() * 1000)}" if self.args.timestamps else ""
                print(f"step {step} world {dist.get_world_size()} loss {loss:.6f}{at}", flush=True)
        total = sum(p.detach().sum().item() for p in self.model.parameters())
        print(f"final rank {dist.get_rank()} world {dist.get_world_size()} sum {total:.12e}", flush=True)


def main():
    args = parse()
    torch.set_num_threads(1)
    dist.init_process_group("mci")
    Trainer(args).run()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
