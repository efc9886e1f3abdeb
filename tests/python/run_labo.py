"""The seed's labo.py (tests/fixtures/pytorch/labo.py, verbatim) under
mcirun, as a user starts it: `mcirun --nproc_per_node=2 --master_port=PORT
labo.py`, with a free port from the OS. Usage:

    run_labo.py MCIRUN gloo|mci SCENARIO

gloo runs the seed's file; mci the same file with only its backend name
changed to "mci" (and `import mci_torch`). Scenarios: default (every line of
the seed, exit 0) and skip (MCI_SKIP_RANK=1 MCI_TIMEOUT_S=8: the timeout,
mcirun's SIGTERM to rank 1, exit 1; on mci, the hang report names rank 1).
The default scenario on gloo is left out: torch 1.13's gloo sometimes hangs
while freeing DDP at exit (pytorch/pytorch#56297), which no test can tell
from a real hang; ../shared's check_labo.sh runs it with --allow-exit-hang."""

import os
import pathlib
import socket
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
LABO = HERE.parent / "fixtures" / "pytorch" / "labo.py"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def program(backend, folder):
    text = LABO.read_text()
    if backend == "mci":
        text = text.replace('return torch.device("cpu"), "gloo"', 'return torch.device("cpu"), "mci"')
        text = text.replace("import torch.distributed as dist\n", "import torch.distributed as dist\nimport mci_torch\n")
        assert "mci_torch" in text and '"mci"' in text, "labo.py fixture changed: update run_labo.py"
    path = pathlib.Path(folder) / "labo.py"
    path.write_text(text)
    return path


def main():
    mcirun, backend, scenario = sys.argv[1:4]
    env = dict(os.environ, MCI_PYTHON=sys.executable)
    for v in ("MCI_BACKEND", "MCI_SKIP_RANK", "MCI_TIMEOUT_S", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(v, None)
    if scenario == "skip":
        env.update(MCI_SKIP_RANK="1", MCI_TIMEOUT_S="8")
    with tempfile.TemporaryDirectory() as folder:
        cmd = [mcirun, "--nproc_per_node=2", f"--master_port={free_port()}", str(program(backend, folder))]
        p = subprocess.run(cmd, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120, start_new_session=True)
    out = p.stdout
    print(out)
    name = "mci" if backend == "mci" else "gloo"
    if scenario == "default":
        want = [f"RANK={r} LOCAL_RANK={r} WORLD_SIZE=2 backend={name}" for r in (0, 1)]
        want += [f"moyenne {r} [3.0, 5.0]" for r in (0, 1)] + [f"gradient {r} [[0.5, 1.5]]" for r in (0, 1)]
        want += ["all_reduce_ms "]
        rc = 0
    else:
        want = ["saute 1", "entre 0", "Timed out waiting 8000ms", "mcirun: sent SIGTERM to rank 1"]
        if backend == "mci":
            want += ["mci hang report", "rank 1"]
        rc = 1
    missing = [w for w in want if w not in out]
    if missing or p.returncode != rc:
        print(f"FAILED: exit code {p.returncode} (want {rc}); missing: {missing}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
