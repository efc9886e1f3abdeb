"""torch.distributed through mci ("mci", mci_torch) against gloo, in the same
job, interleaved round by round so both see the same machine:

  1. all_reduce in place at 8 B, 64 KiB, 1 MiB, 16 MiB: latency and bus
     bandwidth (2(n-1)/n x bytes / time), best and median over rounds;
  2. DDP's communication cost per training step for an MLP of about 8M
     parameters (1024-2048-2048-1024-10, batch 8): the step time minus the
     same step under no_sync() (no gradient all-reduce), and the share of
     that communication hidden behind backward (1 - cost / the time of
     all-reducing every gradient alone);
  3. on torch 2.x, an FSDP2 (fully_shard) training step of the same MLP
     on each backend, interleaved (--no-fsdp2 leaves it out);
  4. mci's memory over many calls: the resident set size after 1,000 and
     after --rss-calls (100,000) 8-byte all_reduces on "mci" (flat: no
     growth per call).

Run it with mcirun, two ranks, OMP_NUM_THREADS=1:

  OMP_NUM_THREADS=1 MCI_PYTHON=/usr/bin/python3 build/bin/mcirun --standalone \\
      --nproc_per_node=2 bench/torch_compare.py [--rounds 5] [--json out.json]
"""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist

import mci_torch  # registers the backend


def timed(f, n):
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t0) / n


