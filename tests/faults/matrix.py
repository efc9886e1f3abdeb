#!/usr/bin/env python3
"""The fault matrix: every fault, at every moment, on every path, with the
outcome each cell must have and the bound it must meet (issue 51).

A cell is (fault, moment, path, victim, policy):
- faults: sigkill (the victim process), sigstop (alive and silent, then
  SIGCONT), abort (ProcessGroup::abort / the group's abort, from another
  thread), destroy (the group destroyed with work in flight),
  sigterm_mcirun and sigint_mcirun (to the victim's node's mcirun),
  link_cut (the victim's host's link down, then up again), store_lost (node
  0, which holds the store, killed whole: its mcirun and ranks), and on
  the etcd path etcd_member (one etcd member SIGKILLed: the victim first is
  the member every relay asks first, last is the leader) and etcd_quorum
  (two of the three members SIGKILLed, the leader among them);
- moments: init, first (the job's first collective), large (inside an
  all_reduce of 64 MiB), p2p (a ring of sends and receives in flight),
  shrink (inside the recovery from an earlier loss), grow (inside the grow
  that takes a replacement in), dump (during a flight-recorder dump), exit
  (while the group is destroyed at the end);
- paths: cpu and gloo (C++, tests/faults/fault_rank.cpp), torch-mci and
  torch-gloo (torch 2.15, tests/faults/torch_fault_rank.py; gloo is the
  reference column), and cpu-etcd: the cpu path with the job's store on a
  3-member etcd cluster, one member on each of 3 hosts (mcirun
  --rdzv_backend=etcd), where node 0 is lost like any other node, and
  torch-etcd: torch-mci there, torch's own store on etcd too
  (MCI_TORCH_STORE=mci);
- victims: the first rank, a middle one, the last;
- policies: mcirun --on-rank-loss stop, continue, replace, and on cpu-etcd
  restart: an elastic job (--nnodes=2:3 --max-restarts=1, the same command
  line on every node, as torchrun's etcd-v2 rendezvous) whose nodes left
  start the whole job again without the lost one.

What each cell must do (expected()): either recover in place (every
survivor ends with the model of the uninterrupted run, to the last bit, and
the next step completes within 1 s of the fault, or within the group's
timeout + 2 s where only a timeout can see the fault: a stopped rank, a cut
link), or stop (every process ends within the group's timeout + mcirun's
grace + 2 s of the fault, with an error naming the fault, mcirun exiting
non-zero). In every cell: no process left running, nothing left in
/dev/shm, no temporary folder left, no survivor with a wrong model.

    matrix.py --build BUILD [--torch-python PY] [--full] [--cell PATTERN] [--list] [--keep]
              [--bound-scale F] [--json OUT] [--table OUT] [--from-json IN --table OUT]

Without --full it runs the fixed subset CI runs (SUBSET below: every fault,
moment and path at least once). A failing cell prints its name; --cell NAME
reruns it alone. Exits 0 when every cell passed, 1 otherwise.
"""

import argparse
import itertools
import json
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "support"))
from marked_processes import marked_processes  # noqa: E402
from netns_hosts import NetnsHosts  # noqa: E402

TIMEOUT_MS = 2000  # the group's timeout in every cell
REPORT_WAIT_MS = 1000  # MCI_HANG_REPORT_WAIT_MS: how long a timeout's report waits for answers
GRACE_S = 1  # mcirun --grace
# How long node 0's mcirun waits, at the end, for a node that went silent
# (a cut link): MCI_NODE_SILENCE_MS.
NODE_SILENCE_S = 3
# When the runner sends SIGCONT to a stopped victim: once the others had
# the time to time out and report.
CONTINUE_AFTER_S = TIMEOUT_MS / 1000 + REPORT_WAIT_MS / 1000 + 1.5
STEPS = 4  # 6 under replace: a replacement has the time to join
FAULT_STEP = 2
LARGE_MIB = 64

FAULTS = ["sigkill", "sigstop", "abort", "destroy", "sigterm_mcirun", "sigint_mcirun", "link_cut", "store_lost",
          "etcd_member", "etcd_quorum"]
MOMENTS = ["init", "first", "large", "p2p", "shrink", "grow", "dump", "exit"]
PATHS = ["cpu", "gloo", "torch-mci", "torch-gloo", "cpu-etcd", "torch-etcd"]
# Paths whose store is on etcd (3 hosts, a member on each).
ETCD_PATHS = {"cpu-etcd", "torch-etcd"}
# Their relays' lease (MCI_ETCD_LEASE_TTL), and etcd's timing, which lets
# a lease that short be kept (etcd's minimum TTL is 1.5 election
# timeouts' worth of heartbeats).
ETCD_LEASE_S = 1
ETCD_ELECTION_S = 0.5
ETCD_FLAGS = ["--heartbeat-interval=50", f"--election-timeout={int(ETCD_ELECTION_S * 1000)}"]
ETCD_READ_TIMEOUT_S = 2  # --rdzv_conf read_timeout: one request to etcd, at most
VICTIMS = ["first", "middle", "last"]
POLICIES = ["stop", "continue", "replace", "restart"]
# The faults the victim process does to itself; the others the runner does.
SELF_FAULTS = {"sigkill", "sigstop", "abort", "destroy"}
# Faults that need hosts of their own (network namespaces).
HOST_FAULTS = {"link_cut", "store_lost"}
# Faults of etcd's own members (the etcd path only).
ETCD_FAULTS = {"etcd_member", "etcd_quorum"}


class Cell:
    def __init__(self, fault, moment, path, victim, policy):
        self.fault, self.moment, self.path, self.victim, self.policy = fault, moment, path, victim, policy

    @property
    def name(self):
        return f"{self.fault}/{self.moment}/{self.path}/{self.victim}/{self.policy}"

    @property
    def hosts(self):
        if self.path in ETCD_PATHS:
            return 3
        return 2 if self.fault in HOST_FAULTS else 1

    @property
    def world(self):
        return {1: 3, 2: 4, 3: 6}[self.hosts]

    def victim_rank(self):
        return {"first": 0, "middle": 1, "last": self.world - 1}[self.victim]


