"""Replacing a lost rank in a torch job (docs/fault-tolerance.md, "From
torch"): under mcirun --on-rank-loss=replace, the process mcirun starts in
a lost rank's place joins the running group, which its members grow at a
step boundary, through torch 2.15's reconfigure contract on "mci".

    # the replacement (MCI_REPLACEMENT is set)
    mci_torch.join_running_group(timeout)
    # the members, at each step boundary
    if mci_torch.joiners_waiting():
        mci_torch.grow_group()
    # everyone, then: the state of the most advanced replica
    src, steps = mci_torch.most_advanced(steps_done)

They meet in torch's store, which mcirun's launcher hosts for such a job
(it outlives every rank), or, with the job's store on etcd, torch's store
over it (it outlives every node), under keys of this module."""

import datetime
import functools
import os

import torch
import torch.distributed as dist

from .errors import ConfigError, TimeoutError  # noqa: A004 - mci's

_PREFIX = "mci_torch/join/"
# reconfigure's uuids taken by growing, far from small ones a program may
# pass itself.
_UUID_BASE = 1 << 40


def is_replacement():
    """Whether mcirun started this process in a lost rank's place."""
    return bool(os.environ.get("MCI_REPLACEMENT"))


def _store(timeout):
    """A client of torch's store outside the ranks: the launcher's, or, when
    the job's store is on etcd, torch's store over it (_torch_store.py), so
    a join outlives node 0 too. Elsewhere there is none to meet in. One
    connection per process (joiners_waiting asks at every step boundary),
    its timeout set per use."""
    from . import _torch_store

    if _torch_store.wanted():
        store = _mci_client()
    elif os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        raise ConfigError("mci_torch: replacing ranks needs torch's store outside the ranks: run the job under "
                          "mcirun --on-rank-loss=replace, whose launcher hosts it (TORCHELASTIC_USE_AGENT_STORE=True)")
    else:
        store = _client(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
    store.set_timeout(timeout)
    return store


@functools.lru_cache(maxsize=None)
def _client(host, port):
    return dist.TCPStore(host, port, is_master=False, timeout=datetime.timedelta(seconds=60))


@functools.lru_cache(maxsize=None)
def _mci_client():
    from . import _torch_store

    return _torch_store.client(datetime.timedelta(seconds=60))


def _check_reconfigure():
    if not hasattr(dist, "_reconfigure"):
        raise ConfigError(f"mci_torch: replacing ranks of a torch group needs torch's reconfigure contract "
                          f"(torch 2.15 or newer); this is torch {torch.__version__}: use mcirun --max-restarts instead")


def join_running_group(timeout=datetime.timedelta(minutes=5)):
    """For the replacement: makes the default group ("mci", with
    enable_reconfigure=True), offers this process to the running group and
    waits, at most `timeout`, until its members grow the group with it.
    Then this process is the group's last rank. Raises mci_torch.TimeoutError
    when nobody takes it in time (no member left, or a program whose
    members never call joiners_waiting()/grow_group())."""
    _check_reconfigure()
    if not dist.is_initialized():
        dist.init_process_group("mci", enable_reconfigure=True, timeout=timeout)
    store = _store(timeout)
    n = store.add(_PREFIX + "count", 1)
    store.set(f"{_PREFIX}{n}/handle", dist._get_reconfigure_handle())
    try:
        store.wait([f"{_PREFIX}{n}/decision"], timeout)
    except Exception:  # noqa: BLE001 - torch's store raises its own types
        raise TimeoutError(
            f"mci_torch: join_running_group: no member of the running group took this process within "
            f"{timeout.total_seconds():g}s: no member is left, or the program's members never offer a join "
            "(they call mci_torch.joiners_waiting() and grow_group() at step boundaries). This replacement ends "
            "here.") from None
    uuid, *handles = store.get(f"{_PREFIX}{n}/decision").decode().split("\n")
    dist._reconfigure(int(uuid), handles, timeout=timeout).wait()


def joiners_waiting(group=None):
    """Collective over the group's members: whether replacements wait to
    join (rank 0 asks the store, every member gets its answer)."""
    rank0 = dist.get_rank(group) == 0
    waiting = 0
    if rank0:
        store = _store(datetime.timedelta(seconds=60))
        waiting = store.add(_PREFIX + "count", 0) - store.add(_PREFIX + "taken", 0)
    flag = torch.tensor([waiting], dtype=torch.int64)
    dist.broadcast(flag, group_src=0, group=group)
    return bool(flag.item())


def grow_group(group=None, timeout=None):
    """Collective over the group's members, once joiners_waiting() said so:
    the group becomes its members (ranks kept) and the replacements waiting
    now (the next ranks, in the order they came), by dist._reconfigure.
    Returns how many joined."""
    _check_reconfigure()
    handles = [None] * dist.get_world_size(group)
    dist.all_gather_object(handles, dist._get_reconfigure_handle(group), group=group)
    decision = [None]
    if dist.get_rank(group) == 0:
        store = _store(timeout or datetime.timedelta(seconds=60))
        count = store.add(_PREFIX + "count", 0)
        taken = store.add(_PREFIX + "taken", 0)
        # A joiner counted but not yet written its handle: taken next time.
        joiners = []
        for i in range(taken + 1, count + 1):
            if not store.check([f"{_PREFIX}{i}/handle"]):
                break
            joiners.append(i)
        uuid = _UUID_BASE + store.add(_PREFIX + "uuid", 1)
        everyone = handles + [store.get(f"{_PREFIX}{i}/handle").decode() for i in joiners]
        text = "\n".join([str(uuid)] + everyone)
        for i in joiners:
            store.set(f"{_PREFIX}{i}/decision", text)
        store.add(_PREFIX + "taken", len(joiners))
        decision = [text]
    dist.broadcast_object_list(decision, group_src=0, group=group)
    uuid, *everyone = decision[0].split("\n")
    dist._reconfigure(int(uuid), everyone, group=group, timeout=timeout).wait()
    return len(everyone) - len(handles)


def most_advanced(steps_done, group=None):
    """Collective: (rank, steps) of the member that completed the most steps
    (the lowest such rank), for it to broadcast its model and optimizer
    state: a step some member finished counts, one nobody finished is
    redone. A replacement passes 0."""
    most = torch.tensor([steps_done], dtype=torch.int64)
    dist.all_reduce(most, op=dist.ReduceOp.MAX, group=group)
    me = dist.get_rank(group)
    src = torch.tensor([me if steps_done == most.item() else dist.get_world_size(group)], dtype=torch.int64)
    dist.all_reduce(src, op=dist.ReduceOp.MIN, group=group)
    return int(src.item()), int(most.item())
