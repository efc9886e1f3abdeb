#!/usr/bin/env python3
"""all_reduce sweep through torch.distributed, for side-by-side runs with
mci-perf (same sizes, same iteration counts, same timing).

One process, world of 1 (a machine with one GPU cannot hold an NCCL group of
two): it measures what a framework adds around NCCL, per call.
  python3 bench/peers/torch_perf.py --backend nccl -b 8 -e 256M -f 4 -n 20 -w 5 -z 1
-z 1: each call waited before the next (as mci-perf -z 1); -z 0: back to back.
Time per call from CUDA events on the current stream around the timed loop
(device buffers), or a steady clock (host buffers).
"""
import argparse
import os
import tempfile
import time

import torch
import torch.distributed as dist


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="nccl")
    p.add_argument("-b", type=size_arg, default=8)
    p.add_argument("-e", type=size_arg, default=32 << 20)
    p.add_argument("-f", type=int, default=2)
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-w", type=int, default=5)
    p.add_argument("-z", type=int, default=1)
    a = p.parse_args()
    cuda = a.backend == "nccl"
    if cuda:
        torch.cuda.set_device(0)
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group(a.backend, init_method="file://" + os.path.join(d, "rdzv"), rank=0, world_size=1)
        dev = "cuda" if cuda else "cpu"
        print(f"# torch {torch.__version__} backend={a.backend} nccl={torch.cuda.nccl.version() if cuda else '-'} "
              f"world=1 blocking={a.z}")
        print(f"# {'size':>12} {'count':>12} {'type':>6} {'time_us':>10} {'algbw_GB/s':>11}")
        size = a.b
        while size <= a.e:
            n = max(size // 4, 1)
            x = torch.ones(n, dtype=torch.float32, device=dev)

            def call():
                w = dist.all_reduce(x, async_op=True)
                if a.z:
                    w.wait()
                    if cuda:
                        torch.cuda.synchronize()
                return w

            for _ in range(a.w):
                call()
            if cuda:
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for _ in range(a.n):
                    call()
                e.record()
                e.synchronize()
                us = s.elapsed_time(e) * 1e3 / a.n
            else:
                t0 = time.perf_counter()
                for _ in range(a.n):
                    call().wait()
                us = (time.perf_counter() - t0) * 1e6 / a.n
            print(f"  {n * 4:>12} {n:>12} {'float':>6} {us:>10.2f} {n * 4 / us / 1e3:>11.2f}")
            size *= a.f
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
