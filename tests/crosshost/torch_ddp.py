#!/usr/bin/env python3
"""DDP on two hosts: torch's DistributedDataParallel with backend "mci" on two
network-namespace hosts of two ranks each (real veth links, MTU 1500),
20 steps from a fixed seed, beside the same training on "gloo".

Checked, first step included: every rank of a job holds the same weights
bit for bit after every step; "mci" and "gloo" agree within a bound (their
all-reduces add the four gradients in different orders, so the last bits
may differ; the bound is 1e-5 of the weights' scale after 20 steps, far
below what one rank's gradient counted twice or missing changes); and both
agree with the same training computed in one process. The model's
gradients (8 MiB) make DDP's buckets large enough for the pipelined
all-reduce between hosts, and its first all-reduce is the job's first
large one (issue 49's case).

Then the same bits whatever the layout (docs/env.md, "Same bits"): with
MCI_REPRODUCIBLE=1, 100 steps on the two hosts and 100 steps with the four
ranks on one host end with bitwise equal weights after every step.

    torch_ddp.py --mcirun BUILD/bin/mcirun --python VENV/bin/python   (root: makes the hosts)
    torch_ddp.py train BACKEND OUT_DIR                                (one rank, under mcirun)
Exits 0 when passed, 1 when not, 77 when it cannot run here.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

STEPS = 20
# Bits that differ at any step stay different to the end (the final
# parameters are compared), and each step's gradients (8 MiB, the host
# chain's size) already cross every threshold: 25 steps prove it as well as
# 100, in a quarter of the time.
SAME_BITS_STEPS = 25
WIDTH = 1024


def build_model(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, WIDTH),
                               torch.nn.Tanh(), torch.nn.Linear(WIDTH, 8))


def batch(torch, step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, WIDTH, generator=g), torch.randn(16, 8, generator=g)


def flat(torch, model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).clone()


def train(backend, out_dir, tag, steps):
    import torch
    import torch.distributed as dist

    import mci_torch  # noqa: F401  (registers "mci")

    torch.set_num_threads(1)
    dist.init_process_group(backend)
    rank = dist.get_rank()
    model = build_model(torch)
    # Each rank starts from other weights: DDP's broadcast from rank 0 must
    # make them equal (a large broadcast across the hosts).
    with torch.no_grad():
        for p in model.parameters():
            p.add_(rank * 0.01)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    states = [flat(torch, model)]
    for step in range(steps):
        x, y = batch(torch, step, rank)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        states.append(flat(torch, model))
    torch.save(torch.stack(states), os.path.join(out_dir, f"{tag}.rank{rank}.pt"))
    dist.destroy_process_group()


def reference(torch, world):
    """The same training in one process: the mean of the ranks' gradients."""
    model = build_model(torch)  # rank 0's weights, which DDP broadcasts
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    states = [flat(torch, model)]
    for step in range(STEPS):
        grads = None
        for rank in range(world):
            model.zero_grad()
            x, y = batch(torch, step, rank)
            torch.nn.functional.mse_loss(model(x), y).backward()
            g = [p.grad.double().clone() for p in model.parameters()]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
        for p, g in zip(model.parameters(), grads):
            p.grad = (g / world).to(p.dtype)
        opt.step()
        states.append(flat(torch, model))
    return torch.stack(states)


