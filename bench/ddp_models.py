"""DDP training steps on "mci" against gloo, in one job, interleaved round by
round, on three models built in code (no downloads):

  mlp          1024-2048-2048-1024-10 (8.4M parameters), batch 8: the model
               of docs/pytorch.md's earlier figures, almost all communication
  transformer  6 encoder layers, d=256, 4 heads, feed-forward 1024, a
               vocabulary of 1000 and 64 tokens, batch 8 (5.3M parameters)
  cnn          4 conv layers (32-64-128-256 channels) and a linear head on
               32x32 images, batch 16 (1.2M parameters)

For each model and each DDP configuration (default; gradient_as_bucket_view;
fp16_compress_hook; powerSGD_hook, rank 4, when --configs asks), per backend: the step (forward, backward, SGD), the
same step under no_sync() (no gradient all-reduce) and their difference,
the communication cost; medians over rounds with min-max. Where the cost
goes is printed too: torch.profiler's self time, per step, of DDP's own
bucket copies (copying gradients into the bucket, scaled by 1/world, and
back into .grad), which every backend pays alike.

  OMP_NUM_THREADS=1 MCI_PYTHON=/var/cache/mci/venv-torch-2.15.0/bin/python \\
      build/bin/mcirun --standalone --nproc_per_node=2 bench/ddp_models.py [--rounds 5] [--steps 5] [--json F]
"""

import argparse
import json
import os
import statistics

import torch
import torch.distributed as dist

import mci_torch  # registers the backend
import torch_compare  # beside this script: its MLP and timer
from torch_compare import timed


def mlp():
    return torch_compare.mlp(), lambda: (torch.randn(8, 1024), torch.randint(0, 10, (8,)))


class Transformer(torch.nn.Module):
    def __init__(self, vocab=1000, d=256, layers=6):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        layer = torch.nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=1024, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens))).flatten(0, 1)


def transformer():
    return Transformer(), lambda: (torch.randint(0, 1000, (8, 64)), torch.randint(0, 1000, (8 * 64,)))


def cnn():
    chans = [3, 32, 64, 128, 256]
    layers = []
    for a, b in zip(chans, chans[1:]):
        layers += [torch.nn.Conv2d(a, b, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2)]
    model = torch.nn.Sequential(*layers, torch.nn.Flatten(), torch.nn.Linear(256 * 2 * 2, 10))
    return model, lambda: (torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,)))


MODELS = {"mlp": mlp, "transformer": transformer, "cnn": cnn}


def configure(name, model, group):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    kwargs = {"gradient_as_bucket_view": True} if name == "gradient_as_bucket_view" else {}
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, **kwargs)
    if name == "fp16_compress_hook":
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif name == "powerSGD_hook":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

        # Rank-4 approximation from the third step (the timed rounds come
        # after the warm-up steps).
        state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=4, start_powerSGD_iter=2)
        ddp.register_comm_hook(state, powersgd.powerSGD_hook)
    return ddp


# The default set; powerSGD_hook is there to ask for (--configs), for slow links.
CONFIGS = ("default", "gradient_as_bucket_view", "fp16_compress_hook")
KNOWN_CONFIGS = CONFIGS + ("powerSGD_hook",)


def copies_ms(step, steps):
    """torch.profiler's self CPU time per step of DDP's bucket copies."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    names = ("torch::distributed::reducer::mul_out", "torch.distributed.ddp.reducer::copy_bucket_to_grad")
    total = sum(e.cpu_time_total for e in prof.key_averages() if e.key in names)
    return total / steps / 1e3


def model_rows(model_name, config, groups, rounds, steps):
    torch.manual_seed(0)
    runs = {}
    for backend, g in groups.items():
        torch.manual_seed(0)
        model, batch = MODELS[model_name]()
        runs[backend] = (configure(config, model, g), batch)
    nparams = sum(p.numel() for p in next(iter(runs.values()))[0].parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    torch.manual_seed(1 + dist.get_rank())
    x, y = next(iter(runs.values()))[1]()

    def step(ddp, opt, sync):
        opt.zero_grad(set_to_none=False)
        if sync:
            loss_fn(ddp(x), y).backward()
        else:
            with ddp.no_sync():
                loss_fn(ddp(x), y).backward()
        opt.step()

    opts = {b: torch.optim.SGD(ddp.parameters(), lr=1e-3) for b, (ddp, _) in runs.items()}
    samples = {b: {"step": [], "nosync": []} for b in groups}
    for b, (ddp, _) in runs.items():
        timed(lambda: step(ddp, opts[b], True), 2)
    for _ in range(rounds):
        for b, (ddp, _) in runs.items():
            samples[b]["step"].append(timed(lambda: step(ddp, opts[b], True), steps))
            samples[b]["nosync"].append(timed(lambda: step(ddp, opts[b], False), steps))
    rows = []
    for b, s in samples.items():
        ddp = runs[b][0]
        dist.barrier()
        copies = copies_ms(lambda: step(ddp, opts[b], True), 3)
        costs = [a - c for a, c in zip(s["step"], s["nosync"])]
        rows.append({"model": model_name, "config": config, "backend": b, "params": nparams,
                     "step_ms": statistics.median(s["step"]) * 1e3, "step_min_ms": min(s["step"]) * 1e3,
                     "step_max_ms": max(s["step"]) * 1e3, "nosync_ms": statistics.median(s["nosync"]) * 1e3,
                     "comm_cost_ms": statistics.median(costs) * 1e3, "comm_cost_min_ms": min(costs) * 1e3,
                     "comm_cost_max_ms": max(costs) * 1e3, "bucket_copies_ms": copies})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--json")
    a = ap.parse_args()
    for c in a.configs.split(","):
        if c not in KNOWN_CONFIGS:
            ap.error(f"--configs: {c!r} is not one of {', '.join(KNOWN_CONFIGS)}")
    for m in a.models.split(","):
        if m not in MODELS:
            ap.error(f"--models: {m!r} is not one of {', '.join(MODELS)}")
    dist.init_process_group("gloo")
    groups = {"gloo": dist.new_group(backend="gloo"), "mci": dist.new_group(backend="mci")}
    rows = []
    for m in a.models.split(","):
        for c in a.configs.split(","):
            rows += model_rows(m, c, groups, a.rounds, a.steps)
    if dist.get_rank() == 0:
        print(f"DDP step, {dist.get_world_size()} ranks, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')} "
              f"(torch threads {torch.get_num_threads()}), {a.rounds} rounds of {a.steps} steps; medians (min-max)")
        print(f"{'model':>11} {'config':>23} {'backend':>7} {'step ms':>20} {'no_sync ms':>10} "
              f"{'comm cost ms':>20} {'bucket copies ms':>16}")
        for r in rows:
            print(f"{r['model']:>11} {r['config']:>23} {r['backend']:>7} "
                  f"{r['step_ms']:>7.1f} ({r['step_min_ms']:.1f}-{r['step_max_ms']:.1f}) {r['nosync_ms']:>10.1f} "
                  f"{r['comm_cost_ms']:>7.1f} ({r['comm_cost_min_ms']:.1f}-{r['comm_cost_max_ms']:.1f}) "
                  f"{r['bucket_copies_ms']:>16.1f}")
        print(f"torch {torch.__version__}, mci_torch path {mci_torch.PATH}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"torch": torch.__version__, "path": mci_torch.PATH, "rows": rows}, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