def applies(c):
    """Whether a cell means something (and the path can run it)."""
    if c.fault in ETCD_FAULTS and c.path not in ETCD_PATHS:
        return False
    if c.path in ETCD_PATHS:
        # What the store on etcd changes: node 0 lost whole or cut off, and
        # rank 0 lost, while the job runs, going on or stopping; etcd's own
        # members lost, one (nothing a user sees) or a quorum (every rank
        # stops).
        # Under replace, node 0 lost whole has its ranks started again on
        # the first surviving node to claim it (launch/nodes/node_adopter).
        if c.policy == "replace":
            return (c.path == "cpu-etcd" and c.fault == "store_lost" and c.victim == "first"
                    and c.moment in ("first", "large", "p2p"))
        # Under restart (an elastic range), the node that runs rank 0 lost
        # whole or cut off, or rank 0 alone killed: the job starts again
        # without that node (with it, for rank 0 alone), rank 0 elsewhere.
        if c.policy == "restart":
            return (c.path == "cpu-etcd" and c.victim == "first" and c.moment in ("first", "large", "p2p")
                    and c.fault in ("store_lost", "link_cut", "sigkill"))
        return (c.moment in ("first", "large", "p2p") and c.policy in ("stop", "continue")
                and ((c.fault == "store_lost" and c.victim == "first")
                     or (c.fault == "etcd_member" and c.victim in ("first", "last"))
                     or (c.fault == "etcd_quorum" and c.victim == "first" and c.moment != "large")
                     or (c.fault == "link_cut" and c.victim in ("first", "last"))
                     or (c.fault == "sigkill" and c.victim == "first")))
    if c.policy == "restart":
        return False  # the restart of an elastic job on etcd (above); mci's own store: tests/integration
    if c.path == "torch-gloo" and c.policy != "stop":
        return False  # gloo cannot go on without a lost rank: the reference column is a stop
    if c.moment in ("shrink", "grow") and (c.policy == "stop" or c.victim == "last"):
        return False  # the last rank's loss starts the recovery the victim's fault then hits
    if c.moment == "grow" and c.policy != "replace":
        return False
    if c.policy == "replace" and c.path.startswith("torch"):
        return False  # torch's replacement (reconfigure) is covered by its own tests, not this matrix
    if c.fault in ("abort", "destroy") and c.moment == "init":
        return False  # no group to abort or destroy yet
    if c.fault == "store_lost" and c.victim != "first":
        return False  # the store lives on node 0
    if c.fault in HOST_FAULTS and c.moment in ("init", "shrink", "grow", "dump", "exit"):
        return False  # a host's fault while the job runs: its collectives, large ones, its sends
    if c.fault in HOST_FAULTS and c.policy == "replace":
        # A host cut off has nothing to start a replacement on, and node 0
        # lost whole on mci's own store takes the store with it; on etcd
        # (above) the lost node's ranks start on a surviving node.
        return False
    if c.fault in ("sigterm_mcirun", "sigint_mcirun") and c.moment in ("shrink", "grow"):
        return False
    if c.path.startswith("torch") and c.moment in ("dump", "grow"):
        return False
    return True