def run_job(args, hosts, backend, out_dir, tag=None, steps=STEPS, one_host=False, extra_env=None):
    """Four ranks: 2 hosts x 2, or (one_host) 1 x 4 on host 0."""
    tag = tag or backend
    port = hosts.free_port(0)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCI_", "MASTER_", "RANK", "WORLD_SIZE"))}
    env.update({"MCI_JOB_TOKEN": f"ddp-{tag}-{os.getpid()}", "OMP_NUM_THREADS": "1", "MCI_PYTHON": args.python})
    env.update(extra_env or {})
    program = [os.path.abspath(__file__), "train", backend, out_dir, tag, str(steps)]
    logs, procs = [], []
    for i in range(1 if one_host else 2):
        log = open(os.path.join(out_dir, f"{tag}.node{i}.log"), "w+")
        logs.append(log)
        if one_host:
            argv = [args.mcirun, "--standalone", "--nproc_per_node=4", *program]
        else:
            argv = [args.mcirun, "--nnodes=2", f"--node_rank={i}", "--nproc_per_node=2",
                    f"--master_addr={hosts.address(0)}", f"--master_port={port}", *program]
        procs.append(hosts.popen(i, argv, env=env, stdout=log, stderr=subprocess.STDOUT))
    problems = []
    for i, p in enumerate(procs):
        try:
            rc = p.wait(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "hung"
        if rc != 0:
            logs[i].seek(0)
            problems.append(f"{tag}: node {i}'s mcirun exited {rc}:\n{logs[i].read()[-3000:]}")
    for log in logs:
        log.close()
    for line in hosts.leftovers():
        problems.append(f"{tag}: leak after the job: {line}")
    return problems


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "train":
        train(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcirun", required=True)
    ap.add_argument("--python", required=True, help="a Python with torch 2 (scripts/torch-venv.sh --python)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    from netns_hosts import NetnsHosts

    why = NetnsHosts.unavailable()
    if not why and not os.access(args.python, os.X_OK):
        why = f"no torch Python at {args.python}"
    if why:
        print(f"torch_ddp.py: skipped: {why}")
        return 77
    out_dir = tempfile.mkdtemp(prefix="mci-ddp-", dir="/var/tmp")  # seen by both hosts
    os.chmod(out_dir, 0o777)
    try:
        problems = []
        with NetnsHosts(2, mtu=1500) as hosts:
            for backend in ("mci", "gloo"):
                problems += run_job(args, hosts, backend, out_dir)
            same = {"MCI_REPRODUCIBLE": "1"}
            problems += run_job(args, hosts, "mci", out_dir, "same2x2", SAME_BITS_STEPS, False, same)
            problems += run_job(args, hosts, "mci", out_dir, "same1x4", SAME_BITS_STEPS, True, same)
        if problems:
            print("\n".join(problems))
            return 1
        check = subprocess.run([args.python, "-c", COMPARE, out_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
        print(check.stdout, end="")
        return check.returncode
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


# Run by the torch Python: compares what the jobs saved.
COMPARE = r"""
import os, sys
sys.path.insert(0, %r)
import torch
import torch_ddp
out = sys.argv[1]
bad = []
runs = {}
for backend in ("mci", "gloo"):
    ranks = [torch.load(os.path.join(out, f"{backend}.rank{r}.pt")) for r in range(4)]
    for r in range(1, 4):
        for step in range(ranks[0].shape[0]):
            if not torch.equal(ranks[0][step], ranks[r][step]):
                bad.append(f"{backend}: rank {r}'s weights differ from rank 0's after step {step}")
                break
    runs[backend] = ranks[0].double()
ref = torch_ddp.reference(torch, 4).double()
scale = ref.abs().max().item()
for name, other in (("mci against gloo", runs["gloo"]), ("mci against one process", ref),
                    ("gloo against one process", ref)):
    mine = runs["mci"] if name.startswith("mci") else runs["gloo"]
    for step in range(mine.shape[0]):
        d = (mine[step] - other[step]).abs().max().item()
        if d > 1e-5 * scale:
            bad.append(f"{name}: after step {step} the weights differ by {d:.3g} (bound {1e-5 * scale:.3g})")
            break
    print(f"{name}: largest difference {(mine - other).abs().max().item():.3g} over {mine.shape[0] - 1} steps "
          f"(weights' scale {scale:.3g})")
# MCI_REPRODUCIBLE=1: two hosts and one host, bitwise, every step.
layouts = {}
for tag in ("same2x2", "same1x4"):
    ranks = [torch.load(os.path.join(out, f"{tag}.rank{r}.pt")) for r in range(4)]
    for r in range(1, 4):
        if not torch.equal(ranks[0], ranks[r]):
            bad.append(f"{tag}: rank {r}'s weights differ from rank 0's")
    layouts[tag] = ranks[0]
a, b = layouts["same2x2"], layouts["same1x4"]
steps_differing = sum(1 for s in range(a.shape[0]) if not torch.equal(a[s], b[s]))
print(f"MCI_REPRODUCIBLE=1, 2 hosts x 2 against 1 host x 4: {steps_differing} of {a.shape[0]} states differ "
      f"(largest difference {(a.double() - b.double()).abs().max().item():.3g})")
if steps_differing:
    bad.append("MCI_REPRODUCIBLE=1: the weights on 2 hosts x 2 and 1 host x 4 are not the same bits")
print("\n".join(bad) if bad else "every rank bitwise equal at every step; mci, gloo and one process agree; "
      "the same bits on both layouts")
sys.exit(1 if bad else 0)
""" % os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__":
    sys.exit(main())
