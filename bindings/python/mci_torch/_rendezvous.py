"""How the ranks of a torch group find its mci store. Under mcirun, the
launcher's (MCI_STORE_HOSTED): it outlives every rank, rank 0 included, so
the survivors of a lost rank can still agree through it; each torch group
gets a name of its own there, and each rank reaches it at its own node's
address (on etcd, its node's relay). Elsewhere (torchrun, srun, a bare script),
group rank 0 hosts one for the group. Rank 0 publishes where it is through
torch's store. mci's store does what torch's cannot (hang reports,
authentication, knowing who is gone), and needs no port of its own. Both
backends (the pure-Python group and the C++ extension) meet here."""

import datetime
import os
import secrets
import socket

import torch.distributed as dist

from .errors import ConfigError, TimeoutError  # noqa: A004 - mci's

def _keys():
    """The keys of this start of the job. torchrun keeps its agent's store
    across restarts (--max-restarts) without scoping the groups' keys by
    attempt, so a rank of attempt N could read where attempt N-1's (dead)
    rank 0 had its store: the attempt (TORCHELASTIC_RESTART_COUNT) is in
    the keys."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"mci_torch/{attempt}/store", f"mci_torch/{attempt}/arrived/"


def meet(store, rank, size, timeout, start_server):
    """(host, port, token, server, group_name) of the group's mci store. On
    group rank 0 without a launcher's store, start_server(token) starts one
    and returns (server, port). The job token never goes into torch's store
    (which anyone who reaches it can read): "-" there stands for it."""
    store_key, arrived_key = _keys()
    job_token = os.environ.get("MCI_JOB_TOKEN")
    token = job_token or secrets.token_hex(16)
    store.set(f"{arrived_key}{rank}", "1")  # who came, for the error if the group never forms
    server = None
    if rank == 0:
        hosted = _launcher_store()
        if hosted:
            # The launcher's store: the job's token, or none where it has none.
            host, port = hosted
            group_name = f"torch-{secrets.token_hex(8)}"
            token = job_token or ""
        else:
            server, port = start_server(token)
            host, group_name = advertised_address(), "torch"
        # The launcher's store is published as "@": every rank reaches it at
        # its own node's address (on etcd, each node's relay; rank 0's relay
        # is not the others', and goes with its node).
        where = "@ 0" if hosted else f"{host} {port}"
        store.set(store_key, f"{where} {'-' if job_token or not token else token} {group_name}")
        return host, int(port), token, server, group_name
    where = _wait_for_rank0(store, rank, size, timeout, store_key, arrived_key)
    host, port_text, published, group_name = where.split(" ")
    if host == "@":
        hosted = _launcher_store()
        if not hosted:
            raise ConfigError("mci_torch: the group's rank 0 meets on its launcher's store, but this process has "
                              "none (MCI_STORE_HOSTED, MCI_STORE_ADDR, MCI_STORE_PORT): start every rank of the job "
                              "under the same mcirun job")
        host, port_text = hosted
    return host, int(port_text), (job_token or "") if published == "-" else published, server, group_name


def _launcher_store():
    """(host, port) of mcirun's store when it hosts one for this job."""
    if os.environ.get("MCI_STORE_HOSTED") != "1":
        return None
    host, port = os.environ.get("MCI_STORE_ADDR"), os.environ.get("MCI_STORE_PORT")
    if not host or not port:
        return None
    return host, int(port)


def advertised_address():
    """An address of this host the other ranks can reach: MCI_HOST_ADDR, else
    the one this host uses toward MASTER_ADDR (a UDP connect sends nothing),
    else the host name's."""
    if os.environ.get("MCI_HOST_ADDR"):
        return os.environ["MCI_HOST_ADDR"]
    master = os.environ.get("MASTER_ADDR")
    if master:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect((master, int(os.environ.get("MASTER_PORT", "1"))))
                return s.getsockname()[0]
        except OSError:
            pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def has_key(store, key):
    """Whether store holds key now (torch 1.13's PrefixStore has no check())."""
    try:
        store.wait([key], datetime.timedelta(milliseconds=1))
        return True
    except Exception:  # noqa: BLE001 - torch's store raises its own types
        return False


def _wait_for_rank0(store, rank, size, timeout, store_key, arrived_key):
    """Where rank 0's mci store is; if it never says, a TimeoutError
    naming the ranks that never came (torch's own is a bare 'Socket
    Timeout')."""
    try:
        store.wait([store_key], timeout)
    except Exception:  # noqa: BLE001 - torch's store raises its own types
        missing = [r for r in range(size) if not has_key(store, f"{arrived_key}{r}")]
        me = f" (global rank {dist.get_rank()})" if dist.is_initialized() else ""
        raise TimeoutError(
            f"mci_torch: creating a process group of {size} ranks, this process is its rank {rank}{me}: "
            f"group rank{'s' if len(missing) != 1 else ''} {', '.join(map(str, missing)) or '0'} never came "
            f"within {timeout.total_seconds():g}s. Every rank of the job must call new_group (or "
            "init_process_group) with the same ranks, in the same order, also the ranks outside the new "
            "group.") from None
    return store.get(store_key).decode()
