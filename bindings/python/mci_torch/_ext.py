"""The backend "mci" through the C++ extension (mci_torch._C, a
c10d::Backend built against one torch 2.x): torch calls create_backend for
every group, and runs the group's operations in C++ with no Python on
their path."""

import atexit
import os
import weakref

from . import _C
from ._rendezvous import meet

# The backends made in this process, closed at exit (before the
# interpreter's finalization) by _close_at_exit.
_backends = weakref.WeakSet()


def _close_at_exit():
    """Operations still running when the program ends are aborted (nobody
    will wait on them: a recv whose send never comes would otherwise hold
    the exit for the group's timeout), and every group is closed while its
    threads can still finish; a thread left inside torch's C++ when the
    interpreter finalizes aborts the process."""
    for backend in list(_backends):
        _C.close_at_exit(backend)


atexit.register(_close_at_exit)


def create_backend(store, rank, size, timeout):
    """The creator torch.distributed calls for backend 'mci' (torch 2.x)."""
    timeout_ms = max(1, int(timeout.total_seconds() * 1000))

    def start_server(token):
        server = _C.StoreServer("0.0.0.0", token)
        return server, server.port

    host, port, token, server = meet(store, rank, size, timeout, start_server)
    engine = os.environ.get("MCI_TORCH_ENGINE", "cpu")
    backend = _C.new_backend(store, rank, size, timeout_ms, host, port, token, server, engine, "torch", {})
    _backends.add(backend)
    return backend
