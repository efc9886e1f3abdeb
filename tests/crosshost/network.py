#!/usr/bin/env python3
"""A network that needs no settings, and settings that are honoured: jobs of
two network-namespace hosts (two ranks each) under two mcirun, each case a
way real hosts are set up, each job checked by xcheck_rank (every element
of an all_reduce and a broadcast, first call included).

  loopback_name   node 0's own name resolves to 127.0.1.1 there (Debian's
                  default /etc/hosts line); --master_addr is that name. The
                  store must listen on every address, and node 0's ranks
                  must not give the others a loopback address.
  dead_interface  every host has a second interface, first in the kernel's
                  list, that leads nowhere (its bridge is down): mci must use
                  the one that reaches the other host, without settings.
  ifname_*        two working interfaces; MCI_SOCKET_IFNAME (plain, ^ to
                  exclude, = for an exact name), NCCL_SOCKET_IFNAME and
                  GLOO_SOCKET_IFNAME name the second: the job's bytes must
                  cross it (its counters), not the first.
  ifname_unknown  MCI_SOCKET_IFNAME names no interface: init fails on every
                  rank, naming the variable and the interfaces there are.
  ipv6_literal    IPv6-only hosts, --master_addr an IPv6 literal.
  ipv6_name       IPv6-only hosts, --master_addr a name with only an IPv6
                  address.

    network.py --mcirun BUILD/bin/mcirun --rank-program BUILD/bin/xcheck_rank [--case NAME]
Exits 0 when every case passed, 1 otherwise, 77 when namespace hosts
cannot be made here (not root).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from netns_hosts import NetnsHosts  # noqa: E402

CASES_CHECKED = ["all_reduce,f32,1048577,op=sum", "broadcast,i32,300001,root=1", "all_reduce,i64,1025,op=sum,async"]
# How much the checked calls send at least (1 MiB of floats summed between
# two hosts crosses the link both ways).
BIG = 4 << 20


def run_job(args, hosts, master, env_extra, expect_ok=True):
    """One job: 2 hosts x 2 ranks. Returns (ok, text)."""
    out_dir = tempfile.mkdtemp(prefix="mci-net-", dir="/var/tmp")
    os.chmod(out_dir, 0o777)
    try:
        port = hosts.free_port(0)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MCI_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "GLOO_", "NCCL_"))}
        env.update({"MCI_JOB_TOKEN": "network-check", "OMP_NUM_THREADS": "1", "XCHECK_TIMEOUT_MS": "20000"})
        env.update(env_extra)
        procs = []
        for i in range(2):
            argv = [args.mcirun, "--nnodes=2", f"--node_rank={i}", "--nproc_per_node=2", f"--master_addr={master}",
                    f"--master_port={port}", "--rdzv_conf", "join_timeout=30", args.rank_program, "--dir", out_dir,
                    "--seed", "7", *CASES_CHECKED]
            procs.append(hosts.popen(i, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        text, codes = "", []
        for i, p in enumerate(procs):
            try:
                o, _ = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                o, _ = p.communicate()
                o += "\n(killed: no end within 120 s)"
            codes.append(p.returncode)
            text += f"--- node {i} (exit {p.returncode}):\n{o}"
        if not expect_ok:
            return all(c != 0 for c in codes), text
        if any(c != 0 for c in codes):
            return False, text
        wrong = []
        for r in range(4):
            path = os.path.join(out_dir, f"rank{r}.jsonl")
            lines = open(path).read().splitlines() if os.path.exists(path) else []
            if len(lines) != len(CASES_CHECKED):
                wrong.append(f"rank {r} reported {len(lines)} calls")
            wrong += [f"rank {r}: {line}" for line in lines if '"wrong":0,' not in line]
        return not wrong, text + "\n".join(wrong)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def loopback_name(args):
    def hosts_file(i):
        lines = ["127.0.0.1\tlocalhost"]
        if i == 0:
            lines.append(f"127.0.1.1\t{hosts.name(0)}")  # Debian's line for the host's own name
        else:
            lines.append(f"{hosts.address(0)}\t{hosts.name(0)}")
        lines.append(f"{hosts.address(1)}\t{hosts.name(1)}")
        return "\n".join(lines) + "\n"

    hosts = NetnsHosts(2, tag="nl", hosts_file=hosts_file)
    with hosts:
        return run_job(args, hosts, hosts.name(0), {})


def dead_interface(args):
    # eth0 leads nowhere; eth1 is the working network. The hosts' names
    # resolve to their eth1 addresses.
    hosts = NetnsHosts(2, tag="nd", networks=2,
                       hosts_file=lambda i: "127.0.0.1\tlocalhost\n" +
                       "".join(f"{hosts.address(j, 1)}\t{hosts.name(j)}\n" for j in range(2)))
    with hosts:
        hosts.blackhole(0)
        return run_job(args, hosts, hosts.name(0), {})


def ifname(args, env):
    hosts = NetnsHosts(2, tag="ni", networks=2)
    with hosts:
        before = [hosts.tx_bytes(i, 0) for i in range(2)], [hosts.tx_bytes(i, 1) for i in range(2)]
        ok, text = run_job(args, hosts, hosts.address(0), env)
        eth0 = sum(hosts.tx_bytes(i, 0) for i in range(2)) - sum(before[0])
        eth1 = sum(hosts.tx_bytes(i, 1) for i in range(2)) - sum(before[1])
        text += f"\nbytes sent: eth0 {eth0}, eth1 {eth1}"
        # The store's few requests cross eth0 (--master_addr is node 0's
        # eth0 address); the data must cross eth1.
        if ok and not (eth1 > BIG and eth0 < eth1 / 10):
            return False, text + "\nthe job's data did not cross eth1"
        return ok, text


def ifname_unknown(args):
    hosts = NetnsHosts(2, tag="nu")
    with hosts:
        ok, text = run_job(args, hosts, hosts.address(0), {"MCI_SOCKET_IFNAME": "nosuch"}, expect_ok=False)
        for piece in ("MCI_SOCKET_IFNAME=nosuch matches no interface of this host that is up", "eth0 10.77"):
            if piece not in text:
                return False, text + f"\nmissing: {piece}"
        return ok, text


def ipv6(args, by_name):
    hosts = NetnsHosts(2, tag="n6", ipv4=False, ipv6=True)
    with hosts:
        return run_job(args, hosts, hosts.name(0) if by_name else hosts.address(0), {})


CASES = {
    "loopback_name": loopback_name,
    "dead_interface": dead_interface,
    "ifname_prefix": lambda a: ifname(a, {"MCI_SOCKET_IFNAME": "eth1"}),
    "ifname_exclude": lambda a: ifname(a, {"MCI_SOCKET_IFNAME": "^eth0,lo"}),
    "ifname_exact": lambda a: ifname(a, {"MCI_SOCKET_IFNAME": "=eth1"}),
    "ifname_nccl": lambda a: ifname(a, {"NCCL_SOCKET_IFNAME": "eth1"}),
    "ifname_gloo": lambda a: ifname(a, {"GLOO_SOCKET_IFNAME": "eth1"}),
    "ifname_unknown": ifname_unknown,
    "ipv6_literal": lambda a: ipv6(a, False),
    "ipv6_name": lambda a: ipv6(a, True),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mcirun", required=True)
    ap.add_argument("--rank-program", required=True)
    ap.add_argument("--case", help="only this case")
    args = ap.parse_args()
    args.mcirun = os.path.abspath(args.mcirun)
    args.rank_program = os.path.abspath(args.rank_program)
    why = NetnsHosts.unavailable()
    if why:
        print(f"network.py: skipped: {why}")
        return 77
    failed = 0
    for name, case in CASES.items():
        if args.case and args.case != name:
            continue
        ok, text = case(args)
        print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
        if not ok:
            failed += 1
            print("     " + text[-4000:].replace("\n", "\n     "), flush=True)
    print(f"network.py: {failed} case(s) failed" if failed else "network.py: every case passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
