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


def _register_shrunk_as_custom():
    """torch 2.15's shrink_group registers the shrunk group's backend as
    GLOO (it knows only its own backends); DDP's logger then takes mci's
    backend for Gloo's and crashes. Wrap the step that registers it, so an
    mci backend is registered as what it is, a custom backend, as
    init_process_group("mci") does; other backends are left as they are."""
    import torch
    from torch.distributed import distributed_c10d as c10d

    create = getattr(c10d, "_create_shrunk_process_group", None)
    if create is None or getattr(create, "_mci", False):
        return

    def create_shrunk(new_backend, *args, **kwargs):
        pg = create(new_backend, *args, **kwargs)
        if new_backend.name() == "mci":
            custom = c10d.ProcessGroup.BackendType.CUSTOM
            pg._register_backend(torch.device("cpu"), custom, new_backend)
            pg._set_default_backend(custom)
        return pg

    create_shrunk._mci = True
    c10d._create_shrunk_process_group = create_shrunk


_register_shrunk_as_custom()


def create_backend(store, rank, size, timeout):
    """The creator torch.distributed calls for backend 'mci' (torch 2.x)."""
    timeout_ms = max(1, int(timeout.total_seconds() * 1000))

    def start_server(token):
        server = _C.StoreServer("0.0.0.0", token)
        return server, server.port

    host, port, token, server = meet(store, rank, size, timeout, start_server)
    engine = os.environ.get("MCI_TORCH_ENGINE", "cpu")
    return _C.new_backend(store, rank, size, timeout_ms, host, port, token, server, engine, "torch", {})
