"""How the ranks of a torch group find its mci store: group rank 0 hosts
one and publishes where it is through torch's store. mci's store does what
torch's cannot (hang reports, authentication), and needs no port of its
own. Both backends (the pure-Python group and the C++ extension) meet here."""

import datetime
import os
import secrets
import socket

import torch.distributed as dist

from .errors import TimeoutError  # noqa: A004 - mci's

def _keys():
    """The keys of this start of the job. torchrun keeps its agent's store
    across restarts (--max-restarts) without scoping the groups' keys by
    attempt, so a rank of attempt N could read where attempt N-1's (dead)
    rank 0 had its store: the attempt (TORCHELASTIC_RESTART_COUNT) is in
    the keys."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return f"mci_torch/{attempt}/store", f"mci_torch/{attempt}/arrived/"


def meet(store, rank, size, timeout, start_server):
    """(host, port, token, server) of the group's mci store. On group rank 0,
    start_server(token) starts it and returns (server, port)."""
    store_key, arrived_key = _keys()
    token = os.environ.get("MCI_JOB_TOKEN") or secrets.token_hex(16)
    store.set(f"{arrived_key}{rank}", "1")  # who came, for the error if the group never forms
    server = None
    if rank == 0:
        server, port = start_server(token)
        where = f"{advertised_address()} {port} {token}"
        store.set(store_key, where)
    else:
        where = _wait_for_rank0(store, rank, size, timeout, store_key, arrived_key)
    host, port_text, token = where.split(" ")
    return host, int(port_text), token, server


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
