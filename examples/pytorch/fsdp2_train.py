"""FSDP2 (torch.distributed.fsdp.fully_shard) training on the backend "mci",
CPU tensors, torch 2.x with mci's C++ extension (mci_torch._C).

    mcirun --nproc_per_node=2 examples/pytorch/fsdp2_train.py [--steps N]

(MCI_PYTHON names the interpreter whose torch mci was built for, e.g. the
test venv's /var/cache/mci/venv-torch-2.15.0/bin/python; mcirun puts
mci_torch's folder on PYTHONPATH.)

Each rank holds about 1/world of the parameters (every parameter split along
its first dimension): fully_shard on each Linear and on the whole model. Forward all-gathers a layer's parameters just before the
layer runs (mci's all_gather_into_tensor), backward reduce-scatters its
gradients (reduce_scatter_tensor, AVG), and the optimizer updates only the
local shards. Every rank trains on its own batches of one regression task;
rank 0 prints the loss averaged over the ranks each few steps and at the end.
"""

import argparse

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

import mci_torch  # registers the backend "mci"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    dist.init_process_group("mci")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))

    torch.manual_seed(0)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.Linear(128, 128),
                                torch.nn.GELU(), torch.nn.Linear(128, 1))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    # The task: y = sin(x . w) for a w every rank knows (|w| about 1); each
    # rank draws its own x.
    target = torch.randn(32) / 32**0.5
    gen = torch.Generator().manual_seed(1000 + rank)
    for step in range(1, args.steps + 1):
        x = torch.randn(64, 32, generator=gen)
        y = torch.sin(x @ target).unsqueeze(1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)
        if rank == 0 and (step % 10 == 0 or step == 1):
            print(f"step {step}: loss {mean.item():.4f}", flush=True)
    if rank == 0:
        shard = sum(p.to_local().numel() for p in model.parameters())
        whole = sum(p.numel() for p in model.parameters())
        print(f"rank 0 holds {shard} of {whole} parameters ({world} ranks, backend {dist.get_backend()})")
        print(f"final loss {mean.item():.6f}", flush=True)
    # Rank 0 hosts the job's store: the others leave after it is done.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
