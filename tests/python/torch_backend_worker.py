"""One rank of the mci_torch tests, run under mcirun: the scenario named on
the command line asserts what every rank sees and exits non-zero if not."""

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

import mci_torch
import torch_batch

R = dist.ReduceOp
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32,
          torch.int64, torch.bool]
OPS = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR]


def value(rank, dtype, n=7):
    """Small values every rank can compute for every other rank."""
    base = torch.arange(n, dtype=torch.int64) + rank + 1
    if dtype == torch.bool:
        return (base % 2 == 0)
    if dtype in (torch.int8, torch.uint8):
        base = base % 5 + 1
    return base.to(dtype)


def expected_reduce(op, dtype, world):
    vals = [value(r, dtype) for r in range(world)]
    if dtype == torch.bool:
        as_int = [v.to(torch.int64) for v in vals]
        if op in (R.SUM, R.MAX, R.BOR):
            return torch.stack(as_int).max(0).values.bool()
        if op in (R.PRODUCT, R.MIN, R.BAND):
            return torch.stack(as_int).min(0).values.bool()
        acc = as_int[0]
        for v in as_int[1:]:
            acc = acc ^ v
        return acc.bool()
    wide = [v.to(torch.float64 if dtype.is_floating_point else torch.int64) for v in vals]
    if op == R.SUM:
        out = sum(wide)
    elif op == R.AVG:
        out = sum(wide) / world if dtype.is_floating_point else sum(wide) // world
    elif op == R.PRODUCT:
        out = wide[0]
        for v in wide[1:]:
            out = out * v
    elif op == R.MIN:
        out = torch.stack(wide).min(0).values
    elif op == R.MAX:
        out = torch.stack(wide).max(0).values
    else:
        f = {R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or, R.BXOR: torch.bitwise_xor}[op]
        out = wide[0]
        for v in wide[1:]:
            out = f(out, v)
    return out.to(dtype)


def close(a, b, dtype):
    if dtype in (torch.float16, torch.bfloat16):
        return torch.allclose(a.double(), b.double(), rtol=1e-2, atol=1e-2)
    if dtype.is_floating_point:
        return torch.allclose(a, b, rtol=1e-6)
    return torch.equal(a, b)


def check(ok, what):
    if not ok:
        print(f"rank {dist.get_rank()}: FAILED {what}", flush=True)
        sys.exit(3)