def all_reduce_rows(groups, rounds):
    world = dist.get_world_size()
    rows = []
    for size in (8, 64 << 10, 1 << 20, 16 << 20):
        t = torch.ones(max(1, size // 4))
        iters = 2000 if size <= 8 else 500 if size <= 64 << 10 else 100 if size <= 1 << 20 else 10
        samples = {name: [] for name in groups}
        for name, g in groups.items():
            timed(lambda: dist.all_reduce(t, group=g), max(5, iters // 10))  # warm up
        for _ in range(rounds):
            for name, g in groups.items():
                samples[name].append(timed(lambda: dist.all_reduce(t, group=g), iters))
        for name, s in samples.items():
            best, med = min(s), statistics.median(s)
            rows.append({"bytes": size, "backend": name, "best_us": best * 1e6, "median_us": med * 1e6,
                         "worst_us": max(s) * 1e6,
                         "busbw_best_GBps": size * 2 * (world - 1) / world / best / 1e9})
    return rows


def mlp():
    torch.manual_seed(0)
    dims = [1024, 2048, 2048, 1024, 10]
    layers = []
    for a, b in zip(dims, dims[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def ddp_rows(groups, rounds, steps):
    rows = []
    models = {name: torch.nn.parallel.DistributedDataParallel(mlp(), process_group=g) for name, g in groups.items()}
    x = torch.randn(8, 1024)
    y = torch.randint(0, 10, (8,))
    loss_fn = torch.nn.CrossEntropyLoss()
    nparams = sum(p.numel() for p in next(iter(models.values())).parameters())

    def step(model, sync):
        model.zero_grad(set_to_none=False)
        if sync:
            loss_fn(model(x), y).backward()
        else:
            with model.no_sync():
                loss_fn(model(x), y).backward()

    flat = torch.ones(nparams)
    samples = {name: {"step": [], "nosync": [], "alone": []} for name in groups}
    for name, m in models.items():
        timed(lambda: step(m, True), 3)
    for _ in range(rounds):
        for name, m in models.items():
            samples[name]["step"].append(timed(lambda: step(m, True), steps))
            samples[name]["nosync"].append(timed(lambda: step(m, False), steps))
            samples[name]["alone"].append(timed(lambda: dist.all_reduce(flat, group=groups[name]), 3))
    for name, s in samples.items():
        costs = [a - b for a, b in zip(s["step"], s["nosync"])]
        cost, alone = statistics.median(costs), statistics.median(s["alone"])
        rows.append({"backend": name, "params": nparams, "step_ms": statistics.median(s["step"]) * 1e3,
                     "nosync_ms": statistics.median(s["nosync"]) * 1e3, "comm_cost_ms": cost * 1e3,
                     "comm_cost_min_ms": min(costs) * 1e3, "comm_cost_max_ms": max(costs) * 1e3,
                     "all_reduce_alone_ms": alone * 1e3, "hidden_share": max(0.0, 1 - cost / alone)})
    return rows


def fsdp2_rows(groups, rounds, steps):
    """One FSDP2 training step (forward, backward with the reduce-scatters,
    SGD step) of the MLP, per backend, interleaved; medians over rounds."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    x = torch.randn(8, 1024)
    y = torch.randint(0, 10, (8,))
    loss_fn = torch.nn.CrossEntropyLoss()
    runs = {}
    for name, g in groups.items():
        model = mlp()
        mesh = DeviceMesh.from_group(g, "cpu")
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        runs[name] = (model, torch.optim.SGD(model.parameters(), lr=1e-3))

    def step(model, opt):
        loss_fn(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    samples = {name: [] for name in groups}
    for name, (m, o) in runs.items():
        timed(lambda: step(m, o), 2)
    for _ in range(rounds):
        for name, (m, o) in runs.items():
            samples[name].append(timed(lambda: step(m, o), steps))
    return [{"backend": name, "step_ms": statistics.median(s) * 1e3, "min_ms": min(s) * 1e3, "max_ms": max(s) * 1e3}
            for name, s in samples.items()]


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_rows(group, calls):
    """RSS after a warm-up of 1,000 calls and after `calls` more."""
    t = torch.ones(2)
    for _ in range(1000):
        dist.all_reduce(t, group=group)
    before = rss_kib()
    for _ in range(calls):
        dist.all_reduce(t, group=group)
    return {"calls": calls, "rss_before_kib": before, "rss_after_kib": rss_kib()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--no-fsdp2", action="store_true")
    ap.add_argument("--rss-calls", type=int, default=100_000)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    groups = {"gloo": dist.new_group(backend="gloo"), "mci": dist.new_group(backend="mci")}
    ar = all_reduce_rows(groups, a.rounds)
    dd = ddp_rows(groups, a.rounds, a.steps)
    fs = [] if a.no_fsdp2 or int(torch.__version__.split(".")[0]) < 2 else fsdp2_rows(groups, a.rounds, a.steps)
    rss = rss_rows(groups["mci"], a.rss_calls) if a.rss_calls else None
    if dist.get_rank() == 0:
        print(f"all_reduce, {dist.get_world_size()} ranks, in place, {a.rounds} rounds (best / median / worst)")
        print(f"{'bytes':>10} {'backend':>7} {'best us':>10} {'median us':>10} {'worst us':>10} {'busbw GB/s':>11}")
        for r in ar:
            print(f"{r['bytes']:>10} {r['backend']:>7} {r['best_us']:>10.1f} {r['median_us']:>10.1f} "
                  f"{r['worst_us']:>10.1f} {r['busbw_best_GBps']:>11.2f}")
        print(f"\nDDP, MLP of {dd[0]['params']} parameters, batch 8 (medians over rounds)")
        print(f"{'backend':>7} {'step ms':>8} {'no_sync ms':>10} {'comm cost ms (min-max)':>24} "
              f"{'all_reduce alone ms':>20} {'hidden':>7}")
        for r in dd:
            print(f"{r['backend']:>7} {r['step_ms']:>8.1f} {r['nosync_ms']:>10.1f} "
                  f"{r['comm_cost_ms']:>8.1f} ({r['comm_cost_min_ms']:.1f}-{r['comm_cost_max_ms']:.1f}) "
                  f"{r['all_reduce_alone_ms']:>20.1f} {r['hidden_share']:>7.0%}")
        if fs:
            print(f"\nFSDP2 step, same MLP, batch 8 (medians over rounds)")
            for r in fs:
                print(f"{r['backend']:>7} {r['step_ms']:>8.1f} ms ({r['min_ms']:.1f}-{r['max_ms']:.1f})")
        if rss:
            print(f"\nmci RSS: {rss['rss_before_kib']} KiB after 1000 calls, {rss['rss_after_kib']} KiB after "
                  f"{rss['calls']} more")
        print(f"\ntorch {torch.__version__}, mci_torch path {mci_torch.PATH}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"torch": torch.__version__, "path": mci_torch.PATH, "all_reduce": ar, "ddp": dd,
                           "fsdp2": fs, "rss": rss}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
