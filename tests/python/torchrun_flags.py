"""mcirun takes every flag torchrun takes. Run with the Python of the newer
torch tier (scripts/torch-venv.sh): it reads torchrun's own --help, runs
mcirun once with each flag it lists (each spelling, each choice, with a
value like a user's) and fails naming every flag mcirun rejects; then it
checks that mcirun reads the PET_ twin of every option torchrun reads one
for (torchrun's parser says which: its env and check_env actions).

    torchrun_flags.py MCIRUN
"""

import os
import re
import socket
import subprocess
import sys
import tempfile

MCIRUN = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))

# A value for each of torchrun's metavars (its dest in upper case).
VALUES = {
    "NNODES": "1",
    "NPROC_PER_NODE": "1",
    "RDZV_BACKEND": "c10d",
    "RDZV_ID": "flags-test",
    "RDZV_CONF": "join_timeout=30",
    "MAX_RESTARTS": "0",
    "MONITOR_INTERVAL": "0.1",
    "EVENT_LOG_HANDLER": "null",
    "ROLE": "trainer",
    "REDIRECTS": "3",
    "TEE": "0:3",
    "LOG_LINE_PREFIX_TEMPLATE": "[${rank}]",
    "LOCAL_RANKS_FILTER": "0",
    "DUPLICATE_STDOUT_FILTERS": "loss",
    "DUPLICATE_STDERR_FILTERS": "warn",
    "NODE_RANK": "0",
    "LOCAL_ADDR": "127.0.0.1",
    "LOGS_SPECS": "default",
    "SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGUSR1",
    "SHUTDOWN_TIMEOUT": "5",
}
# Flags that say where the store is: not with --standalone, on a free port.
STORE_FLAGS = {"MASTER_ADDR", "MASTER_PORT", "RDZV_ENDPOINT"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_help():
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--help"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120, check=True).stdout
    return out


def listed_options(help_text):
    """[(spelling, metavar or None, [choices])] for every option the help lists."""
    section = help_text.split("\noptions:\n", 1)[1]
    found = []
    for line in section.splitlines():
        if not line.startswith("  -"):
            continue
        head = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        for alt in head.split(", "):
            parts = alt.split(" ", 1)
            arg = parts[1] if len(parts) > 1 else None
            choices = arg[1:-1].split(",") if arg and arg.startswith("{") else []
            found.append((parts[0], None if choices else arg, choices))
    return found


def run(args, env_extra=None, workdir=None):
    env = dict(os.environ, MCI_PYTHON=sys.executable, OMP_NUM_THREADS="1")
    for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(v, None)
    env.update(env_extra or {})
    return subprocess.run([MCIRUN] + args, env=env, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60)


def attempt(flag, value, logs):
    """mcirun with flag [value] and a program that fits it; its result."""
    words = [flag] + ([value] if value is not None else [])
    program = ["/bin/true"]
    if flag in ("-m", "--module"):
        program = ["platform"]  # python -m platform: prints, exits 0
    elif flag in ("--run-path", "--run_path"):
        program = [os.path.join(HERE, "torchrun_flags_noop.py")]
    elif flag in ("--no-python", "--no_python"):
        program = ["/bin/true"]
    if flag in ("-h", "--help") or flag.startswith("--print"):
        program = []
    dest = flag.lstrip("-").replace("-", "_").upper()
    store = [] if dest in STORE_FLAGS else ["--standalone"]
    if dest == "MASTER_ADDR":  # not torchrun's default port, which another job may hold
        store = ["--master_port", str(free_port())]
    extra = ["--log-dir", logs] if flag in ("-r", "--redirects", "-t", "--tee") else []
    return run(store + extra + words + program)


def main():
    failures = []
    options = listed_options(torchrun_help())
    if len(options) < 40:
        failures.append(f"found only {len(options)} options in torchrun's --help: has its format changed?")
    tried = 0
    with tempfile.TemporaryDirectory() as logs:
        for flag, metavar, choices in options:
            values = choices or [None]
            if metavar is not None:
                if metavar in ("MASTER_PORT",):
                    values = [str(free_port())]
                elif metavar == "RDZV_ENDPOINT":
                    values = [f"127.0.0.1:{free_port()}"]
                elif metavar == "MASTER_ADDR":
                    values = ["127.0.0.1"]
                elif metavar == "LOG_DIR":
                    values = [logs]
                elif metavar in VALUES:
                    values = [VALUES[metavar]]
                else:
                    failures.append(f"torchrun lists {flag} {metavar}, which this test has no value for: add one")
                    continue
            for value in values:
                p = attempt(flag, value, logs)
                tried += 1
                if "already in use" in p.stdout:  # the free port was taken meanwhile: once more
                    p = attempt(flag, str(free_port()) if metavar == "MASTER_PORT" else value, logs)
                if p.returncode != 0:
                    shown = f"{flag} {value}" if value is not None else flag
                    failures.append(f"mcirun refused {shown} (exit {p.returncode}): {p.stdout.strip()[-400:]}")

    # The PET_ twins: every option torchrun reads from PET_<DEST>, mcirun's
    # --help names as read from there.
    from torch.distributed.argparse_util import check_env, env
    from torch.distributed.run import get_args_parser

    mcirun_help = run(["--help"]).stdout
    pets = [a.dest for a in get_args_parser()._actions if isinstance(a, (env, check_env))]
    if len(pets) < 25:
        failures.append(f"torchrun's parser has only {len(pets)} PET_ twins: has it changed?")
    for dest in pets:
        if f"[PET_{dest.upper()}]" not in mcirun_help:
            failures.append(f"torchrun reads PET_{dest.upper()}; mcirun's --help does not say it does")

    # And one read for real: the job runs under PET_ values alone.
    p = run(["sh", "-c", "echo ROLE $ROLE_NAME $WORLD_SIZE"], {"PET_STANDALONE": "1", "PET_NPROC_PER_NODE": "2",
                                                              "PET_ROLE": "pet"})
    if [line for line in p.stdout.splitlines() if line.startswith("ROLE")] != ["ROLE pet 2", "ROLE pet 2"]:
        failures.append(f"PET_STANDALONE=1 PET_NPROC_PER_NODE=2 PET_ROLE=pet did not make 2 ranks of role pet: "
                        f"{p.stdout}")

    print(f"{len(options)} spellings from torchrun's --help, {tried} mcirun runs, {len(pets)} PET_ twins")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
