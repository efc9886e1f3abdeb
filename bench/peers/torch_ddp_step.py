#!/usr/bin/env python3
"""PyTorch's own DDP (gloo) doing what bench/ddp_step.cpp does with mci's
C++ DDP: the same models, batches and timing. One rank of a torchrun job:

  OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run --standalone \
      --nproc_per_node=2 bench/peers/torch_ddp_step.py --model mlp

Prints (rank 0) one JSON line: per round, the median step time with DDP
and under no_sync(), their difference (DDP's communication cost per step),
and the median time of one blocking all_reduce of all the gradients.
"""
import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def make_model(name):
    if name == "linear":
        return nn.Sequential(nn.Linear(784, 10))
    return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                         nn.Linear(2048, 1024), nn.ReLU(), nn.Linear(1024, 10))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp", choices=["linear", "mlp"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    model = make_model(a.model)
    batch, width = (32, 784) if a.model == "linear" else (8, 1024)
    ddp = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, width)
    y = torch.randint(0, 10, (batch,))

    def step():
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
        return (time.perf_counter() - t0) * 1e3

    for _ in range(a.warmup):
        step()
    with ddp.no_sync():
        for _ in range(a.warmup):
            step()
    sync_ms, nosync_ms = [], []
    for _ in range(a.rounds):
        dist.barrier()
        sync_ms.append(statistics.median(step() for _ in range(a.steps)))
        dist.barrier()
        with ddp.no_sync():
            nosync_ms.append(statistics.median(step() for _ in range(a.steps)))
    flat = torch.ones(sum(p.numel() for p in model.parameters()))
    ar = []
    for _ in range(a.rounds * 2):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        ar.append((time.perf_counter() - t0) * 1e3)
    if dist.get_rank() == 0:
        print(json.dumps({"impl": "torch-gloo", "model": a.model, "params": flat.numel(),
                          "step_ms": sync_ms, "nosync_ms": nosync_ms,
                          "cost_ms": [s - n for s, n in zip(sync_ms, nosync_ms)],
                          "allreduce_ms": round(statistics.median(ar), 3)}), flush=True)
    # Dropping DDP's reducer before the group avoids gloo's exit hang
    # (pytorch#56297, docs/pytorch.md): 1 run in 3 hung here without it.
    del ddp, model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
