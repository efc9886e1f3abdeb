"""The processes of one test run, found by a mark in their environment: a
run exports a random MARK=... to what it starts, and every process the job
makes inherits it (ranks, their children, a guardian), whatever became of
the process tree. What a run must not leave behind is what still carries
its mark."""

import pathlib


def marked_processes(mark):
    """The pids whose environment holds `mark` ("NAME=value")."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if mark.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            pass  # gone meanwhile, or not ours to read
    return found