def matrix():
    rank, world = dist.get_rank(), dist.get_world_size()
    checked = 0
    for dtype in DTYPES:
        for op in OPS:
            if dtype.is_floating_point and op in (R.BAND, R.BOR, R.BXOR):
                continue
            if dtype == torch.bool and op == R.AVG:
                continue
            if op == R.PRODUCT and dtype in (torch.int8, torch.uint8, torch.float16, torch.bfloat16) and world > 3:
                continue  # overflows differently in the reference
            t = value(rank, dtype)
            dist.all_reduce(t, op=op)
            check(close(t, expected_reduce(op, dtype, world), dtype), f"all_reduce {op} {dtype}: {t}")
            # the same, non-contiguous (every other element of a wider tensor)
            wide = torch.zeros(14, dtype=dtype)
            wide[::2] = value(rank, dtype)
            dist.all_reduce(wide[::2], op=op)
            check(close(wide[::2], expected_reduce(op, dtype, world), dtype), f"strided all_reduce {op} {dtype}")
            check(not wide[1::2].any(), f"strided all_reduce {op} {dtype} wrote between the elements")
            checked += 2
        for root in range(world):
            t = value(rank, dtype)
            dist.broadcast(t, src=root)
            check(torch.equal(t, value(root, dtype)), f"broadcast from {root} {dtype}")
            if dtype != torch.bool:
                t = value(rank, dtype)
                dist.reduce(t, dst=root, op=R.SUM)
                if rank == root:
                    check(close(t, expected_reduce(R.SUM, dtype, world), dtype), f"reduce to {root} {dtype}")
            g = [torch.empty(7, dtype=dtype) for _ in range(world)] if rank == root else None
            dist.gather(value(rank, dtype), g, dst=root)
            if rank == root:
                check(all(torch.equal(g[r], value(r, dtype)) for r in range(world)), f"gather {dtype}")
            out = torch.empty(7, dtype=dtype)
            dist.scatter(out, [value(r + 10, dtype) for r in range(world)] if rank == root else None, src=root)
            check(torch.equal(out, value(rank + 10, dtype)), f"scatter from {root} {dtype}")
            checked += 4
        outs = [torch.empty(7, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, value(rank, dtype))
        check(all(torch.equal(outs[r], value(r, dtype)) for r in range(world)), f"all_gather list {dtype}")
        into = torch.empty(world * 7, dtype=dtype)
        dist.all_gather_into_tensor(into, value(rank, dtype)) if hasattr(dist, "all_gather_into_tensor") else \
            dist._all_gather_base(into, value(rank, dtype))
        check(torch.equal(into, torch.cat([value(r, dtype) for r in range(world)])), f"all_gather_into_tensor {dtype}")
        if dtype != torch.bool:
            out = torch.empty(7, dtype=dtype)
            dist.reduce_scatter(out, [value(rank + j, dtype) for j in range(world)])
            want = sum(value(r + rank, dtype).to(torch.float64) for r in range(world)).to(dtype)
            check(close(out, want, dtype), f"reduce_scatter list {dtype}: {out} != {want}")
            flat = torch.cat([value(rank + j, dtype) for j in range(world)])
            out2 = torch.empty(7, dtype=dtype)
            (dist.reduce_scatter_tensor if hasattr(dist, "reduce_scatter_tensor") else dist._reduce_scatter_base)(out2, flat)
            check(close(out2, want, dtype), f"reduce_scatter_tensor {dtype}")
            checked += 2
        # all_to_all_single, even then uneven (rank r sends j+1 rows of 2 to rank j)
        inp = torch.cat([value(rank * 10 + j, dtype, 3) for j in range(world)])
        out = torch.empty(3 * world, dtype=dtype)
        dist.all_to_all_single(out, inp)
        check(torch.equal(out, torch.cat([value(r * 10 + rank, dtype, 3) for r in range(world)])), f"all_to_all_single {dtype}")
        send = torch.cat([value(rank * 10 + j, dtype, 2 * (j + 1)).reshape(j + 1, 2) for j in range(world)])
        recv = torch.empty((rank + 1) * world, 2, dtype=dtype)
        dist.all_to_all_single(recv, send, output_split_sizes=[rank + 1] * world,
                               input_split_sizes=[j + 1 for j in range(world)])
        want = torch.cat([value(r * 10 + rank, dtype, 2 * (rank + 1)).reshape(rank + 1, 2) for r in range(world)])
        check(torch.equal(recv, want), f"uneven all_to_all_single {dtype}")
        outs = [torch.empty(j + 1, dtype=dtype) for j in range(world)]
        dist.all_to_all(outs, [value(rank * 10 + j, dtype, rank + 1) for j in range(world)])
        check(all(torch.equal(outs[r], value(r * 10 + rank, dtype, r + 1)) for r in range(world)), f"all_to_all list {dtype}")
        checked += 5
        if world > 1:
            peer_to = (rank + 1) % world
            peer_from = (rank - 1) % world
            got = torch.empty(7, dtype=dtype)
            ops = [dist.P2POp(dist.isend, value(rank, dtype), peer_to), dist.P2POp(dist.irecv, got, peer_from)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            check(torch.equal(got, value(peer_from, dtype)), f"batch_isend_irecv {dtype}")
            checked += 1
    dist.barrier()
    print(f"rank {rank}: matrix ok ({checked} checks, world {world})", flush=True)


def _ddp_trained(group, model, lr, register=None, **kwargs):
    """The parameters of `model` after 5 DDP steps on `group` (seeded data
    per rank, so every backend sees the same batches)."""
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, **kwargs)
    if register:
        register(ddp, group)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    torch.manual_seed(100 + dist.get_rank())
    for _ in range(5):
        opt.zero_grad()
        ddp(torch.randn(8, 32)).square().mean().backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp_like_gloo():
    """DDP over mci and over gloo, same model and data, same gradients."""
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    mci = dist.new_group(backend="mci")
    grads = []
    for group in (gloo, mci):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        grads.append(_ddp_trained(group, model, 0.1, bucket_cap_mb=0.001))
    for a, b in zip(*grads):
        check(torch.allclose(a, b, rtol=0, atol=1e-6), "DDP weights differ between gloo and mci")
    print(f"rank {rank}: ddp matches gloo", flush=True)


def _ddp_options_cases():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

    def hook(fn, state=None):
        return lambda ddp, group: ddp.register_comm_hook(group if state is None else state(group), fn)

    def powersgd_state(group):
        # Rank-1 approximation from the first step (no warm-up), error
        # feedback on: the compressed path runs every step.
        return powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=1, start_powerSGD_iter=2,
                                      min_compression_rate=0.5, use_error_feedback=True, warm_start=True)

    cases = {
        "gradient_as_bucket_view": ({"gradient_as_bucket_view": True}, None),
        "static_graph": ({"static_graph": True}, None),
        "bucket_cap_mb": ({"bucket_cap_mb": 0.01}, None),
        "allreduce_hook": ({}, hook(default_hooks.allreduce_hook, lambda g: g)),
        "fp16_compress_hook": ({}, hook(default_hooks.fp16_compress_hook, lambda g: g)),
        "bf16_compress_hook": ({}, hook(default_hooks.bf16_compress_hook, lambda g: g)),
        "powerSGD_hook": ({}, hook(powersgd.powerSGD_hook, powersgd_state)),
        "powerSGD_hook+gradient_as_bucket_view": ({"gradient_as_bucket_view": True},
                                                  hook(powersgd.powerSGD_hook, powersgd_state)),
    }
    if int(torch.__version__.split(".")[0]) < 2:
        # torch 1.13's DDP refuses it on every backend without NCCL 2.10+.
        del cases["bf16_compress_hook"]
    return cases


