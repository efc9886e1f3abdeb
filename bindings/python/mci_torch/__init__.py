"""mci as a torch.distributed backend for CPU tensors.

    import mci_torch
    dist.init_process_group("mci")          # under mcirun, torchrun or srun
    sub = dist.new_group([0, 1], backend="mci")

On torch 2.x the backend is mci_torch._C, a c10d::Backend compiled against
the torch mci was built for; elsewhere (torch 1.13, a torch it was not built
for, or MCI_TORCH_PATH=python) the pure-Python ProcessGroupMCI. PATH says
which one this process uses ("ext" or "python").

docs/pytorch.md has the details: what each operation does, what differs
from gloo, and the errors."""

import os
import warnings

from .errors import ConfigError, MciError, MismatchError, PeerError, TimeoutError
from ._join import grow_group, is_replacement, join_running_group, joiners_waiting, most_advanced
from .options import Options
from .process_group import ProcessGroupMCI, create_process_group, monitored_barrier

__all__ = [
    "PATH",
    "ConfigError",
    "MciError",
    "MismatchError",
    "Options",
    "PeerError",
    "ProcessGroupMCI",
    "TimeoutError",
    "create_process_group",
    "dump_flight_recorder",
    "grow_group",
    "is_replacement",
    "join_running_group",
    "joiners_waiting",
    "most_advanced",
    "monitored_barrier",
    "shrink_group",
]


def _extension_creator():
    """The extension's creator, or None (with the reason as a warning when
    the extension is there but cannot serve this torch)."""
    import torch

    wanted = os.environ.get("MCI_TORCH_PATH", "auto")
    if wanted not in ("auto", "ext", "python"):
        raise ImportError(f"mci_torch: MCI_TORCH_PATH={wanted!r}: use auto, ext or python")
    if wanted == "python" or int(torch.__version__.split(".")[0]) < 2:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    built = any(n.startswith("_C.") and n.endswith(".so") for n in os.listdir(here))
    why = None
    if not built:
        why = "this mci was built without it (no torch 2.x found at configure)"
    else:
        try:
            from . import _C
        except ImportError as e:  # an undefined symbol: another torch, or another Python
            why = f"it does not load ({str(e).splitlines()[0]})"
        else:
            if _C.TORCH_VERSION != torch.__version__:
                why = f"it was built for torch {_C.TORCH_VERSION}, this is torch {torch.__version__}"
    if why is None:
        from ._ext import create_backend_extended

        return create_backend_extended
    if wanted == "ext":
        raise ImportError(f"mci_torch: MCI_TORCH_PATH=ext, but the C++ extension cannot serve: {why}; rebuild mci "
                          "against this torch")
    if built:
        warnings.warn(f"mci_torch: the C++ backend cannot serve: {why}; rebuild mci against this torch. "
                      "Using the pure-Python backend.", stacklevel=3)
    return None


def _register():
    import torch.distributed as dist

    creator = _extension_creator()
    path = "ext" if creator is not None else "python"
    if hasattr(dist.Backend, "MCI"):  # imported twice (e.g. reloaded)
        return path
    try:
        if creator is not None:
            # The extended arguments carry pg_options (mci_torch.Options).
            dist.Backend.register_backend("mci", creator, extended_api=True, devices=["cpu"])
        else:
            dist.Backend.register_backend("mci", create_process_group, devices=["cpu"])
    except TypeError:  # torch before 2.1 takes no devices
        dist.Backend.register_backend("mci", create_process_group)
    return path


PATH = _register()


def shrink_group(group=None):
    """Goes on without the ranks that were lost (docs/fault-tolerance.md,
    "In place"): every surviving rank of `group` (default: the whole world)
    calls it, typically after a PeerError; they agree through mci's store on
    which ranks' processes ended and form the group of the others, ranks
    renumbered in their old order. Returns (new_group, lost ranks); the new
    group replaces the default group when `group` was it, as torch's
    shrink_group does. Wrap the model in DDP again on it.

    Torch 2.x with the C++ backend (PATH == "ext"): the agreement, then
    torch.distributed.shrink_group with the lost ranks (its own API, on
    mci's shrink). Group rank 0 hosts the group's mci store: it must be
    among the survivors."""
    import torch
    import torch.distributed as dist

    if PATH != "ext" or not hasattr(dist, "shrink_group"):
        raise ConfigError(
            f"mci_torch.shrink_group needs torch.distributed.shrink_group and mci's C++ backend (torch "
            f"{torch.__version__}, mci_torch.PATH={PATH!r}): use torch 2.15 or later with mci built for it, or "
            "restart the job (mcirun --max-restarts) to go on after a lost rank")
    from . import _C

    pg = group if group is not None else dist.group.WORLD
    lost = list(_C.agree_lost(pg._get_backend(torch.device("cpu"))))
    if not lost:
        raise ConfigError("mci_torch.shrink_group: no rank of the group was lost (the error came from a peer that "
                          "is still alive); this group is aborted: make a new one (init_process_group) or restart")
    # mci_torch._ext registers the shrunk backend as a custom one (torch's
    # shrink_group would say Gloo).
    return dist.shrink_group(lost, group=group), lost


def dump_flight_recorder(prefix=None, group=None):
    """Writes this process's mci flight recorder in torch's flight-recorder
    format, which torch's torchfrtrace analyses (docs/troubleshooting.md,
    "Reading mci's records with torchfrtrace"): every mci group of the
    process in one file, <prefix><global rank>; returns its path. prefix
    None: MCI_FR_DUMP_DIR's (its files are mci_trace_rank_<rank>), else
    TORCH_FR_DUMP_TEMP_FILE; neither set is a ConfigError. group: any mci
    group of the process (default: the whole world); it names the file by
    this process's global rank. A timeout writes the same file on every
    rank by itself when one of those variables is set.

    Torch 2.x with the C++ backend (PATH == "ext") only."""
    import torch
    import torch.distributed as dist

    if PATH != "ext":
        raise ConfigError(f"mci_torch.dump_flight_recorder needs mci's C++ backend (mci_torch.PATH={PATH!r}, torch "
                          f"{torch.__version__}): use torch 2.x with mci built for it")
    from . import _C

    pg = group if group is not None else dist.group.WORLD
    return _C.dump_flight_recorder(pg._get_backend(torch.device("cpu")), prefix or "")


def _torch_entry_point():
    """What torch >= 2.14 calls, with no arguments, the first time a program
    names the backend "mci" without importing mci_torch: the entry point
    "mci" of the group torch.distributed.backends, which an installed wheel
    declares (pyproject.toml). torch imported this package to reach it, and
    the import registered the backend."""

from . import _model_check  # noqa: E402 - after the package's names

_model_check.install()
