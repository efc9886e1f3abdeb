#!/usr/bin/env python3
"""In place against restart: 4 ranks of elastic_train, rank 2 killed by
SIGKILL at step 10 (mid-backward), under mcirun --on-rank-loss=continue
(the survivors shrink their group) and under mcirun --max-restarts=1 (every
process starts again; elastic_train keeps no checkpoint, so the restart
resumes at step 1). Rounds interleaved; prints the median and the range.

  python3 bench/elastic_compare.py [--build build] [--rounds 5] [--step-ms 50]
  python3 bench/elastic_compare.py --torch VENV/bin/python   the torch script, and torchrun

Resume time: from the dying rank's own timestamp (just before it raises
SIGKILL) to the first step line completed after it (rank 0's "at T", same
clock); progress back: to the completion of the step it was killed in."""

import argparse
import os
import re
import statistics
import subprocess


TORCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "pytorch",
                            "elastic_train.py")


def run(build, mode, step_ms, steps, torch_python=None):
    mcirun = os.path.join(build, "bin", "mcirun")
    prog = [torch_python, TORCH_SCRIPT] if torch_python else [os.path.join(build, "bin", "elastic_train")]
    args = ["--steps", str(steps), "--step-ms", str(step_ms), "--timestamps", "--die", "2@10:backward"]
    if mode in ("in place", "replace"):
        policy = "continue" if mode == "in place" else "replace"
        cmd = [mcirun, "--standalone", "--nproc_per_node=4", f"--on-rank-loss={policy}", *prog, *args]
    elif mode == "restart":
        cmd = [mcirun, "--standalone", "--nproc_per_node=4", "--max-restarts=1", *prog, *args]
    else:  # torchrun, torch's own restart
        cmd = [torch_python, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4",
               "--max-restarts=1", "--monitor-interval=0.1", TORCH_SCRIPT, *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if torch_python:
        env["PYTHONPATH"] = os.path.join(build, "python")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"{mode}: mcirun exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    died = int(re.search(r"dying: rank 2 at step 10 at (\d+)", p.stdout).group(1))
    after = [(int(s), int(t)) for s, t in re.findall(r"^step (\d+) world \d+ loss \S+ at (\d+)$", p.stdout, re.M)
             if int(t) > died]
    first_step, first_at = after[0]
    before = [int(s) for s, t in re.findall(r"^step (\d+) world \d+ loss \S+ at (\d+)$", p.stdout, re.M)
              if int(t) <= died]
    lost = max(before) - (first_step - 1)  # completed steps done again
    # Progress back: the first step past the last one completed before the kill.
    back_at = next(t for st, t in after if st == max(before) + 1)
    worlds = re.findall(r"^final rank \d+ world (\d+)", p.stdout, re.M)
    # World 4 again: a replacement grew the group, or the restart's first step.
    grew = re.search(r"^grew world 4 joined \d+ in \S+ ms at step \d+ at (\d+)$", p.stdout, re.M)
    again = int(grew.group(1)) - died if grew else (first_at - died if mode != "in place" else None)
    return first_at - died, lost, max(int(w) for w in worlds), back_at - died, again


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--step-ms", type=int, default=50)
    ap.add_argument("--steps", type=int, default=14)
    ap.add_argument("--torch", metavar="PYTHON",
                    help="run examples/pytorch/elastic_train.py with this interpreter, and torchrun's restart too")
    a = ap.parse_args()
    results = {"in place": [], "replace": [], "restart": []}
    if a.torch:
        del results["replace"]  # the torch example does not take replacements
        results["torchrun"] = []
    for _ in range(a.rounds):
        for mode in results:
            results[mode].append(run(a.build, mode, a.step_ms, a.steps, a.torch))
    def span(xs):
        xs = [x for x in xs if x is not None]
        return f"{statistics.median(xs):.0f} ({min(xs)}-{max(xs)})" if xs else "-"

    print("| path | kill to next completed step, ms | kill to step 10 completed (progress back), ms "
          "| kill to world 4 again, ms | completed steps redone | world at the end |")
    print("|---|---|---|---|---|---|")
    for mode, rs in results.items():
        print(f"| {mode} | {span([r[0] for r in rs])} | {span([r[3] for r in rs])} | {span([r[4] for r in rs])} | "
              f"{sorted(set(r[1] for r in rs))} | {sorted(set(r[2] for r in rs))} |")


if __name__ == "__main__":
    main()
