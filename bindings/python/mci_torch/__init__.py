"""mci as a torch.distributed backend for CPU tensors.

    import mci_torch
    dist.init_process_group("mci")          # under mcirun, torchrun or srun
    sub = dist.new_group([0, 1], backend="mci")

docs/pytorch.md has the details: what each operation does, what differs
from gloo, and the errors."""

from .errors import ConfigError, MciError, MismatchError, PeerError, TimeoutError
from .process_group import ProcessGroupMCI, create_process_group, monitored_barrier

__all__ = [
    "ConfigError",
    "MciError",
    "MismatchError",
    "PeerError",
    "ProcessGroupMCI",
    "TimeoutError",
    "create_process_group",
    "monitored_barrier",
]


def _register():
    import torch.distributed as dist

    if hasattr(dist.Backend, "MCI"):  # imported twice (e.g. reloaded)
        return
    try:
        dist.Backend.register_backend("mci", create_process_group, devices=["cpu"])
    except TypeError:  # torch before 2.1 takes no devices
        dist.Backend.register_backend("mci", create_process_group)


_register()

from . import _model_check  # noqa: E402 - after the package's names

_model_check.install()
