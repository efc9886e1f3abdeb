"""Hosts for tests: network namespaces joined by a bridge, each with its own
address, hostname, /tmp and /dev/shm, so that mci sees separate machines
(its host identity is the hostname and boot id; shared memory lives in
/dev/shm) joined by real veth links of the MTU asked for.

    with NetnsHosts(2, mtu=1500) as hosts:
        p = hosts.popen(0, ["mcirun", ...], env=...)
        hosts.address(0)   # '10.77.0.1'

Everything lives in namespaces named from this process's pid (two tests
never share names), nothing is added to the root namespace, and down()
(also on exit) ends whatever still runs inside them, by pid, and removes
them with their folders. Needs root, iproute2, nsenter and unshare
(util-linux): NetnsHosts.unavailable() says what is missing.
"""

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import time

# Inside each host: its hosts file over /etc/hosts, its hostname, its own
# /tmp and /dev/shm, and a sysfs of its network namespace (so /sys/class/net
# shows its interfaces only). The folders of /tmp named in $5 (the code and
# build a test runs from, when they live there) stay visible, as a shared
# home would be on real hosts. unshare and exec keep the pid: the Popen's
# pid is the program's.
_ENTER = """set -e
mount --bind "$1" /etc/hosts
hostname "$2"
for d in $5; do mkdir -p "$3/$d" && mount --bind "/tmp/$d" "$3/$d"; done
mount --rbind "$3" /tmp
mount --bind "$4" /dev/shm
umount -l /sys && mount -t sysfs sysfs /sys
shift 5
exec "$@"
"""


