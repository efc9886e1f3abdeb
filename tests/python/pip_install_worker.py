"""One rank of tests/python/pip_install.py's job, run by the venv's mcirun
with the venv's python: names the backend "mci" without importing
mci_torch, so that only torch's entry point (group
torch.distributed.backends, declared by the wheel) can register it, then
checks an all_reduce. Rank 0 then says where mci_torch came from (a line
"mci_torch: {json}", which pip_install.py checks)."""

import importlib.metadata
import importlib.util
import json
import sys

import torch
import torch.distributed as dist

if "mci_torch" in sys.modules:
    sys.exit("mci_torch was imported before init_process_group: the entry point would not be tested")
dist.init_process_group("mci")
rank, size = dist.get_rank(), dist.get_world_size()
if "mci_torch" not in sys.modules:
    sys.exit(f"rank {rank}: init_process_group('mci') worked but mci_torch was never imported")
mci_torch = sys.modules["mci_torch"]

t = torch.tensor([rank + 1.0, 10.0 * (rank + 1)])
dist.all_reduce(t)
want = [sum(range(1, size + 1)) * 1.0, sum(10.0 * r for r in range(1, size + 1))]
if t.tolist() != want:
    sys.exit(f"rank {rank}: all_reduce gave {t.tolist()}, want {want}")
print(f"rank {rank}: backend {dist.get_backend()} through the entry point, PATH={mci_torch.PATH}, "
      f"from {mci_torch.__file__}, all_reduce {t.tolist()}", flush=True)
if rank == 0:
    import mci_torch._libpath  # after init_process_group: see above

    ext = importlib.util.find_spec("mci_torch._C")
    print("mci_torch: " + json.dumps(dict(path=mci_torch.PATH, file=mci_torch.__file__, ext=ext and ext.origin,
                                          lib=mci_torch._libpath.LIBRARY, version=importlib.metadata.version("mci"))),
          flush=True)
dist.destroy_process_group()
