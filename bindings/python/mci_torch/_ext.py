"""The backend "mci" through the C++ extension (mci_torch._C, a
c10d::Backend built against one torch 2.x): torch calls create_backend for
every group, and runs the group's operations in C++ with no Python on
their path."""

import atexit
import os

from . import _C
from ._rendezvous import meet

def _close_at_exit():
    """Operations still running when the program ends are aborted (nobody
    will wait on them: a recv whose send never comes would otherwise hold
    the exit for the group's timeout), and every group is closed while its
    threads can still finish; a thread left inside torch's C++ when the
    interpreter finalizes aborts the process."""
    _C.close_at_exit()


atexit.register(_close_at_exit)


def create_backend(store, rank, size, timeout):
    """The creator torch.distributed calls for backend 'mci' (torch 2.x)."""
    timeout_ms = max(1, int(timeout.total_seconds() * 1000))

    def start_server(token):
        server = _C.StoreServer("0.0.0.0", token)
        return server, server.port

    host, port, token, server = meet(store, rank, size, timeout, start_server)
    engine = os.environ.get("MCI_TORCH_ENGINE", "cpu")
    return _C.new_backend(store, rank, size, timeout_ms, host, port, token, server, engine, "torch", {})
