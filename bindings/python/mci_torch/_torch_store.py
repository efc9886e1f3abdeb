"""torch's own store off node 0. Under mcirun with the job's store on etcd
(--rdzv_backend=etcd-v2), mcirun sets MCI_TORCH_STORE=mci: init_process_group's
env:// then meets on torch's store over mci's store (mci_torch._C.torch_store,
a c10d::Store), reached at this node's relay, which writes through to etcd.
Losing any node, node 0 included, leaves it serving the survivors: init's
keys, the groups they make, a shrunk group's store, a replacement's join.
Elsewhere env:// is torch's own (a TCPStore on MASTER_ADDR:MASTER_PORT).

    dist.init_process_group("mci")                      # env://, as always
    dist.init_process_group("mci", init_method="mci://")  # ask for it by name

The scheme mci:// asks for it under any mcirun job (its store on etcd or on
node 0's mcirun). torch 2.x with mci's C++ backend (PATH == "ext") only."""

import datetime
import importlib
import os
from urllib.parse import parse_qs, urlparse

from .errors import ConfigError

_DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)


def wanted():
    """Whether mcirun asked for torch's store over mci's (its store is on etcd)."""
    return os.environ.get("MCI_TORCH_STORE") == "mci"


def client(timeout=_DEFAULT_TIMEOUT):
    """A new torch.distributed.Store over the job's mci store, its keys those
    of this start of the job (TORCHELASTIC_RESTART_COUNT: a restart must not
    read the keys of the one before, as torchrun's fresh agent store does
    not)."""
    from . import _C

    host, port = os.environ.get("MCI_STORE_ADDR"), os.environ.get("MCI_STORE_PORT")
    if os.environ.get("MCI_STORE_HOSTED") != "1" or not host or not port:
        raise ConfigError("mci_torch: torch's store over mci's needs the store of an mcirun job (MCI_STORE_ADDR, "
                          "MCI_STORE_PORT); run the program under mcirun, or use init_method='env://'")
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    ms = max(1, int(timeout.total_seconds() * 1000))
    return _C.torch_store(host, int(port), os.environ.get("MCI_JOB_TOKEN", ""), f"torch/{attempt}", ms)


def _rendezvous(url, timeout=_DEFAULT_TIMEOUT, **kwargs):
    """torch's rendezvous handler for mci:// (and for env:// when wanted()):
    rank and world size from the URL's query, else RANK and WORLD_SIZE."""
    del kwargs
    query = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}

    def number(name, var):
        text = query.get(name, os.environ.get(var))
        if text is None:
            raise ValueError(f"mci:// rendezvous: {name} is neither in the URL nor in the environment ({var})")
        return int(text)

    rank, world_size = number("rank", "RANK"), number("world_size", "WORLD_SIZE")
    yield client(timeout), rank, world_size
    raise RuntimeError("Unable to perform re-rendezvous using mci:// method")


def install():
    """Registers mci:// and routes env:// to it when wanted(); other programs'
    env:// is left as torch has it."""
    # The module: torch.distributed's attribute "rendezvous" is its function.
    rdzv = importlib.import_module("torch.distributed.rendezvous")
    handlers = getattr(rdzv, "_rendezvous_handlers", None)
    if handlers is None:  # a torch whose registry moved: mci:// alone
        return
    if "mci" not in handlers:
        rdzv.register_rendezvous_handler("mci", _rendezvous)
    env = handlers.get("env")
    if env is None or getattr(env, "_mci", False):
        return

    def env_or_mci(url, timeout=_DEFAULT_TIMEOUT, **kwargs):
        if wanted():
            return _rendezvous(url, timeout, **kwargs)
        return env(url, timeout, **kwargs)

    env_or_mci._mci = True
    # torch's registry refuses a second handler for a scheme: replace it in
    # place, keeping torch's for every job that does not ask.
    handlers["env"] = env_or_mci
