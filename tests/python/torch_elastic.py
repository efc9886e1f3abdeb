"""examples/pytorch/elastic_train.py under mcirun's --on-rank-loss, torch
DDP on backend "mci"; each scenario ends with the parameters of the C++
elastic_train never interrupted (same samples, same math):

in_place   continue, 3 ranks: rank 1 is killed (SIGKILL) inside DDP's
           all-reduce at step 3, rank 2 mid-backward at step 6; the
           survivors shrink twice and redo each interrupted step.
rank0      continue, 3 ranks: rank 0 is killed inside DDP's all-reduce. Both
           stores the job leans on (torch's, mci's) live in the launcher,
           so the survivors go on.
replace    replace, 3 ranks: rank 1 is killed; the replacement mcirun starts
           joins the running group at the boundary of step 5 (torch's
           reconfigure contract on mci) and takes the most advanced
           replica's state: the job ends at world 3 again.
etcd_node0 continue, the job's store on etcd (a member this test starts): 2
           "nodes" on this host, each its mcirun with 2 ranks; node 0's
           mcirun is SIGKILLed mid-training (its ranks, the old rank 0
           among them, end with it). torch's store is on etcd too
           (MCI_TORCH_STORE=mci): node 1's ranks shrink and finish as
           world 2.
same_bits  replace with MCI_REPRODUCIBLE=1 and --whole: 2 "nodes" on this
           host, each its mcirun with 2 ranks on mci's store; node 1's
           mcirun is SIGKILLed at step 3, node 0 starts its two ranks
           again, they join through torch's reconfigure contract, and
           every rank ends with the bits (parameters and momentum) of the
           same training on 4 ranks never interrupted.
no_join    replace, 2 ranks, a program whose members never offer a join:
           the replacement ends within its join timeout with a clear error,
           and mcirun then ends the job (with a rank left running, the next
           replacement up to the cap; with none, none: RankLoss.*).

    python torch_elastic.py MCIRUN ELASTIC_TRAIN [SCENARIO]    exit 0: passed
"""
import datetime
import os
import re
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch", "elastic_train.py")
STEPS = 8


def never_grows():
    """A job's program under replace whose members never offer a join: rank
    1 dies at once; rank 0 waits until the replacement has offered itself
    and has then gone, and exits 0."""
    import torch.distributed as dist

    import mci_torch

    if mci_torch.is_replacement():
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
        store.set("test/joiner_pid", str(os.getpid()))
        mci_torch.join_running_group(timeout=datetime.timedelta(seconds=3))
        return 4  # never: nobody grows the group
    dist.init_process_group("mci")
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
    store.wait(["test/joiner_pid"], datetime.timedelta(seconds=60))
    pid = int(store.get("test/joiner_pid"))
    until = time.monotonic() + 60
    while time.monotonic() < until:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    print("rank 0: the replacement has gone", flush=True)
    os._exit(0)  # its group's peer is gone: nothing to close


def launch(mcirun, args, nproc, policy, timeout=240, flags=()):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([mcirun, "--standalone", f"--nproc_per_node={nproc}", f"--on-rank-loss={policy}", *flags,
                           sys.executable] + args, capture_output=True, text=True, env=env, timeout=timeout)


def check_run(p, want, lost, recoveries_want, world_end, extra=()):
    """What every elastic_train scenario asserts: mcirun's exit and loss
    lines, each step completed once, the recoveries, the final sums."""
    out = p.stdout + p.stderr
    fails = []
    if p.returncode != 0:
        fails.append(f"mcirun exited {p.returncode}")
    for rank in lost:
        if not re.search(rf"mcirun: rank {rank} \(pid \d+ on \S+\) was lost at \S+ s \(signal SIGKILL\)", out):
            fails.append(f"mcirun did not report rank {rank} lost by SIGKILL")
    steps = sorted(int(s) for s in re.findall(r"^step (\d+) world \d+ ", p.stdout, re.M))
    if steps != list(range(1, STEPS + 1)):
        fails.append(f"steps completed {steps}, want each of 1..{STEPS} once")
    recoveries = re.findall(r"^recovered world (\d+) lost (\S+) in \S+ ms: redo step (\d+)", p.stdout, re.M)
    if recoveries != recoveries_want:
        fails.append(f"recoveries {recoveries}, want {recoveries_want}")
    finals = re.findall(r"^final rank (\d+) world (\d+) sum (\S+)", p.stdout, re.M)
    ranks = sorted(int(r) for r, _, _ in finals)
    if ranks != list(range(world_end)) or any(int(w) != world_end or abs(float(x) - want) > 1e-9 * abs(want)
                                               for _, w, x in finals):
        fails.append(f"finals {finals}, want ranks 0..{world_end - 1} of world {world_end} with the sum {want:.12e} "
                     "of the run never interrupted")
    for pattern in extra:
        if not re.search(pattern, out, re.M):
            fails.append(f"no line matches {pattern!r}")
    return fails, recoveries


