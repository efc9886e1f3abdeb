"""examples/pytorch/elastic_train.py under mcirun --on-rank-loss=continue:
3 ranks of torch DDP on backend "mci"; rank 1 is killed (SIGKILL) inside
DDP's all-reduce at step 3, rank 2 mid-backward at step 6. The survivors
shrink their group twice (mci_torch.shrink_group, torch's shrink_group on
mci), redo each interrupted step, and the last one ends with the parameters
of the C++ elastic_train never interrupted (same samples, same math).

    python torch_elastic.py MCIRUN ELASTIC_TRAIN    exit 0: passed
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch", "elastic_train.py")
STEPS = 8


def main():
    mcirun, cpp = sys.argv[1], sys.argv[2]
    ref = subprocess.run([mcirun, "--standalone", "--nproc_per_node=2", cpp, "--steps", str(STEPS)],
                         capture_output=True, text=True, timeout=120)
    want = float(re.search(r"final rank 0 world 2 sum (\S+)", ref.stdout).group(1))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([mcirun, "--standalone", "--nproc_per_node=3", "--on-rank-loss=continue", sys.executable,
                        EXAMPLE, "--steps", str(STEPS), "--step-ms", "10", "--die", "1@3:collective", "--die",
                        "2@6:backward"], capture_output=True, text=True, env=env, timeout=240)
    out = p.stdout + p.stderr
    fails = []
    if p.returncode != 0:
        fails.append(f"mcirun exited {p.returncode}")
    for rank, sig in (("1", "SIGKILL"), ("2", "SIGKILL")):
        if not re.search(rf"mcirun: rank {rank} \(pid \d+ on \S+\) was lost at \S+ s \(signal {sig}\)", out):
            fails.append(f"mcirun did not report rank {rank} lost by {sig}")
    steps = sorted(int(s) for s in re.findall(r"^step (\d+) world \d+ ", p.stdout, re.M))
    if steps != list(range(1, STEPS + 1)):
        fails.append(f"steps completed {steps}, want each of 1..{STEPS} once")
    recoveries = re.findall(r"^recovered world (\d+) lost (\S+) in \S+ ms: redo step (\d+)", p.stdout, re.M)
    if recoveries != [("2", "1", "3"), ("1", "1", "6")]:
        fails.append(f"recoveries {recoveries}, want world 2 lost 1 redo 3, then world 1 lost 1 redo 6")
    finals = re.findall(r"^final rank (\d+) world (\d+) sum (\S+)", p.stdout, re.M)
    if len(finals) != 1 or finals[0][1] != "1" or abs(float(finals[0][2]) - want) > 1e-9 * abs(want):
        fails.append(f"finals {finals}, want one of world 1 with the sum {want:.12e} of the run never interrupted")
    if fails:
        print("\n".join(fails) + "\n--- output:\n" + out)
        return 1
    print(f"passed: {recoveries}, final sum {finals[0][2]} (uninterrupted {want:.12e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
