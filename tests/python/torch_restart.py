"""mcirun --max-restarts with a torch program on backend "mci": a DDP
training that checkpoints every step, whose rank 1 is killed (SIGKILL) on
its first attempt, finishes on its second with the same parameters, to the
last bit, as the same training never interrupted. The same under this
torch's own torchrun (torch.distributed.run), whose store outlives the
attempts: backend "mci" must not read the dead attempt's keys there.

    python torch_restart.py MCIRUN            the test (exit 0: passed)
    python torch_restart.py train DIR K       one rank's training (under mcirun)
"""
import os
import re
import signal
import subprocess
import sys
import tempfile

STEPS = 12


def train(ckpt_dir, kill_after):
    import torch
    import torch.distributed as dist

    import mci_torch  # noqa: F401  (registers "mci")

    dist.init_process_group(os.environ.get("MCI_RESTART_BACKEND", "mci"))
    rank = dist.get_rank()
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    path = os.path.join(ckpt_dir, "state.pt")
    start = 0
    if os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"]
    print(f"rank {rank} attempt {attempt} starts at step {start}", flush=True)
    for step in range(start, STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        if rank == 0:
            # Whole or not at all: a rank killed while writing leaves the
            # previous checkpoint.
            tmp = path + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step + 1}, tmp)
            os.replace(tmp, path)
        dist.barrier()  # the checkpoint of this step is on disk for everyone
        if attempt == 0 and rank == 1 and step + 1 == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
    total = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"final rank {rank} attempt {attempt} sum {total:.12e}", flush=True)
    dist.destroy_process_group()


def run(launcher, kill_after, env=None):
    with tempfile.TemporaryDirectory(prefix="mci-restart-") as ckpt:
        env = dict(os.environ, MCI_PYTHON=sys.executable, OMP_NUM_THREADS="1", **(env or {}))
        p = subprocess.run(
            launcher + ["--standalone", "--nproc_per_node=2", "--max_restarts=1", os.path.abspath(__file__), "train",
                        ckpt, str(kill_after)],
            env=env, capture_output=True, text=True, timeout=150)
    return p


def under_torchrun(mcirun, kill_after):
    """torchrun sets no PYTHONPATH: mci_torch from beside mcirun, as mcirun
    finds it (bin/../python)."""
    python_dir = os.path.join(os.path.dirname(os.path.realpath(mcirun)), "..", "python")
    path = os.pathsep.join(p for p in (python_dir, os.environ.get("PYTHONPATH")) if p)
    return run([sys.executable, "-m", "torch.distributed.run", "--monitor_interval=0.1"], kill_after,
               {"PYTHONPATH": path})


def sums(out):
    return {int(r): (int(a), s) for r, a, s in re.findall(r"final rank (\d) attempt (\d) sum (-?\d\.\d+e[-+]\d+)", out)}


def main():
    if sys.argv[1] == "train":
        return train(sys.argv[2], int(sys.argv[3]))
    mcirun = sys.argv[1]
    whole = run([mcirun], 0)
    shown = f"--- uninterrupted:\n{whole.stdout}{whole.stderr}"
    assert whole.returncode == 0, shown
    killed = run([mcirun], 5)
    shown += f"--- killed at step 5:\n{killed.stdout}{killed.stderr}"
    assert killed.returncode == 0, shown
    assert "attempt 0 failed (rank 1 (pid " in killed.stderr and "signal SIGKILL" in killed.stderr, shown
    assert "rank 0 attempt 1 starts at step 5" in killed.stdout, "the second attempt resumes the checkpoint: " + shown
    expected, got = sums(whole.stdout), sums(killed.stdout)
    assert set(expected) == {0, 1} and set(got) == {0, 1}, shown
    assert all(a == 0 for a, _ in expected.values()) and all(a == 1 for a, _ in got.values()), shown
    assert expected[0][1] == expected[1][1], "DDP keeps the ranks' parameters equal: " + shown
    assert got[0][1] == expected[0][1], f"same parameters as uninterrupted: {got} vs {expected}\n{shown}"
    import torch

    if int(torch.__version__.split(".")[0]) < 2:
        # torch 1.13's own agent fails as it restarts (AttributeError in
        # multiprocessing/api.py's to_map: its redirects are None then),
        # whatever the backend.
        print(f"restarted training ends with the uninterrupted parameters (sum {got[0][1]}); torchrun "
              f"{torch.__version__} is not tried, its agent cannot restart")
        return
    torchrun = under_torchrun(mcirun, 5)
    shown += f"--- torchrun, killed at step 5:\n{torchrun.stdout}{torchrun.stderr}"
    assert torchrun.returncode == 0, shown
    assert sums(torchrun.stdout) == got, f"torchrun's restart ends the same: {sums(torchrun.stdout)} vs {got}\n{shown}"
    print(f"restarted training ends with the uninterrupted parameters (sum {got[0][1]}), under mcirun and torchrun")


if __name__ == "__main__":
    main()