def ddp_options_like_gloo():
    """DDP's own options and the comm hooks torch ships, on mci and on gloo:
    the same model, data and steps give the same parameters."""
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    mci = dist.new_group(backend="mci")
    for name, (kwargs, register) in _ddp_options_cases().items():
        params = []
        for group in (gloo, mci):
            print(f"rank {rank}: DDP with {name} on {dist.get_backend(group)}", flush=True)
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 48),
                                        torch.nn.ReLU(), torch.nn.Linear(48, 4))
            params.append(_ddp_trained(group, model, 0.05, register, **kwargs))
        # The hooks compress the same values the same way on both backends;
        # only the summation order may differ (two ranks: it cannot).
        for i, (a, b) in enumerate(zip(*params)):
            check(torch.allclose(a, b, rtol=0, atol=1e-6),
                  f"DDP with {name}: parameter {i} differs between gloo and mci by "
                  f"{(a - b).abs().max().item()}")
        # Trained: the parameters moved from their initial values.
        torch.manual_seed(0)
        first = torch.nn.Linear(32, 64).weight
        check(not torch.equal(params[1][0], first), f"DDP with {name}: the parameters never changed")
    print(f"rank {rank}: DDP options and comm hooks match gloo ({len(_ddp_options_cases())} cases)", flush=True)


def async_overlap():
    """async_op returns before the operation is done: rank 1 only enters
    once rank 0 has seen its work still pending."""
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    t = torch.full((1000,), float(rank + 1))
    if rank == 0:
        work = dist.all_reduce(t, async_op=True)
        check(not work.is_completed(), "async all_reduce completed before the other rank entered")
        store.set("overlap/go", "1")
        work.wait()
    else:
        store.wait(["overlap/go"])
        dist.all_reduce(t, async_op=True).wait()
    check(torch.all(t == 3.0).item(), f"async all_reduce result {t[:3]}")
    print(f"rank {rank}: async ok", flush=True)


def expect_error(kind, text, f):
    try:
        f()
    except kind as e:
        for piece in text:
            check(piece in str(e), f"{kind.__name__} text lacks '{piece}': {e}")
        return str(e)
    check(False, f"no {kind.__name__} raised")


def errors():
    rank = dist.get_rank()
    if mci_torch.PATH == "python":
        # The C++ backend never sees such a tensor: torch 2.x routes an
        # operation by its tensor's device, and a meta tensor goes to torch's
        # own meta kernel (a no-op for tracing), not to a backend for "cpu".
        expect_error(mci_torch.ConfigError, ["CPU tensors", "nccl"],
                     lambda: dist.all_reduce(torch.ones(2, device="meta")))
    expect_error(mci_torch.ConfigError, ["integer"], lambda: dist.all_reduce(torch.ones(2), op=R.BAND))
    world = dist.get_world_size()
    gather_into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    expect_error(mci_torch.ConfigError, ["all_gather_into_tensor", f"output needs {world} x 3"],
                 lambda: gather_into(torch.ones(3 * world + 1), torch.ones(3)))
    scatter_from = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    expect_error(mci_torch.ConfigError, ["reduce_scatter_tensor", f"input needs {world} x 2"],
                 lambda: scatter_from(torch.ones(2), torch.ones(2 * world, dtype=torch.float64)))
    # ranks that call different collectives get MismatchError, not a wrong
    # result; the group is then aborted, so on a group of its own
    sub = dist.new_group(backend="mci")
    if rank == 0:
        expect_error(mci_torch.MismatchError, ["broadcast", "all_reduce"],
                     lambda: dist.all_reduce(torch.ones(4), group=sub))
    elif rank == 1:
        expect_error(mci_torch.MismatchError, ["broadcast", "all_reduce"],
                     lambda: dist.broadcast(torch.ones(4), 0, group=sub))
    print(f"rank {rank}: errors ok", flush=True)