def expected(c):
    """('recover' | 'stop', bound in seconds from the fault)."""
    # Seen only by a timeout, then the hang report's wait, then 2 s.
    detect = (TIMEOUT_MS + REPORT_WAIT_MS) / 1000 + 2
    if c.fault in ("sigterm_mcirun", "sigint_mcirun"):
        # SIGINT: KeyboardInterrupt, then SIGTERM after the grace, then SIGKILL after another.
        bound = (2 if c.fault == "sigterm_mcirun" else 3) * GRACE_S + 2
        # At exit the job may have ended before the signal came: mcirun then
        # exits with the job's code, saying the signal came too late.
        return ("either" if c.moment == "exit" else "stop"), bound
    stop_bound = TIMEOUT_MS / 1000 + GRACE_S + 2
    if c.policy == "restart":
        # The job starts again, as torchrun's etcd-v2 rendezvous would: the
        # loss seen (a killed process at once: its peers' connections
        # refused, and a node lost whole also by its mcirun's store
        # connection, closed), every rank stopped, the nodes meet again on
        # etcd (without a lost node, which its closed connection says at
        # once), new processes start and form their group, and train from
        # step 1 to step FAULT_STEP again: measured 0.5 to 1.1 s (steal 0).
        # Node 0 lost whole takes its etcd member with it, which may lead:
        # an election first (see the etcd cells below). A cut link is seen
        # only by a timeout or a lease's end: measured 2.0 to 3.6 s.
        if c.fault == "link_cut":
            return "recover", detect + 1.0
        election = 3 * ETCD_ELECTION_S if c.fault == "store_lost" else 0.0
        return "recover", 1.5 + election + (1.0 if c.moment == "large" else 0.0)
    if c.fault == "sigstop" and c.moment == "init":
        # The others' init times out; the victim, continued later, needs
        # its own timeout to find them gone (under stop, mcirun ends it at
        # once). Init may also have ended on every rank before the stop
        # took (it takes a few ms): under continue or replace the others
        # then leave the stopped rank out at their first step's timeout
        # and run to the end (seen on cpu in the whole matrix). On torch,
        # the rendezvous before mci's init is torch's own store on rank 0,
        # whose waits are torch's: a victim continued in time may still
        # meet the others, and the job then runs to its end.
        either = "either" if c.path.startswith("torch") or c.policy != "stop" else "stop"
        return either, CONTINUE_AFTER_S + TIMEOUT_MS / 1000 + GRACE_S + 1
    if c.fault == "etcd_member":
        # Collectives never touch etcd, and the relays pass over a member
        # that does not answer within 0.5 s: every rank goes on, under any
        # policy. A step that needs the store (the first collective
        # connects its peers through it) while the members elect a new
        # leader (the killed one was the leader) waits for the election:
        # an election timeout, then the 1 s any step gets.
        # A 64 MiB step alone takes 0.6 to 1 s across the three hosts.
        return "whole", ETCD_ELECTION_S + 1.0 + (1.0 if c.moment == "large" else 0.0)
    if c.fault == "etcd_quorum":
        # No lease can be renewed: each relay counts itself cut off after
        # three TTLs without a renewal (a renewal waits at most a request's
        # budget) and closes its ranks' store connections; they stop.
        return "stop", 3 * ETCD_LEASE_S * 1.5 + ETCD_READ_TIMEOUT_S + TIMEOUT_MS / 1000 + GRACE_S + 2
    if c.fault == "link_cut":
        # A cut link answers nothing: the ranks see it at their timeout, the
        # hang report waits for answers, and node 0's mcirun keeps the store
        # up a few seconds (3) for the other nodes to read the news, which a
        # cut-off node never does. Under continue, the side with the store
        # (node 0's) goes on, whichever side was cut off.
        if c.policy == "stop":
            return "stop", (TIMEOUT_MS + REPORT_WAIT_MS) / 1000 + 3 + GRACE_S + 1
        # On etcd the store is on neither side: the side with etcd's quorum
        # (the nodes not cut off) goes on. The step redone after a cut in a
        # large all_reduce is that 64 MiB all_reduce again, across hosts: up
        # to 1 s more, on any path (the cpu path's took 5.11 s once, its
        # detection alone 5 s, with another matrix running beside it).
        return "recover", detect + (1.0 if c.moment == "large" else 0.0)
    if c.fault == "sigkill" and c.moment == "init" and c.policy != "stop":
        # Killed 5 ms into init: inside it, the job stops; a replacement may
        # still arrive within the others' init, or init may have ended on
        # every rank first (once in CI), and the job then goes on (continue:
        # without the victim) to its end with every model right.
        return "either", stop_bound
    if c.fault == "sigstop" and c.moment == "exit":
        # Stopped while its group closes, after its last step: the others
        # have finished. Continued, it finishes too (a whole run, every model
        # right, under any policy), or it finds its peers gone and says so.
        return "either", CONTINUE_AFTER_S + TIMEOUT_MS / 1000 + GRACE_S + 1
    if c.fault in ("abort", "destroy") and c.moment == "exit":
        # An abort or a destroy while the group closes, every step done:
        # nothing is lost, and the job may end as a whole run.
        return "either", stop_bound
    if c.path in ETCD_PATHS and c.policy in ("continue", "replace") and c.fault in ("sigkill", "store_lost"):
        # On etcd a death certificate is a transaction committed by a quorum
        # (node 0's relay's, or, when node 0 is lost whole, another relay's
        # once node 0's relay's port refuses connections), and the shrink's
        # agreements are etcd's transactions and watches: about 0.3 s more
        # than on mci's store. The redone 64 MiB step alone takes 0.6 to
        # 1 s across the three hosts of this path (6 ranks and 3 etcd
        # members on the runner's 2 cores). Node 0 lost whole takes its etcd
        # member with it: when that member was the leader (one run in
        # three), the agreements wait for an election: the followers notice
        # after one to two election timeouts (randomized), and a split vote,
        # now and then, starts another (measured: 0.5 to 0.7 s without an
        # election, 1.1 to 1.3 s with one, once 2.1 s).
        election = 3 * ETCD_ELECTION_S if c.fault == "store_lost" else 0.0
        return "recover", 1.0 + election + (1.0 if c.moment == "large" else 0.0)
    if c.policy == "stop" or c.moment == "init" or c.fault == "store_lost":
        return "stop", stop_bound
    if c.moment == "exit":
        return "recover", None  # the survivors had finished
    if c.fault == "sigstop" and c.moment == "shrink":
        # Stopped inside the shrink: a victim that had arrived is in the
        # decision, and the new group's check-in waits a timeout for it (the
        # survivors then agree again without it, at once). One stopped
        # between its arrival's two store requests (listed, not counted)
        # also holds the decision until the timeout: two timeouts in all.
        return "recover", 2 * TIMEOUT_MS / 1000 + 2
    if c.fault == "sigstop":
        return "recover", detect
    if c.fault == "destroy" and c.moment == "p2p":
        # The victim's operation in flight (a small all_reduce) is not what
        # the others do (a ring of sends and receives, which no fingerprint
        # compares with a collective): nobody answers it, and destroying the
        # group waits for its work in flight until its timeout; the others
        # see the victim leave then.
        return "recover", detect
    if c.fault == "destroy" and c.path == "gloo" and c.moment in ("large", "dump"):
        # The victim's operation in flight (a small all_reduce) is not the
        # others' (the large one, the barrier): Gloo's messages carry no
        # fingerprint, so the mismatch is seen at the timeout.
        return "recover", TIMEOUT_MS / 1000 + 2
    if c.moment == "grow" and c.path == "gloo" and c.fault in ("abort", "destroy"):
        # Gloo cannot end an operation already running (its abort is
        # carried out before the next one): the grown group sees it at the
        # timeout.
        return "recover", TIMEOUT_MS / 1000 + 2
    return "recover", 1.0


def all_cells():
    out = []
    for f, m, p, v, pol in itertools.product(FAULTS, MOMENTS, PATHS, VICTIMS, POLICIES):
        c = Cell(f, m, p, v, pol)
        if applies(c):
            out.append(c)
    return out


