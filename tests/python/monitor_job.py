"""A job under `mcirun --monitor` for the monitor's Python tests: by
default the integration program's monitor_steps scenario (tests/
integration/test_launcher_monitor.cpp), whose ranks step through
all_reduce until the test writes TEST_DIR/release; or any `command`. Ports come from the OS's non-ephemeral range
(checked free), and the job is always ended with its children."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    low = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except OSError:
        pass
    for _ in range(200):
        port = random.randint(max(1024, low - 10000), low - 1)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port below the ephemeral range")


def torch_steps(numel, stall_rank=1, stall_at=20):
    """A torch rank's steps (all_reduce each) for the monitor's torch tests:
    rank `stall_rank` stops before step `stall_at` until TEST_DIR/release
    exists; rank 0 reads the release and says so in the step's own sum, so
    every rank stops after the same step."""
    import torch
    import torch.distributed as dist

    me = dist.get_rank()
    release = os.path.join(os.environ["TEST_DIR"], "release")
    grad = torch.ones(numel)
    step = 0
    while True:
        step += 1
        if me == stall_rank and step == stall_at:
            while not os.path.exists(release):
                time.sleep(0.01)
        grad[0] = 1.0 if me == 0 and os.path.exists(release) else 0.0
        dist.all_reduce(grad)
        if grad[0] > 0:
            return


class MonitoredJob:
    def __init__(self, mcirun, program, nproc, env, flags=(), scenario="monitor_steps", args=(), command=None):
        self.dir = tempfile.mkdtemp(prefix="mci-monitor-test-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d/" % self.port
        full = dict(os.environ)
        for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "MCI_JOB_TOKEN", "MCI_MONITOR"):
            full.pop(v, None)
        full.update(env)
        full["TEST_DIR"] = self.dir
        self.log = open(os.path.join(self.dir, "mcirun.log"), "w+")
        cmd = [mcirun, "--standalone", "--nproc_per_node=%d" % nproc, "--monitor=127.0.0.1:%d" % self.port]
        cmd += list(flags) + (command or [program, "--scenario=" + scenario] + list(args))
        # Its own session: ending it ends mcirun, which ends its ranks.
        self.proc = subprocess.Popen(cmd, env=full, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def output(self):
        if self.log.closed:
            return self.final_output
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def get(self, path):
        with urllib.request.urlopen(self.url + path.lstrip("/"), timeout=5) as r:
            return r.status, r.read().decode()

    def job(self):
        try:
            status, body = self.get("api/v1/job")
            return json.loads(body) if status == 200 else None
        except (OSError, ValueError):
            return None  # not listening yet

    def until(self, pred, limit=40.0, what="the condition"):
        """Polls the JSON until pred(job) holds; the job, or AssertionError."""
        end = time.monotonic() + limit
        last = None
        while time.monotonic() < end:
            j = self.job()
            if j is not None:
                last = j
                if pred(j):
                    return j
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("%s did not show within %.0f s; last JSON: %s\n--- mcirun:\n%s" %
                             (what, limit, json.dumps(last)[:3000], self.output()))

    def release(self):
        with open(os.path.join(self.dir, "release"), "w") as f:
            f.write("go\n")

    def finish(self, limit=60):
        self.release()
        try:
            return self.proc.wait(timeout=limit)
        finally:
            self.close()

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if not self.log.closed:
            self.final_output = self.output()
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None or not self.log.closed:
            self.close()
        return False
