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
from .process_group import ProcessGroupMCI, create_process_group, monitored_barrier

__all__ = [
    "PATH",
    "ConfigError",
    "MciError",
    "MismatchError",
    "PeerError",
    "ProcessGroupMCI",
    "TimeoutError",
    "create_process_group",
    "monitored_barrier",
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
        from ._ext import create_backend

        return create_backend
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
        dist.Backend.register_backend("mci", creator or create_process_group, devices=["cpu"])
    except TypeError:  # torch before 2.1 takes no devices
        dist.Backend.register_backend("mci", create_process_group)
    return path


PATH = _register()


def _torch_entry_point():
    """What torch >= 2.14 calls, with no arguments, the first time a program
    names the backend "mci" without importing mci_torch: the entry point
    "mci" of the group torch.distributed.backends, which an installed wheel
    declares (pyproject.toml). torch imported this package to reach it, and
    the import registered the backend."""

from . import _model_check  # noqa: E402 - after the package's names

_model_check.install()