def timeout():
    """A rank that never arrives: the others get mci's text and hang report."""
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    sub = dist.new_group(backend="mci", timeout=timedelta(seconds=2))
    if rank == 1:
        store.wait(["timeout/done"], timedelta(seconds=60))
        return
    text = expect_error(mci_torch.TimeoutError, ["Timed out", "rank 1"], lambda: dist.all_reduce(torch.ones(4), group=sub))
    check(isinstance(mci_torch.TimeoutError(""), RuntimeError), "TimeoutError is not a RuntimeError")
    print(f"rank {rank}: timeout ok: {text.splitlines()[0]}", flush=True)
    store.set("timeout/done", "1")


def dead_peer():
    rank = dist.get_rank()
    dist.barrier()
    if rank == 1:
        os._exit(0)  # gone without a word, as a crash
    start = time.monotonic()
    expect_error(mci_torch.PeerError, ["rank 1"], lambda: dist.all_reduce(torch.ones(4)))
    print(f"rank {rank}: peer error after {time.monotonic() - start:.1f}s (timeout 300s)", flush=True)
    os._exit(0)


def subgroups():
    rank, world = dist.get_rank(), dist.get_world_size()
    evens = dist.new_group([r for r in range(world) if r % 2 == 0], backend="mci")
    odds = dist.new_group([r for r in range(world) if r % 2 == 1], backend="mci")
    mine = evens if rank % 2 == 0 else odds
    t = torch.tensor([float(rank)])
    dist.all_reduce(t, group=mine)
    check(t.item() == sum(r for r in range(world) if r % 2 == rank % 2), f"subgroup all_reduce {t}")
    print(f"rank {rank}: subgroups ok", flush=True)


def batch_p2p():
    """dist.batch_isend_irecv (torch 2.14+ asks the group for its backend
    first): a ring both ways in one batch, the receives listed before the
    sends, and two sends to one peer matched in order."""
    rank, world = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world, (rank - 1) % world
    from_left, from_right = torch.empty(2), torch.empty(2)
    first, second = torch.empty(3, dtype=torch.int64), torch.empty(3, dtype=torch.int64)
    ops = [dist.P2POp(dist.irecv, from_left, left), dist.P2POp(dist.irecv, from_right, right),
           dist.P2POp(dist.isend, torch.tensor([float(rank), 1.0]), right),
           dist.P2POp(dist.isend, torch.tensor([float(rank), -1.0]), left)]
    if rank == 0:
        ops += [dist.P2POp(dist.isend, torch.full((3,), 10, dtype=torch.int64), 1),
                dist.P2POp(dist.isend, torch.full((3,), 20, dtype=torch.int64), 1)]
    if rank == 1:
        ops += [dist.P2POp(dist.irecv, first, 0), dist.P2POp(dist.irecv, second, 0)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check(from_left.tolist() == [float(left), 1.0] and from_right.tolist() == [float(right), -1.0],
          f"batch ring: from the left {from_left}, from the right {from_right}")
    if rank == 1:
        check(first.tolist() == [10] * 3 and second.tolist() == [20] * 3, f"two sends in order: {first} {second}")
    print(f"rank {rank}: batch_isend_irecv ok", flush=True)


def init_timeout(scenario):
    return timedelta(seconds=300 if scenario == "dead_peer" else 60)


def teardown(scenario):
    if scenario != "dead_peer":
        # Rank 0 hosts torch's store (as under torchrun's standalone
        # rendezvous): nobody leaves while another may still use it.
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    torch_batch.main(sys.argv[1:], globals(), "mci", init_timeout, teardown)
