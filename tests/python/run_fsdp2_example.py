"""examples/pytorch/fsdp2_train.py under mcirun, as its header says to run
it (2 ranks, backend "mci", a port from the OS). Passes when the job exits
0, rank 0 says it holds a shard (not every parameter) on backend mci, and
the final loss is finite and below the first step's. Usage:

    run_fsdp2_example.py MCIRUN"""

import math
import os
import pathlib
import re
import socket
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch" / "fsdp2_train.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    mcirun = sys.argv[1]
    env = dict(os.environ, MCI_PYTHON=sys.executable)
    for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(v, None)
    cmd = [mcirun, "--nproc_per_node=2", f"--master_port={free_port()}", str(EXAMPLE), "--steps", "20"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150,
                       start_new_session=True)
    out = p.stdout
    print(out)
    first = re.search(r"^step 1: loss ([0-9.]+)$", out, re.M)
    final = re.search(r"^final loss ([0-9.eE+-]+|nan|inf)$", out, re.M)
    held = re.search(r"^rank 0 holds (\d+) of (\d+) parameters \(2 ranks, backend mci\)$", out, re.M)
    problems = []
    if p.returncode != 0:
        problems.append(f"exit code {p.returncode}")
    if not (first and final and held):
        problems.append("a line is missing (step 1's loss, the final loss, or what rank 0 holds on backend mci)")
    else:
        loss0, loss = float(first.group(1)), float(final.group(1))
        if not math.isfinite(loss) or loss >= loss0:
            problems.append(f"the loss did not fall: {loss0} at step 1, {loss} at the end")
        if not 0 < int(held.group(1)) < int(held.group(2)):
            problems.append(f"rank 0 holds {held.group(1)} of {held.group(2)} parameters: not sharded")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
