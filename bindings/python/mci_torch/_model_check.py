"""DDP's model check on an mci group: every rank raises, naming the first
parameter whose shape or dtype differs between the ranks.

Why: torch's own check (_verify_param_shape_across_processes) compares each
rank with rank 0 on that rank alone, so rank 0 never fails: it goes on to
broadcast its parameters and waits there for ranks that already raised,
until the group's timeout (30 minutes by default). mci_torch wraps that
function, for mci groups only, with a check whose verdict every rank
computes from the same gathered table; torch's check then runs as before."""

import functools

import torch
import torch.distributed as dist

from .errors import ConfigError

# A dtype's number in the gathered table (any other dtype: its position past these).
_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
           torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]
_PAD = -7


def _encode(params):
    row = [len(params)]
    for p in params:
        row += [_DTYPES.index(p.dtype) if p.dtype in _DTYPES else len(_DTYPES), p.dim(), *p.shape]
    return row


def _decode(row):
    count, i, params = int(row[0]), 1, []
    for _ in range(count):
        code, dims = int(row[i]), int(row[i + 1])
        dtype = _DTYPES[code] if code < len(_DTYPES) else "another dtype"
        params.append((tuple(int(d) for d in row[i + 2:i + 2 + dims]), dtype))
        i += 2 + dims
    return params


def _describe(param):
    shape, dtype = param
    return f"{list(shape)} {str(dtype).replace('torch.', '')}"


def check_same_model(group, params):
    """Raises ConfigError on every rank of group if the ranks' params differ."""
    mine = torch.tensor(_encode(params), dtype=torch.int64)
    longest = torch.tensor([mine.numel()], dtype=torch.int64)
    dist.all_reduce(longest, op=dist.ReduceOp.MAX, group=group)
    row = torch.full((int(longest.item()),), _PAD, dtype=torch.int64)
    row[: mine.numel()] = mine
    world = dist.get_world_size(group)
    rows = [torch.empty_like(row) for _ in range(world)]
    dist.all_gather(rows, row, group=group)
    models = [_decode(r.tolist()) for r in rows]
    for r in range(1, world):
        a, b = models[0], models[r]
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b) or a[i] != b[i]:
                on0 = _describe(a[i]) if i < len(a) else "absent"
                onr = _describe(b[i]) if i < len(b) else "absent"
                raise ConfigError(
                    f"mci_torch: DistributedDataParallel needs the same model on every rank, but parameter {i} "
                    f"is {on0} on rank 0 and {onr} on rank {r} (rank 0 has {len(a)} parameters, rank {r} "
                    f"{len(b)}). Build the same model on every rank before wrapping it."
                )


def install():
    """Wraps DDP's model check (torch.nn.parallel.distributed's name for it)."""
    try:
        import torch.nn.parallel.distributed as ddp_module
    except ImportError:
        return
    original = getattr(ddp_module, "_verify_param_shape_across_processes", None)
    if original is None or getattr(original, "_mci_wrapped", False):
        return
    from .process_group import ProcessGroupMCI

    def is_mci(process_group):
        if isinstance(process_group, ProcessGroupMCI):
            return True
        try:  # a torch ProcessGroup over the C++ backend
            import torch.distributed as dist

            return dist.get_backend(process_group) == "mci"
        except Exception:  # noqa: BLE001 - not a group torch knows
            return False

    @functools.wraps(original)
    def verify(process_group, tensors, *args, **kwargs):
        if is_mci(process_group):
            check_same_model(process_group, list(tensors))
        return original(process_group, tensors, *args, **kwargs)

    verify._mci_wrapped = True
    ddp_module._verify_param_shape_across_processes = verify
