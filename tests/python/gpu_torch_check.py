"""torch on a GPU machine with mci (scripts/gpu-check.sh runs it under
mcirun, one process per GPU): the group "cpu:mci,cuda:nccl" sends CPU
tensors to mci and CUDA tensors to torch's NCCL, and DDP trains a model on
CUDA tensors through it with the same parameters as the same steps taken
alone with the gradients averaged by hand. Prints one "ok:" or "FAILED:"
line per check and exits non-zero when any failed."""

import os
import sys

import torch
import torch.distributed as dist

import mci_torch


failed = []


def check(cond, what):
    print(f"{'ok' if cond else 'FAILED'}: {what}", flush=True)
    if not cond:
        failed.append(what)


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("cpu:mci,cuda:nccl")
    pg = dist.group.WORLD
    names = {d: pg._get_backend(torch.device(d)).name() for d in ("cpu", "cuda")}
    check(names == {"cpu": "mci", "cuda": "nccl"},
          f"cpu tensors go to mci, cuda tensors to nccl ({names}; mci_torch.PATH={mci_torch.PATH}, "
          f"torch {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))})")

    # The same all_reduce on both halves of the group.
    c = torch.arange(1000, dtype=torch.float32) + rank
    g = c.to(dev)
    dist.all_reduce(c)
    dist.all_reduce(g)
    want = (torch.arange(1000, dtype=torch.float32) * world + sum(range(world)))
    check(torch.equal(c, want) and torch.equal(g.cpu(), want), "all_reduce sums on the cpu and the cuda half")

    # Async CPU work on mci overlapped with CUDA work on nccl.
    works = [dist.all_reduce(torch.ones(4096) * (rank + 1), async_op=True) for _ in range(8)]
    gw = dist.all_reduce(torch.ones(1 << 20, device=dev), async_op=True)
    for w in works:
        w.wait()
    gw.wait()
    torch.cuda.synchronize()
    check(all(w.is_completed() for w in works), "async cpu all_reduces on mci beside an async cuda one on nccl")

    # DDP on CUDA tensors: 5 steps of SGD on a small MLP, each rank its own
    # batch; then every rank redoes the steps alone on every rank's batch
    # (the average gradient) and must hold the same parameters.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    ref = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).to(dev)
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    batches = [[torch.randn(32, 64, generator=torch.Generator().manual_seed(100 * s + r)).to(dev)
                for r in range(world)] for s in range(5)]
    for s in range(5):
        opt.zero_grad()
        ddp(batches[s][rank]).square().mean().backward()
        opt.step()
        ref_opt.zero_grad()
        (sum(ref(b).square().mean() for b in batches[s]) / world).backward()
        ref_opt.step()
    torch.cuda.synchronize()
    worst = max((p - q).abs().max().item() for p, q in zip(model.parameters(), ref.parameters()))
    check(worst < 1e-5, f"DDP on CUDA tensors matches the averaged steps taken alone (max difference {worst:.2e})")

    # CPU-side DDP machinery on mci at the same time: a CPU model in the same
    # group (its buckets go to mci).
    cpu_model = torch.nn.Linear(32, 32)
    cpu_ddp = torch.nn.parallel.DistributedDataParallel(cpu_model)
    cpu_ddp(torch.randn(8, 32)).sum().backward()
    check(all(p.grad is not None for p in cpu_model.parameters()), "DDP on CPU tensors in the same group (mci)")
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
