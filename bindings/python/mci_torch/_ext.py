"""The backend "mci" through the C++ extension (mci_torch._C, a
c10d::Backend built against one torch 2.x): torch calls create_backend for
every group, and runs the group's operations in C++ with no Python on
their path."""

import atexit
import os

from . import _C, _torch_store
from ._rendezvous import advertised_address, meet
from .options import Options

_torch_store.install()

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
    init_process_group("mci") does, and as its only one (a group with two
    backend types refuses torch's reconfigure); other backends are left as
    they are."""
    from torch.distributed import distributed_c10d as c10d

    create = getattr(c10d, "_create_shrunk_process_group", None)
    if create is None or getattr(create, "_mci", False):
        return
    pg_class = c10d.ProcessGroup
    gloo, custom = pg_class.BackendType.GLOO, pg_class.BackendType.CUSTOM

    def create_shrunk(new_backend, *args, **kwargs):
        if new_backend.name() != "mci":
            return create(new_backend, *args, **kwargs)
        register, set_default = pg_class._register_backend, pg_class._set_default_backend

        def register_custom(self, device, backend_type, backend):
            return register(self, device, custom if backend_type == gloo else backend_type, backend)

        def set_default_custom(self, backend_type):
            return set_default(self, custom if backend_type == gloo else backend_type)

        # For the length of this call only (shrinking is collective: the
        # program is at one place).
        pg_class._register_backend, pg_class._set_default_backend = register_custom, set_default_custom
        try:
            return create(new_backend, *args, **kwargs)
        finally:
            pg_class._register_backend, pg_class._set_default_backend = register, set_default

    create_shrunk._mci = True
    c10d._create_shrunk_process_group = create_shrunk


_register_shrunk_as_custom()


def _ddp_logging_names_mci():
    """DDP's logging data takes the backend's name from torch's C++
    ProcessGroup, which knows a registered backend only as "custom"; tools
    that read it (and torch's own tests) expect dist.get_backend()'s name.
    Wrap DistributedDataParallel._get_ddp_logging_data so that a group
    whose backend is mci's says "mci"; other groups are left as they are."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    get = getattr(DDP, "_get_ddp_logging_data", None)
    if get is None or getattr(get, "_mci", False):
        return

    def get_data(self):
        data = get(self)
        if data.get("backend_name") == "custom":
            import torch.distributed as dist

            try:
                name = dist.get_backend(self.process_group)
            except (RuntimeError, ValueError):
                name = None
            if name == "mci":
                data["backend_name"] = "mci"
        return data

    get_data._mci = True
    get_data.__doc__ = get.__doc__
    DDP._get_ddp_logging_data = get_data


_ddp_logging_names_mci()


def create_backend(store, rank, size, timeout, engine=None, settings=None, enable_reconfigure=False,
                   global_ranks=None):
    """The creator torch.distributed calls for backend 'mci' (torch 2.x),
    and split_group's: engine and settings are the parent group's. With
    enable_reconfigure the group has no members until dist._reconfigure():
    nobody meets now. global_ranks: torch's global_ranks_in_group (the
    names of the flight recorder's dump files; empty: the default group)."""
    timeout_ms = max(1, int(timeout.total_seconds() * 1000))

    def start_server(token):
        server = _C.StoreServer("0.0.0.0", token)
        return server, server.port

    if enable_reconfigure:
        host, port, token, server, group_name = "", 0, "", None, "torch"
    else:
        host, port, token, server, group_name = meet(store, rank, size, timeout, start_server)
    engine = engine or os.environ.get("MCI_TORCH_ENGINE", "cpu")
    return _C.new_backend(store, rank, size, timeout_ms, host, port, token, server, engine, group_name,
                          dict(settings or {}), enable_reconfigure, advertised_address(),
                          [int(r) for r in (global_ranks or [])])


def create_backend_extended(opts, pg_options):
    """The creator torch calls with its extended arguments (register_backend's
    extended_api): pg_options (mci_torch.Options or a dict of settings) set
    this group's engine, timeout and mci settings; enable_reconfigure=True
    makes a group that waits for dist._reconfigure()."""
    options = Options.of(pg_options)
    return create_backend(opts.store, opts.group_rank, opts.group_size, options.timeout or opts.timeout,
                          options.engine, options.settings, bool(getattr(opts, "enable_reconfigure", False)),
                          list(getattr(opts, "global_ranks_in_group", None) or []))
