"""What one restart costs, mcirun --max-restarts against torchrun's, on the
same torch program (tests/python/torch_restart.py: DDP on backend "mci", 2
ranks, a checkpoint every step; rank 1 killed by SIGKILL after step 5 on
the first attempt). Each round runs, interleaved, the uninterrupted and the
killed training under each launcher; a restart's cost is the killed run's
wall time minus the uninterrupted one's (the kill, the teardown, the new
processes' start, torch's import, the group's rendezvous, the checkpoint's
load). Reports the median and the spread over the rounds.

    python bench/restart_compare.py MCIRUN [ROUNDS]     (the python that
    runs it is the ranks'; torchrun is the one beside it)
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "..", "tests", "python", "torch_restart.py")


def wall(cmd, kill_after, python_dir):
    with tempfile.TemporaryDirectory(prefix="mci-restart-bench-") as ckpt:
        # torchrun sets no PYTHONPATH: mci_torch from beside mcirun.
        path = os.pathsep.join(p for p in (python_dir, os.environ.get("PYTHONPATH")) if p)
        env = dict(os.environ, MCI_PYTHON=sys.executable, OMP_NUM_THREADS="1", PYTHONPATH=path)
        t = time.monotonic()
        p = subprocess.run(cmd + [WORKER, "train", ckpt, str(kill_after)], env=env, capture_output=True, text=True,
                           timeout=300)
        dt = time.monotonic() - t
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed:\n{p.stdout}{p.stderr}")
    return dt


def main():
    mcirun = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    python_dir = os.path.join(os.path.dirname(os.path.realpath(mcirun)), "..", "python")
    launchers = {
        "mcirun": [mcirun, "--standalone", "--nproc_per_node=2", "--max-restarts=1"],
        "torchrun": [torchrun, "--standalone", "--nproc_per_node=2", "--max-restarts=1", "--monitor-interval=0.1"],
    }
    cost = {name: [] for name in launchers}
    base = {name: [] for name in launchers}
    for _ in range(rounds):
        for name, cmd in launchers.items():
            whole = wall(cmd, 0, python_dir)
            killed = wall(cmd, 5, python_dir)
            base[name].append(whole)
            cost[name].append(killed - whole)
    print(f"{rounds} rounds, interleaved; seconds (median, min-max)")
    print("| launcher | uninterrupted run | one restart costs |")
    print("|---|---|---|")
    for name in launchers:
        b, c = base[name], cost[name]
        print(f"| {name} | {statistics.median(b):.2f} ({min(b):.2f}-{max(b):.2f}) "
              f"| {statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f}) |")
    print(f"torchrun / mcirun, restart cost: {statistics.median(cost['torchrun']) / statistics.median(cost['mcirun']):.1f}x")


if __name__ == "__main__":
    main()