def _shared_under_tmp(paths):
    """The top folders of /tmp that hold any of `paths` ("ci-check" for
    /tmp/ci-check/build): each host's own /tmp would hide them."""
    tops = set()
    for p in paths:
        parts = os.path.realpath(p).split("/")
        if len(parts) > 2 and parts[1] == "tmp" and parts[2]:
            tops.add(parts[2])
    return " ".join(sorted(tops))


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class NetnsHosts:
    @staticmethod
    def unavailable():
        """Why namespace hosts cannot be made here, or None."""
        if os.geteuid() != 0:
            return "network namespaces need root"
        for tool in ("ip", "nsenter", "unshare", "mount"):
            if shutil.which(tool) is None:
                return f"{tool} is not installed"
        return None

    def __init__(self, count, mtu=1500, subnet="10.77.0", tag=None, networks=1, ipv4=True, ipv6=False,
                 hosts_file=None, shared=()):
        """count hosts, each with one interface per network (eth0, eth1, ...)
        on that network's bridge. Network k's IPv4 addresses are
        SUBNET.(i+1) with the third number raised by k (10.77.0.x, 10.77.1.x),
        its IPv6 ones fd00:0:0:k::(i+1) (with ipv6). hosts_file(i), if given,
        returns host i's /etc/hosts (default: every host's first address
        under its name, and localhost). The code this test runs (this file's
        tree and the working folder) and the paths in `shared` stay visible
        on every host even where they live under /tmp."""
        if not 1 <= count <= 250:
            raise ValueError("between 1 and 250 hosts")
        self.count = count
        self.mtu = mtu
        self.subnet = subnet
        self.networks = networks
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.hosts_file = hosts_file
        here = os.path.dirname(os.path.abspath(__file__))
        self.shared = _shared_under_tmp([here, os.getcwd(), sys.executable, *shared])
        self.prefix = f"mci{tag or ''}{os.getpid()}h"
        self.hub = self.prefix + "hub"
        self.root = f"/var/tmp/mci-netns/{self.prefix}"
        self.shm_root = f"/dev/shm/mci-netns-{self.prefix}"
        self._up = False

    # --- life -------------------------------------------------------------
    def __enter__(self):
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()

    def name(self, i):
        return f"{self.prefix}{i}"

    def address(self, i, network=0, v6=None):
        """Host i's address on a network: IPv4 unless v6 (or an IPv6-only job)."""
        if v6 or (v6 is None and not self.ipv4):
            return f"fd00:0:0:{network}::{i + 1}"
        a, b, c = self.subnet.split(".")
        return f"{a}.{b}.{int(c) + network}.{i + 1}"

    def default_hosts(self, i):
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost"]
        lines += [f"{self.address(j)}\t{self.name(j)}" for j in range(self.count)]
        return "\n".join(lines) + "\n"

    def up(self):
        atexit.register(self.down)
        # A runner stopped by a signal (ctest's timeout, a kill) still takes
        # its namespaces down: the signal becomes SystemExit, atexit runs.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, lambda num, frame: sys.exit(128 + num))
        self._up = True
        try:
            _ip("netns", "add", self.hub)
            _ip("-n", self.hub, "link", "set", "lo", "up")
            for k in range(self.networks):
                _ip("-n", self.hub, "link", "add", f"br{k}", "type", "bridge")
                _ip("-n", self.hub, "link", "set", f"br{k}", "mtu", str(self.mtu), "up")
            os.makedirs(self.root, exist_ok=True)
            for i in range(self.count):
                ns = self.name(i)
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                for k in range(self.networks):
                    eth = f"eth{k}"
                    _ip("-n", self.hub, "link", "add", f"v{i}n{k}", "mtu", str(self.mtu), "type", "veth", "peer",
                        "name", eth, "mtu", str(self.mtu), "netns", ns)
                    _ip("-n", self.hub, "link", "set", f"v{i}n{k}", "master", f"br{k}", "up")
                    if self.ipv4:
                        _ip("-n", ns, "addr", "add", f"{self.address(i, k, v6=False)}/24", "dev", eth)
                    if self.ipv6:
                        # nodad: usable at once, not after duplicate address detection
                        _ip("-n", ns, "-6", "addr", "add", f"{self.address(i, k, v6=True)}/64", "dev", eth, "nodad")
                    _ip("-n", ns, "link", "set", eth, "up")
                with open(self.hosts_path(i), "w") as f:
                    f.write(self.hosts_file(i) if self.hosts_file else self.default_hosts(i))
                for d in (self.tmp_dir(i), self.shm_dir(i)):
                    os.makedirs(d, exist_ok=True)
                    os.chmod(d, 0o1777)
        except BaseException:
            self.down()
            raise

    def down(self):
        if not self._up:
            return
        self._up = False
        names = [self.name(i) for i in range(self.count)] + [self.hub]
        for ns in names:
            self._end_processes(ns)
        for ns in names:
            _ip("netns", "del", ns, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.shm_root, ignore_errors=True)

    def _end_processes(self, ns):
        pids = self.pids_in(ns)
        if not pids:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + 3
            while time.monotonic() < end and self.pids_in(ns):
                time.sleep(0.05)
            pids = self.pids_in(ns)
            if not pids:
                return

    # --- what runs there --------------------------------------------------
    def hosts_path(self, i):
        return f"{self.root}/hosts.{i}"

    def tmp_dir(self, i):
        return f"{self.root}/{self.name(i)}/tmp"

    def shm_dir(self, i):
        return f"{self.shm_root}/{self.name(i)}"

    def command(self, i, argv):
        """argv run on host i (for Popen)."""
        ns = self.name(i)
        return ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--uts", "--propagation", "private",
                "sh", "-c", _ENTER, "sh", self.hosts_path(i), ns, self.tmp_dir(i), self.shm_dir(i), self.shared, *argv]

    def popen(self, i, argv, **kwargs):
        return subprocess.Popen(self.command(i, argv), **kwargs)

    def run(self, i, argv, **kwargs):
        return subprocess.run(self.command(i, argv), **kwargs)

    def pids_in(self, ns_or_index):
        ns = self.name(ns_or_index) if isinstance(ns_or_index, int) else ns_or_index
        r = _ip("netns", "pids", ns, check=False)
        return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []

    def leftovers(self):
        """What a finished job left: processes still in a host, files in a
        host's /dev/shm. A list of lines, empty when clean."""
        out = []
        for i in range(self.count):
            pids = self.pids_in(i)
            if pids:
                out.append(f"{self.name(i)}: processes left running: {pids}")
            files = sorted(os.listdir(self.shm_dir(i))) if os.path.isdir(self.shm_dir(i)) else []
            if files:
                out.append(f"{self.name(i)}: left in /dev/shm: {files}")
        return out

    def clear_shm(self):
        for i in range(self.count):
            for f in os.listdir(self.shm_dir(i)):
                os.unlink(os.path.join(self.shm_dir(i), f))

    def free_port(self, i):
        """A port free on host i, as its OS picks one."""
        r = self.run(i, ["python3", "-c",
                         "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1])"],
                     stdout=subprocess.PIPE, text=True, check=True)
        return int(r.stdout.strip())

    # --- faults (the fault matrix) -----------------------------------------
    def link(self, i, up, network=0):
        """Cuts (up=False) or restores host i's link on a network."""
        _ip("-n", self.name(i), "link", "set", f"eth{network}", "up" if up else "down")

    def blackhole(self, network):
        """Network `network` takes packets and delivers none: its bridge is
        down, while every host's interface on it stays up with its address
        (a link that is configured but leads nowhere)."""
        _ip("-n", self.hub, "link", "set", f"br{network}", "down")

    def tx_bytes(self, i, network=0):
        """Bytes host i has sent on its interface on a network."""
        r = subprocess.run(["ip", "-n", self.name(i), "-s", "-j", "link", "show", f"eth{network}"],
                           stdout=subprocess.PIPE, text=True, check=True)
        return json.loads(r.stdout)[0]["stats64"]["tx"]["bytes"]