def kill_at_step_3(nodes, watch, victim, survivor, wait_s):
    """Two mcirun as nodes: once nodes[watch] printed step 3, nodes[victim]
    is SIGKILLed (its guardian ends its ranks), then nodes[survivor] is
    waited for, at most wait_s. Every process is ended and waited for.
    Returns each node's output, exit codes (-9: killed, or still running
    at the end) and when the kill came (None: step 3 never came)."""
    outs = [[], []]
    readers = [threading.Thread(target=lambda i=i: outs[i].extend(nodes[i].stdout), daemon=True) for i in (0, 1)]
    for t in readers:
        t.start()
    killed_at = None
    try:
        until = time.monotonic() + 120
        while time.monotonic() < until and not any(l.startswith("step 3 ") for l in outs[watch]):
            if nodes[watch].poll() is not None:
                break
            time.sleep(0.02)
        if any(l.startswith("step 3 ") for l in outs[watch]):
            nodes[victim].kill()
            killed_at = time.time()
        try:
            nodes[survivor].wait(wait_s)
        except subprocess.TimeoutExpired:
            pass  # said by the caller, with what each node printed
    finally:
        for p in nodes:
            if p.poll() is None:
                p.kill()
            p.wait()
        for t in readers:
            t.join(10)
    return ["".join(o) for o in outs], [p.returncode for p in nodes], killed_at


