"""One etcd member on loopback for a Python test (as tests/support/etcd_process.hpp
does for the C++ ones): its data on tmpfs, ports the OS says are free, ended
(SIGTERM, then SIGKILL) and its folder removed when the test leaves the
`with`, or killed with the test (PR_SET_PDEATHSIG) however it ends.

    with EtcdMember() as etcd:
        ... etcd.endpoint ...      # "127.0.0.1:PORT"
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

PR_SET_PDEATHSIG = 1


def find_etcd():
    """etcd's path, or None where it is not installed (Debian: etcd-server)."""
    return shutil.which("etcd") or next((p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if os.access(p, os.X_OK)),
                                        None)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class EtcdMember:
    def __init__(self, etcd=None):
        self.etcd = etcd or find_etcd()
        self.proc = None
        self.dir = None
        self.endpoint = None

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="etcd-test-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        client, peer = _free_port(), _free_port()
        while peer == client:
            peer = _free_port()
        self.endpoint = f"127.0.0.1:{client}"
        client_url, peer_url = f"http://{self.endpoint}", f"http://127.0.0.1:{peer}"
        with open(os.path.join(self.dir, "etcd.log"), "w") as log:
            self.proc = subprocess.Popen(
                [self.etcd, "--name=t", f"--data-dir={self.dir}/data", f"--listen-client-urls={client_url}",
                 f"--advertise-client-urls={client_url}", f"--listen-peer-urls={peer_url}",
                 f"--initial-advertise-peer-urls={peer_url}", f"--initial-cluster=t={peer_url}"],
                stdout=subprocess.DEVNULL, stderr=log, preexec_fn=_die_with_parent)
        until = time.monotonic() + 20
        while time.monotonic() < until:
            try:
                with urllib.request.urlopen(f"{client_url}/health", timeout=1) as r:
                    if json.load(r).get("health") == "true":
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        log_text = open(os.path.join(self.dir, "etcd.log")).read()[-2000:]
        self.__exit__(None, None, None)
        raise RuntimeError(f"etcd did not come up at {client_url} within 20 s:\n{log_text}")

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return False