# The CI subset: every fault, every moment and every path at least once,
# under every policy, most of them on the cpu path.
SUBSET = [
    "sigkill/first/cpu/middle/stop",
    "sigkill/large/cpu/last/continue",
    "sigkill/p2p/cpu/first/continue",
    "sigkill/shrink/cpu/middle/continue",
    "sigkill/grow/cpu/first/replace",
    "sigkill/dump/cpu/middle/continue",
    "sigkill/exit/cpu/last/stop",
    "sigkill/init/cpu/middle/continue",
    "sigkill/large/cpu/middle/replace",
    "sigkill/first/gloo/last/stop",
    "sigkill/first/gloo/middle/continue",
    "sigkill/p2p/gloo/first/continue",  # recv posted before its send, after a shrink (hung: fixed)
    "sigstop/first/cpu/middle/stop",
    "sigstop/large/cpu/last/continue",
    "sigstop/shrink/cpu/middle/continue",  # stopped inside the shrink (the survivors failed: fixed)
    "abort/p2p/cpu/middle/stop",
    "abort/large/cpu/first/continue",
    "abort/first/gloo/middle/stop",
    "destroy/first/cpu/last/stop",
    "destroy/large/cpu/middle/continue",
    "sigterm_mcirun/large/cpu/first/stop",
    "sigint_mcirun/first/cpu/middle/continue",
    "sigterm_mcirun/init/gloo/last/stop",
    "link_cut/large/cpu/last/continue",
    "link_cut/p2p/cpu/first/continue",
    "link_cut/first/cpu/middle/stop",
    "store_lost/first/cpu/first/continue",
    # The store on etcd: node 0 lost whole goes on in place, or stops; node 0 cut off.
    "store_lost/p2p/cpu-etcd/first/continue",
    "store_lost/first/cpu-etcd/first/stop",
    "link_cut/p2p/cpu-etcd/first/continue",
    # etcd's own members: its leader lost (nothing a user sees), its quorum lost (every rank stops).
    "etcd_member/first/cpu-etcd/last/stop",
    "etcd_quorum/p2p/cpu-etcd/first/continue",
    # torch on etcd: node 0 lost whole, torch's store with the job's on etcd.
    "store_lost/p2p/torch-etcd/first/continue",
    # An elastic job on etcd restarted without the node that ran rank 0.
    "store_lost/first/cpu-etcd/first/restart",
    "sigkill/first/torch-mci/middle/continue",
    "sigkill/large/torch-mci/last/stop",
    "abort/p2p/torch-mci/middle/stop",
    "sigkill/first/torch-gloo/middle/stop",
    "sigstop/first/torch-mci/last/stop",
]