def node_lost_on_etcd(mcirun, common, want):
    """etcd_node0: see the module's text. Returns the failures."""
    from etcd_local import EtcdMember, find_etcd

    if find_etcd() is None:
        print("skipped: etcd is not installed (Debian: apt-get install etcd-server)")
        sys.exit(77)
    env = dict(os.environ, OMP_NUM_THREADS="1", MCI_JOB_TOKEN="etcd-torch-token")
    with EtcdMember() as etcd:
        job = f"torch-etcd-node0-{os.getpid()}"

        def node(rank):
            return subprocess.Popen([mcirun, "--nnodes=2", f"--node_rank={rank}", "--nproc_per_node=2",
                                     "--rdzv_backend=etcd-v2", f"--rdzv_endpoint={etcd.endpoint}", f"--rdzv_id={job}",
                                     "--on-rank-loss=continue", sys.executable] + common + ["--timestamps"],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

        (n1, n0), rc, killed_at = kill_at_step_3([node(1), node(0)], watch=1, victim=1, survivor=0, wait_s=120)
    fails = []
    if killed_at is None:
        return [f"node 0 never printed step 3\n--- node 0:\n{n0}\n--- node 1:\n{n1}"]
    if rc[0] != 0:
        fails.append(f"node 1's mcirun exited {rc[0]} (-9: still running after 120 s, killed)")
    finals = re.findall(r"^final rank (\d+) world (\d+) sum (\S+)", n1, re.M)
    if sorted(int(r) for r, _, _ in finals) != [0, 1] or any(
            int(w) != 2 or abs(float(x) - want) > 1e-9 * abs(want) for _, w, x in finals):
        fails.append(f"finals {finals}, want ranks 0 and 1 of world 2 with the sum {want:.12e} of the run never "
                     "interrupted (no step lost, none done twice)")
    if not re.search(r"^recovered world 2 lost \S+ in \S+ ms: redo step \d+", n1, re.M):
        fails.append("node 1's ranks did not report their recovery to world 2")
    steps = {int(s) for s in re.findall(r"^step (\d+) world \d+ ", n0 + n1, re.M)}
    if steps != set(range(1, STEPS + 1)):
        fails.append(f"steps completed {sorted(steps)}, want every one of 1..{STEPS}")
    # What the issue bounds: from the loss to the next completed step (said,
    # not asserted: a wall-clock figure on a shared machine).
    after = [int(t) for s, t in re.findall(r"^step (\d+) world 2 \S+ \S+ at (\d+)", n1, re.M)]
    if after:
        print(f"node 0 lost -> next completed step: {after[0] / 1000 - killed_at:.2f} s")
    if fails:
        fails.append(f"--- node 0:\n{n0}\n--- node 1:\n{n1}")
    return fails


def same_bits_after_replace(mcirun):
    """same_bits: see the module's text. Returns the failures."""
    import socket

    env = dict(os.environ, OMP_NUM_THREADS="1", MCI_REPRODUCIBLE="1", MCI_JOB_TOKEN="torch-same-bits")
    ref = subprocess.run([mcirun, "--standalone", "--nproc_per_node=4", sys.executable, EXAMPLE, "--steps", str(STEPS)],
                         capture_output=True, text=True, env=env, timeout=180)
    want = set(re.findall(r"^final rank \d+ world 4 sum \S+ bits (\S+)$", ref.stdout, re.M))
    if ref.returncode != 0 or len(want) != 1:
        return [f"the uninterrupted run failed or its ranks disagree ({want}):\n{ref.stdout}{ref.stderr}"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def node(rank):
        return subprocess.Popen([mcirun, "--nnodes=2", f"--node_rank={rank}", "--nproc_per_node=2",
                                 "--master_addr=127.0.0.1", f"--master_port={port}", "--on-rank-loss=replace",
                                 sys.executable, EXAMPLE, "--steps", str(STEPS), "--step-ms", "300", "--whole"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)

    (n0, _), rc, killed_at = kill_at_step_3([node(0), node(1)], watch=0, victim=1, survivor=0, wait_s=180)
    if killed_at is None:
        return [f"node 0 never printed step 3:\n{n0}"]
    fails = []
    if rc[0] != 0:
        fails.append(f"node 0's mcirun exited {rc[0]}")
    for pattern in (r"^grew world 4 joined \d+ in \S+ ms at step \d+$", r"node 1's mcirun is gone"):
        if not re.search(pattern, n0, re.M):
            fails.append(f"no line matches {pattern!r}")
    if re.search(r"^step \d+ world [123] ", n0, re.M):
        fails.append("a step ran on fewer than 4 ranks")
    got = re.findall(r"^final rank (\d+) world (\d+) sum \S+ bits (\S+)$", n0, re.M)
    if sorted(int(r) for r, _, _ in got) != [0, 1, 2, 3] or any(w != "4" or b not in want for _, w, b in got):
        fails.append(f"finals {got}, want ranks 0..3 of world 4 with the bits {want} of the run never interrupted")
    if fails:
        fails.append(f"--- node 0:\n{n0}")
    return fails


def main():
    if sys.argv[1] == "never_grows":
        return never_grows()
    mcirun, cpp = sys.argv[1], sys.argv[2]
    scenario = sys.argv[3] if len(sys.argv) > 3 else "in_place"
    if scenario == "same_bits":
        fails = same_bits_after_replace(mcirun)
        if fails:
            print("\n".join(fails))
            return 1
        print("passed: node 1 lost, its ranks replaced on node 0, every rank ends with the uninterrupted run's bits")
        return 0
    if scenario == "no_join":
        started = time.monotonic()
        # One replacement (--max-restarts=1): rank 0 leaves once it has gone.
        p = launch(mcirun, [os.path.abspath(__file__), "never_grows"], 2, "replace", timeout=120,
                   flags=["--max-restarts=1"])
        out = p.stdout + p.stderr
        fails = [f"no {t!r}" for t in (
            "join_running_group: no member of the running group took this process within 3s",
            "rank 0: the replacement has gone",
            "--on-rank-loss=replace: started pid ") if t not in out]
        if "(replacement 2)" in out:
            fails.append("a second replacement was started")
        if fails:
            print("\n".join(fails) + "\n--- output:\n" + out)
            return 1
        print(f"passed: the replacement ended within its join timeout; the job ended after "
              f"{time.monotonic() - started:.1f} s with {p.returncode}")
        return 0
    ref = subprocess.run([mcirun, "--standalone", "--nproc_per_node=2", cpp, "--steps", str(STEPS)],
                         capture_output=True, text=True, timeout=120)
    want = float(re.search(r"final rank 0 world 2 sum (\S+)", ref.stdout).group(1))
    common = [EXAMPLE, "--steps", str(STEPS), "--step-ms", "10"]
    if scenario == "in_place":
        p = launch(mcirun, common + ["--die", "1@3:collective", "--die", "2@6:backward"], 3, "continue")
        fails, rec = check_run(p, want, ["1", "2"], [("2", "1", "3"), ("1", "1", "6")], 1)
    elif scenario == "rank0":
        p = launch(mcirun, common + ["--die", "0@3:collective"], 3, "continue")
        fails, rec = check_run(p, want, ["0"], [("2", "0", "3")], 2)
    elif scenario == "replace":
        p = launch(mcirun, common + ["--die", "1@3:collective", "--wait-joiners-at", "5"], 3, "replace")
        fails, rec = check_run(p, want, ["1"], [("2", "1", "3")], 3,
                               [r"^joined as rank 2 of world 3 at step 5$", r"^grew world 3 joined 1 in \S+ ms at step 5$",
                                r"replaced by pid \d+ \(replacement 1\)"])
    elif scenario == "etcd_node0":
        # Steps long enough for node 0 to be killed mid-training.
        fails = node_lost_on_etcd(mcirun, [EXAMPLE, "--steps", str(STEPS), "--step-ms", "300"], want)
        if fails:
            print("\n".join(fails))
            return 1
        print(f"passed: node 0 lost on etcd, node 1 ended at world 2 with the sum {want:.12e} (uninterrupted)")
        return 0
    else:
        print(f"unknown scenario {scenario!r}")
        return 2
    if fails:
        print("\n".join(fails) + "\n--- output:\n" + p.stdout + p.stderr)
        return 1
    print(f"passed: {rec}, every final sum {want:.12e} (uninterrupted)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
