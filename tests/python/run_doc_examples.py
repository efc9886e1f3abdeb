"""The Python examples of docs/pytorch.md, run as written: every ```python
block whose first line reads

    # NAME.py — run: mcirun --nproc_per_node=N NAME.py [(torch 2.x)]

is written to NAME.py in a temporary folder and run under mcirun with this
script's interpreter; the job must exit 0 and print every line of the
```text block that follows it. A block marked (torch 2.x) is skipped on
torch 1.13. Usage:

    run_doc_examples.py MCIRUN DOC"""

import os
import pathlib
import re
import socket
import subprocess
import sys
import tempfile

import torch

HEADER = re.compile(r"^# (\w+\.py) — run: mcirun --nproc_per_node=(\d+) \1( \(torch 2\.x\))?$")


def examples(text):
    """(name, nproc, needs torch 2, code, expected lines) of each runnable block."""
    blocks = re.findall(r"```(\w+)\n(.*?)```", text, re.S)
    found = []
    for i, (lang, body) in enumerate(blocks):
        first = body.splitlines()[0] if body else ""
        m = HEADER.match(first)
        if lang != "python" or not m:
            continue
        if i + 1 >= len(blocks) or blocks[i + 1][0] != "text":
            raise SystemExit(f"{m.group(1)}: no ```text block after it says what it prints")
        want = [line for line in blocks[i + 1][1].splitlines() if line.strip()]
        found.append((m.group(1), int(m.group(2)), bool(m.group(3)), body, want))
    return found


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    mcirun, doc = os.path.abspath(sys.argv[1]), pathlib.Path(sys.argv[2])
    found = examples(doc.read_text())
    if not found:
        raise SystemExit(f"{doc} has no runnable example (a ```python block starting '# NAME.py — run: mcirun ...')")
    torch2 = int(torch.__version__.split(".")[0]) >= 2
    env = dict(os.environ, MCI_PYTHON=sys.executable)
    for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        env.pop(v, None)
    failures, ran = [], 0
    with tempfile.TemporaryDirectory() as folder:
        for name, nproc, needs2, code, want in found:
            if needs2 and not torch2:
                print(f"{name}: skipped on torch {torch.__version__} (the block says torch 2.x)")
                continue
            path = pathlib.Path(folder) / name
            path.write_text(code)
            cmd = [mcirun, f"--nproc_per_node={nproc}", f"--master_port={free_port()}", str(path)]
            p = subprocess.Popen(cmd, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
            try:
                out, _ = p.communicate(timeout=150)
            except subprocess.TimeoutExpired:
                p.terminate()  # mcirun stops its ranks (SIGTERM, then SIGKILL after its grace)
                try:
                    p.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
                failures.append(f"{name}: did not finish within 150 s")
                continue
            ran += 1
            lines = set(out.splitlines())
            missing = [w for w in want if w not in lines]
            if p.returncode != 0 or missing:
                failures.append(f"{name}: exit code {p.returncode}, missing lines {missing}\n{out}")
            else:
                print(f"{name}: ok ({len(want)} line(s) printed as the doc says)")
    for f in failures:
        print("FAILED", f)
    if failures:
        sys.exit(1)
    print(f"{ran} example(s) of {doc.name} ran as written")


if __name__ == "__main__":
    main()