def etcd_built(mcirun):
    """Whether this mcirun has the store on etcd (its --help says so)."""
    r = subprocess.run([mcirun, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return "outlives any node" in r.stdout


def fault_mark():
    return f"MCI_FAULT_MARK={secrets.token_hex(6)}"


def shm_segments():
    """mci's segments in this host's /dev/shm. The namespace hosts' own
    folders (mci-netns-*: this run's, whose insides run_cell checks, or
    another test's running beside it) are not segments."""
    return {p for p in os.listdir("/dev/shm") if p.startswith("mci") and not p.startswith("mci-netns-")}


class Job:
    """One cell's job: its mcirun(s), their output, the runner's faults."""

    def __init__(self, args, cell, hosts):
        self.args, self.cell, self.hosts = args, cell, hosts
        self.dir = tempfile.mkdtemp(prefix="mci-fault-", dir="/var/tmp")  # every host sees it
        os.chmod(self.dir, 0o777)
        # Each node's mcirun's TMPDIR: its folders land there.
        self.tmps = [os.path.join(self.dir, f"tmp{i}") for i in range(cell.hosts)]
        for t in self.tmps:
            os.mkdir(t)
            os.chmod(t, 0o777)
        self.mark = fault_mark()
        self.etcds = []
        self.procs = []
        self.logs = []
        self.fault_t = None
        self.fault_problem = None  # why the runner could not do the cell's fault
        self.victim_host = None  # under restart: the host the victim ran on (victim_node)
        self.ended = None

    def program(self):
        c = self.cell
        if c.path.startswith("torch"):
            return [str(HERE / "torch_fault_rank.py")]
        return [self.args.fault_rank]

    def rank_args(self):
        c = self.cell
        fault = c.fault if c.fault in SELF_FAULTS else ("external" if c.fault != "none" else "none")
        steps, extra = (6 if c.policy == "replace" else STEPS), []
        if c.policy == "replace" and c.fault in HOST_FAULTS:
            # A node lost whole: its ranks start on another node, each an
            # mcirun child that joins the running group at a step boundary
            # (about a second): the job runs long enough after the fault.
            steps, extra = 14, ["--step-ms", "150"]
        return ["--dir", self.dir, "--steps", str(steps), "--fault", fault, "--moment", c.moment, "--victim",
                str(c.victim_rank()), "--policy", c.policy, "--step", str(FAULT_STEP), "--large-mib", str(LARGE_MIB),
                *extra]

    def env(self):
        c = self.cell
        # The caller's job settings stay out; its MCI_LOG_LEVEL is kept, so a
        # cell rerun with --keep can log at debug level.
        env = {k: v for k, v in os.environ.items()
               if k == "MCI_LOG_LEVEL"
               or not k.startswith(("MCI_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_", "TORCHELASTIC"))}
        k, v = self.mark.split("=")
        env.update({k: v, "MCI_JOB_TOKEN": f"fault-{v}", "OMP_NUM_THREADS": "1",
                    "FAULT_TIMEOUT_MS": str(TIMEOUT_MS), "MCI_HANG_REPORT_WAIT_MS": str(REPORT_WAIT_MS),
                    "MCI_NODE_SILENCE_MS": str(NODE_SILENCE_S * 1000),
                    "MCI_FR_DUMP_DIR": os.path.join(self.dir, "dumps")})
        if c.path.startswith("torch"):
            env["MCI_PYTHON"] = self.args.torch_python
            env["FAULT_BACKEND"] = "gloo" if c.path == "torch-gloo" else "mci"
        else:
            env["FAULT_BACKEND"] = "cpu" if c.path in ETCD_PATHS else c.path
        if c.path in ETCD_PATHS:
            env["MCI_ETCD_LEASE_TTL"] = str(ETCD_LEASE_S)
            # Three mcirun start apart, and torch's ranks import it for
            # seconds: they meet within a minute, then work with TIMEOUT_MS
            # (the etcd paths' faults come after init).
            env["FAULT_INIT_TIMEOUT_MS"] = "60000"
        return env

    def start(self):
        c = self.cell
        flags = [f"--grace={GRACE_S}", f"--on-rank-loss={'stop' if c.policy == 'restart' else c.policy}"]
        if c.policy == "replace":
            flags.append("--max-restarts=2")  # replacements per node
        if c.policy == "restart":
            flags.append("--max-restarts=1")
        env = self.env()
        if c.hosts == 1:
            argv = [self.args.mcirun, "--standalone", f"--nproc_per_node={c.world}", *flags, *self.program(),
                    *self.rank_args()]
            self.spawn(argv, dict(env, TMPDIR=self.tmps[0]), None)
        elif c.path in ETCD_PATHS:
            endpoints = self.start_etcd()
            for i in range(c.hosts):
                # Under restart the same command line on every node: an
                # elastic range, whose attempts number the nodes.
                nodes = ([f"--nnodes=2:{c.hosts}"] if c.policy == "restart"
                         else [f"--nnodes={c.hosts}", f"--node_rank={i}"])
                argv = [self.args.mcirun, *nodes, "--nproc_per_node=2",
                        "--rdzv_backend=etcd", f"--rdzv_endpoint={endpoints}", f"--rdzv_id={self.mark.split('=')[1]}",
                        # A node cut off from etcd learns it within a request's time.
                        f"--rdzv_conf=read_timeout={ETCD_READ_TIMEOUT_S}",
                        *flags, *self.program(), *self.rank_args()]
                self.spawn(argv, dict(env, TMPDIR=self.tmps[i]), i)
        else:
            port = self.hosts.free_port(0)
            for i in range(2):
                argv = [self.args.mcirun, "--nnodes=2", f"--node_rank={i}", "--nproc_per_node=2",
                        f"--master_addr={self.hosts.address(0)}", f"--master_port={port}", *flags, *self.program(),
                        *self.rank_args()]
                self.spawn(argv, dict(env, TMPDIR=self.tmps[i]), i)

    def start_etcd(self):
        """A fresh 3-member etcd cluster, a member on each host (its data on
        the host's tmpfs: etcd syncs every write), once it answers; its client
        endpoints, comma-separated."""
        hosts = self.cell.hosts
        peers = ",".join(f"e{i}=http://{self.hosts.address(i)}:2380" for i in range(hosts))
        for i in range(hosts):
            a = self.hosts.address(i)
            argv = [self.args.etcd, f"--name=e{i}", f"--data-dir=/dev/shm/etcd-{self.mark.split('=')[1]}",
                    f"--listen-client-urls=http://{a}:2379", f"--advertise-client-urls=http://{a}:2379",
                    f"--listen-peer-urls=http://{a}:2380", f"--initial-advertise-peer-urls=http://{a}:2380",
                    f"--initial-cluster={peers}", "--initial-cluster-state=new", "--log-level=error", *ETCD_FLAGS]
            log = open(os.path.join(self.dir, f"etcd{i}.log"), "w")
            self.etcds.append(self.hosts.popen(i, argv, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))
            log.close()
        endpoints = ",".join(f"{self.hosts.address(i)}:2379" for i in range(hosts))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            r = self.hosts.run(1, ["etcdctl", f"--endpoints={endpoints}", "--command-timeout=1s", "put", "up", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, ETCDCTL_API="3"))
            if r.returncode == 0:
                return endpoints
            time.sleep(0.1)
        raise RuntimeError("the etcd cluster did not answer within 30 s")

    def etcd_members_to_kill(self):
        """The indexes of the etcd members the cell kills: etcd_member's
        victim first is host 0's (every relay's first endpoint), last the
        leader; etcd_quorum kills the leader and the next member."""
        c = self.cell
        endpoints = ",".join(f"{self.hosts.address(i)}:2379" for i in range(c.hosts))
        r = self.hosts.run(1, ["etcdctl", f"--endpoints={endpoints}", "--command-timeout=2s", "endpoint", "status",
                               "-w", "json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=dict(os.environ, ETCDCTL_API="3"))
        leader = None
        for st in json.loads(r.stdout or "[]"):
            status = st.get("Status", {})
            if status.get("leader") and status.get("leader") == status.get("header", {}).get("member_id"):
                leader = [f"{self.hosts.address(i)}:2379" for i in range(c.hosts)].index(
                    st["Endpoint"].split("//")[-1])
        if leader is None and (c.fault == "etcd_quorum" or c.victim != "first"):
            # Killing a member at random would not be the cell it claims.
            self.fault_problem = "etcd's leader could not be found (etcdctl endpoint status): no member was killed"
            return []
        if c.fault == "etcd_quorum":
            return [leader, (leader + 1) % c.hosts]
        return [0 if c.victim == "first" else leader]

    def stop_etcd(self):
        """Ends the members still running, and removes their data."""
        for p in self.etcds:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.etcds = []
        if self.hosts is not None:
            for i in range(self.cell.hosts if self.cell.path in ETCD_PATHS else 0):
                shutil.rmtree(os.path.join(self.hosts.shm_dir(i), f"etcd-{self.mark.split('=')[1]}"),
                              ignore_errors=True)

    def spawn(self, argv, env, host):
        log = open(os.path.join(self.dir, f"mcirun{len(self.procs)}.log"), "w+")
        self.logs.append(log)
        if host is None:
            p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        else:
            p = self.hosts.popen(host, argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(p)

    def victim_node(self):
        c = self.cell
        if c.hosts == 1:
            return 0
        if c.policy != "restart":
            return c.victim_rank() // 2
        # An elastic job numbers its nodes itself: the victim's node is the
        # host whose namespace holds the victim's pid (written before its
        # marker), found once, while it lives.
        marked = pathlib.Path(self.dir, f"pid.{c.victim_rank()}")
        if self.victim_host is None and not marked.exists():
            return None  # it never reached its moment (the cell says so)
        if self.victim_host is None:
            pid = int(marked.read_text().split()[0])
            self.victim_host = next((i for i in range(c.hosts) if pid in self.hosts.pids_in(i)), None)
            if self.victim_host is None:
                raise RuntimeError(f"the victim's pid {pid} is in none of the hosts")
        return self.victim_host

    def external_fault(self):
        """Waits for the victim's marker, then does the fault."""
        c = self.cell
        marker = os.path.join(self.dir, f"at.{c.victim_rank()}")
        # Asked before the moment: the leader does not change on its own.
        members = self.etcd_members_to_kill() if c.fault in ETCD_FAULTS else []
        deadline = time.monotonic() + 60
        while not os.path.exists(marker):
            if time.monotonic() > deadline or all(p.poll() is not None for p in self.procs):
                return False
            time.sleep(0.005)
        self.fault_t = time.time()
        node = self.victim_node()
        if c.fault == "sigterm_mcirun":
            self.procs[node].send_signal(signal.SIGTERM)
        elif c.fault == "sigint_mcirun":
            self.procs[node].send_signal(signal.SIGINT)
        elif c.fault == "link_cut":
            self.hosts.link(node, False)
        elif c.fault in ETCD_FAULTS:
            for i in members:
                self.etcds[i].kill()
        elif c.fault == "store_lost":
            for pid in self.hosts.pids_in(node):  # its mcirun, its ranks, its guardian, its etcd member
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        return True

    def wait(self, limit):
        """Waits for every mcirun; a stopped victim gets SIGCONT once the
        others had the time to see it (the fault's second half)."""
        deadline = time.monotonic() + limit
        continued = self.cell.fault != "sigstop"
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            fault_t = self.self_fault_time()
            if not continued and fault_t and time.time() > fault_t + CONTINUE_AFTER_S:
                for pid in marked_processes(self.mark):
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                continued = True
            time.sleep(0.01)
        self.ended = time.time()
        return [p.poll() for p in self.procs]

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for pid in marked_processes(self.mark):
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def output(self):
        text = ""
        for i, log in enumerate(self.logs):
            log.seek(0)
            text += f"--- mcirun {i}:\n{log.read()}"
        return text

    def lines(self):
        """Every rank's lines, by rank (replacements as rank + 1000)."""
        out = {}
        for f in pathlib.Path(self.dir).glob("rank*.jsonl"):
            r = int(f.stem[4:])
            out[r] = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        return out

    def self_fault_time(self):
        f = pathlib.Path(self.dir) / f"fault.{self.cell.victim_rank()}"
        try:
            return int(f.read_text().split()[0]) / 1e9
        except (OSError, IndexError, ValueError):
            return None  # not there, or not yet written whole

    def cleanup(self):
        for log in self.logs:
            log.close()
        if self.args.keep:
            print(f"     kept: {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def run_cell(args, cell, hosts):
    shm_before = shm_segments()
    job = Job(args, cell, hosts)
    problems = []
    outcome, bound = expected(cell)
    if bound is not None:
        bound *= args.bound_scale
    took = None
    try:
        job.start()
        if cell.fault not in SELF_FAULTS:
            if not job.external_fault():
                problems.append("the victim never reached the moment (its marker): the fault was not done")
            if job.fault_problem:
                problems.append(job.fault_problem)
        codes = job.wait(60 + (10 if cell.path.startswith("torch") else 0))
        if cell.fault == "link_cut" and job.victim_node() is not None:
            hosts.link(job.victim_node(), True)
        fault_t = job.fault_t or job.self_fault_time()
        if None in codes:
            problems.append(f"hang: mcirun did not end within 60 s (exit codes {codes})")
            job.kill_all()
        # A stopped victim, left stopped by a job that went on, is continued:
        # it must then end by itself.
        for pid in marked_processes(job.mark):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        lines = job.lines()
        survivors = {r: ls for r, ls in lines.items() if any("final" in x for x in ls)}
        if fault_t is None and cell.moment != "init":
            problems.append("the fault time is unknown (the victim wrote no fault.R)")
        whole = outcome == "whole"  # nothing lost: every rank goes on
        if whole:
            outcome = "recover"
        if outcome == "either":
            # Stopped, or ran to its end with every model right.
            outcome = "recover" if all(c == 0 for c in codes) else "stop"
            bound = None if outcome == "recover" else bound
        if outcome == "stop":
            bad = [c for c in codes if c == 0]
            if bad and cell.moment != "exit":
                problems.append(f"a job that must stop has an mcirun that exited 0: exit codes {codes}")
            if cell.fault == "sigterm_mcirun" and codes[job.victim_node()] not in (143, None):
                problems.append(f"mcirun given SIGTERM exited {codes[job.victim_node()]}, not 143")
            if cell.fault == "sigint_mcirun" and codes[job.victim_node()] not in (130, None):
                problems.append(f"mcirun given SIGINT exited {codes[job.victim_node()]}, not 130")
            if fault_t is not None and job.ended is not None:
                took = job.ended - fault_t
                if took > bound:
                    problems.append(f"the job ended {took:.2f} s after the fault, bound {bound:.1f} s")
            if not any(w in job.output() for w in ("rank", "Timed out", "aborted", "SIG")):
                problems.append("no error names the fault or a rank")
            if cell.fault == "etcd_quorum" and f"{hosts.address(0)}:2379" not in job.output():
                problems.append("no error names the etcd endpoints tried")
        else:
            # A host cut off is lost whole: the side without the store (node 1's)
            # fails; node 0's must not.
            lost_node = (job.victim_node() if cell.path in ETCD_PATHS else 1) if cell.fault in HOST_FAULTS else None
            if any(c != 0 for i, c in enumerate(codes) if c is not None and i != lost_node):
                problems.append(f"a job that must go on has an mcirun that exited non-zero: {codes}")
            if not survivors:
                problems.append("no rank finished")
            if whole and len(survivors) != cell.world:
                problems.append(f"only {len(survivors)} of {cell.world} ranks finished: nothing was to be lost")
            if cell.policy == "replace" and cell.fault in HOST_FAULTS:
                # The lost node's ranks started again elsewhere: every rank finished.
                missing = set(range(cell.world)) - {r % 1000 for r in survivors}
                if missing:
                    problems.append(f"ranks {sorted(missing)} of the lost node did not finish: nobody started "
                                    "them again")
            if cell.policy == "restart":
                # The job started again, every rank of that start finished:
                # all of them after a rank's loss, the lost node's two fewer.
                want = cell.world - (2 if cell.fault in HOST_FAULTS else 0)
                if "restarting every process, restart 1 of 1" not in job.output():
                    problems.append("the job did not start again")
                if len(survivors) != want:
                    problems.append(f"{len(survivors)} ranks finished the restarted job, not {want}")
            for r, ls in survivors.items():
                fin = [x for x in ls if "final" in x][-1]
                if fin["final"] != fin["expected"]:
                    problems.append(f"WRONG MODEL on rank {r}: {fin['final']} instead of {fin['expected']}")
            if bound is not None and fault_t is not None:
                # The steps from the one the fault hit on: a step before it
                # that a slower rank logged just after the fault is not a
                # recovery.
                # Under restart, a step of the restarted job (which
                # trains from step 1 again): a step of the failed start
                # that ended just after the fault is not a recovery either.
                after = sorted(x["t_ns"] / 1e9 for ls in survivors.values() for x in ls
                               if "step" in x and "error" not in x and x["t_ns"] / 1e9 > fault_t
                               and x["step"] >= FAULT_STEP
                               and (cell.policy != "restart" or x.get("attempt", 0) > 0))
                if not after:
                    problems.append("no step completed after the fault")
                else:
                    took = after[0] - fault_t
                    if took > bound:
                        problems.append(f"the next step completed {took:.2f} s after the fault, bound {bound:.1f} s")
        job.stop_etcd()
        # Nothing left: no process, no segment, no temporary folder.
        time.sleep(0.05)
        end = time.monotonic() + 5
        while marked_processes(job.mark) and time.monotonic() < end:
            time.sleep(0.05)
        left = marked_processes(job.mark)
        if left:
            problems.append(f"processes left running: {left}")
            job.kill_all()
        new_shm = shm_segments() - shm_before
        if hosts is not None:
            new_shm |= {f"{hosts.name(i)}:{x}" for i in range(hosts.count) for x in os.listdir(hosts.shm_dir(i))}
        if new_shm:
            problems.append(f"left in /dev/shm: {sorted(new_shm)}")
        # A node lost whole keeps what was on its disk (node 0 under store_lost).
        lost = job.victim_node() if cell.fault == "store_lost" else None
        tmps = [t for i, t in enumerate(job.tmps) if i != lost]
        end = time.monotonic() + 5
        while any(os.listdir(t) for t in tmps) and time.monotonic() < end:
            time.sleep(0.05)
        tmp_left = [x for t in tmps for x in os.listdir(t)]
        if tmp_left:
            problems.append(f"temporary files left: {tmp_left}")
        text = job.output()
    finally:
        job.stop_etcd()
        job.cleanup()
        if hosts is not None:
            hosts.clear_shm()
    return {"cell": cell.name, "fault": cell.fault, "moment": cell.moment, "path": cell.path,
            "victim": cell.victim, "policy": cell.policy, "expected": outcome,
            "bound_s": bound, "took_s": None if took is None else round(took, 3), "ok": not problems,
            # torch on gloo is the reference column: what it misses is
            # recorded, and is not mci's failure.
            "reference": cell.path == "torch-gloo",
            "problems": problems, "output": text[-3000:] if problems else ""}


def write_table(path, results, seconds, how):
    """docs/fault-matrix.md: a summary by path, then every cell."""
    mci = [r for r in results if not r["reference"]]
    ref = [r for r in results if r["reference"]]
    with open(path, "w") as f:
        f.write("<!-- Generated by tests/faults/matrix.py --table: do not edit. -->\n")
        f.write("# The fault matrix\n\n")
        f.write(f"{len(results)} cells in {seconds / 60:.0f} min ({how}): {sum(r['ok'] for r in mci)} of {len(mci)} "
                f"mci cells passed; the reference column (torch on gloo) met the same requirement in "
                f"{sum(r['ok'] for r in ref)} of {len(ref)}.\n\n")
        f.write("Each cell is one job: a fault (what dies or stops, and how) at a moment of the job, on a path, for "
                "a victim rank, under an `--on-rank-loss` policy. The runner checks the outcome the cell requires "
                "(`recover`: the survivors go on in place, end with the model of the uninterrupted run to the last "
                "bit, and complete a step within the bound; `stop`: every process ends within the bound, with an "
                "error naming the fault, and mcirun exits non-zero), and in every cell that no process, no "
                "/dev/shm segment and no temporary folder is left. Bounds and measured times are seconds from the "
                "fault. `tests/faults/matrix.py` says what each fault, moment, path and policy is; "
                "`--cell NAME` reruns one cell.\n\n")
        f.write("| path | cells | passed | worst measured / bound |\n|---|---|---|---|\n")
        for p in PATHS:
            rs = [r for r in results if r["path"] == p]
            if not rs:
                continue
            ratios = [r["took_s"] / r["bound_s"] for r in rs if r["took_s"] is not None and r["bound_s"]]
            worst = f"{max(ratios):.2f}" if ratios else "-"
            f.write(f"| {p}{' (reference)' if p == 'torch-gloo' else ''} | {len(rs)} | {sum(r['ok'] for r in rs)} "
                    f"| {worst} |\n")
        f.write("\n| fault | moment | path | victim | policy | required | bound (s) | measured (s) | result |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in results:
            bound = "-" if r["bound_s"] is None else f"{r['bound_s']:.1f}"
            took = "-" if r["took_s"] is None else f"{r['took_s']:.2f}"
            if r["ok"]:
                result = "pass"
            else:
                why = r["problems"][0].replace("|", "/") if r["problems"] else "?"
                result = f"{'reference misses' if r['reference'] else 'FAIL'}: {why[:120]}"
            f.write(f"| {r['fault']} | {r['moment']} | {r['path']} | {r['victim']} | {r['policy']} | "
                    f"{r['expected']} | {bound} | {took} | {result} |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="the build folder (bin/mcirun, bin/fault_rank)")
    ap.add_argument("--torch-python", default="", help="a Python with torch 2.15 (scripts/torch-venv.sh --python)")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--cell", help="only the cells whose name contains this")
    ap.add_argument("--fault", action="append", choices=FAULTS,
                    help="only this fault's cells (repeatable): the whole matrix in parts, merged by --from-json")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep each cell's folder (its logs) for a look")
    ap.add_argument("--bound-scale", type=float, default=1.0,
                    help="multiply every time bound (a sanitizer build runs several times slower)")
    ap.add_argument("--json")
    ap.add_argument("--table")
    ap.add_argument("--from-json", nargs="+",
                    help="write --table (and --json) from earlier runs' --json (parts are merged), running nothing")
    args = ap.parse_args()
    if args.from_json:
        # Parts in order; a cell run again in a later part (a rerun after a
        # fix) replaces the earlier result, and the table says how many did.
        by_name, seconds, hows, rerun = {}, 0.0, [], 0
        for path in args.from_json:
            with open(path) as f:
                saved = json.load(f)
            for r in saved["cells"]:
                rerun += r["cell"] in by_name
                by_name[r["cell"]] = r
            seconds += saved["seconds"]
            hows.append(saved.get("how", "a part of the matrix"))
        how = hows[0] if len(hows) == 1 else f"{len(hows)} parts: " + "; ".join(hows)
        if rerun:
            how += f"; {rerun} cell(s) of an earlier part run again in a later one, the later result kept"
        order = {c.name: i for i, c in enumerate(all_cells())}
        cells = sorted(by_name.values(), key=lambda r: order.get(r["cell"], len(order)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"seconds": round(seconds, 1), "how": how, "cells": cells}, f, separators=(",", ":"))
                f.write("\n")
        if args.table:
            write_table(args.table, cells, seconds, how)
        return 0
    args.mcirun = os.path.abspath(os.path.join(args.build, "bin", "mcirun"))
    args.fault_rank = os.path.abspath(os.path.join(args.build, "bin", "fault_rank"))
    args.etcd = shutil.which("etcd") or ""
    etcd_ok = bool(args.etcd) and shutil.which("etcdctl") and etcd_built(args.mcirun)
    cells = all_cells()
    if args.fault:
        cells = [c for c in cells if c.fault in args.fault]
    if args.cell:
        cells = [c for c in cells if args.cell in c.name]
    elif not args.full and not args.fault:
        names = set(SUBSET)
        cells = [c for c in cells if c.name in names]
        missing = names - {c.name for c in cells}
        if missing:
            print(f"matrix.py: the subset names cells that do not apply: {sorted(missing)}")
            return 2
    if args.list:
        for c in cells:
            print(c.name)
        return 0
    torch_ok = bool(args.torch_python) and os.access(args.torch_python, os.X_OK)
    skipped = [c for c in cells if c.path.startswith("torch") and not torch_ok]
    cells = [c for c in cells if c not in skipped]
    if skipped:
        print(f"matrix.py: {len(skipped)} torch cell(s) skipped: no torch 2 Python given (--torch-python)")
    if not etcd_ok:
        on_etcd = [c for c in cells if c.path in ETCD_PATHS]
        cells = [c for c in cells if c.path not in ETCD_PATHS]
        if on_etcd:
            print(f"matrix.py: {len(on_etcd)} cell(s) on etcd skipped: etcd and etcdctl (apt-get install etcd-server "
                  "etcd-client) and an mcirun built with the store on etcd are needed")
    why = NetnsHosts.unavailable()
    if why:
        host_cells = [c for c in cells if c.hosts > 1]
        cells = [c for c in cells if c.hosts == 1]
        print(f"matrix.py: {len(host_cells)} cell(s) of several hosts skipped: {why}")
    print(f"matrix.py: {len(cells)} cell(s)", flush=True)
    results = []
    started = time.monotonic()
    nhosts = max([c.hosts for c in cells], default=1)
    with (NetnsHosts(nhosts, tag="f") if nhosts > 1 else _Nothing()) as hosts:
        for c in cells:
            r = run_cell(args, c, hosts if c.hosts > 1 else None)
            results.append(r)
            took = "" if r["took_s"] is None else f" {r['took_s']:.2f} s after the fault (bound {r['bound_s']})"
            mark = "ok  " if r["ok"] else ("REF " if r["reference"] else "FAIL")
            print(f"{mark} {c.name}: {r['expected']}{took}", flush=True)
            for p in r["problems"]:
                print(f"     {p}", flush=True)
            if not r["ok"]:
                print("     " + r["output"][-2500:].replace("\n", "\n     "), flush=True)
                print(f"     rerun alone: {sys.argv[0]} --build {args.build} --cell '{c.name}'", flush=True)
    seconds = time.monotonic() - started
    how = ("the whole matrix, --full" if args.full and not args.cell
           else f"the cells matching --cell '{args.cell}'" if args.cell else "the CI subset")
    if args.fault:
        how += f" (faults {', '.join(args.fault)})"
    how += f", {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores"
    failed = [r for r in results if not r["ok"] and not r["reference"]]
    missed = [r for r in results if not r["ok"] and r["reference"]]
    if missed:
        print(f"matrix.py: the reference (torch on gloo) missed {len(missed)} cell(s): "
              + ", ".join(r["cell"] for r in missed))
    print(f"matrix.py: {len(results) - len(failed) - len(missed)} passed, {len(failed)} failed in {seconds:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"seconds": round(seconds, 1), "how": how, "cells": results}, f, indent=1)
    if args.table:
        write_table(args.table, results, seconds, how)
    return 1 if failed else 0


class _Nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
