"""One rank of the tests of what torch 2.x routes to a c10d Backend beyond
the classic collectives, on "mci" through its C++ extension: split_group,
PREMUL_SUM (FSDP2's gradient divide factor), every dtype torch 2.x has
(moved as it is, reduced exactly or refused with what to do), and
device-keyed backends ("cpu:mci"). Run under mcirun; the scenario named on
the command line asserts what every rank sees and exits non-zero if not."""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import mci_torch
import torch_batch

R = dist.ReduceOp


def check(ok, what):
    if not ok:
        print(f"rank {dist.get_rank()}: FAILED {what}", flush=True)
        sys.exit(3)


def expect_config_error(f, *pieces):
    """f raises mci_torch.ConfigError whose text holds every piece."""
    try:
        f()
    except mci_torch.ConfigError as e:
        text = str(e)
        missing = [p for p in pieces if p not in text]
        check(not missing, f"the error lacks {missing}: {text}")
        return
    check(False, f"no ConfigError (wanted one with {pieces})")


def split():
    """dist.split_group on "mci": the order of a split's list is the new
    group's rank order, every split works on its own, a rank left out gets
    no group, and the parent keeps working."""
    rank, world = dist.get_rank(), dist.get_world_size()
    check(world == 3, "split runs on 3 ranks")
    sub = dist.split_group(split_ranks=[[2, 0], [1]], timeout=timedelta(seconds=60))
    want_rank = {0: 1, 1: 0, 2: 0}[rank]
    check(sub.rank() == want_rank and sub.size() == (1 if rank == 1 else 2),
          f"split group rank {sub.rank()} of {sub.size()}")
    check(dist.get_backend(sub) == "mci", f"the split's backend is {dist.get_backend(sub)}")
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t, group=sub)
    check(t.item() == (2.0 if rank == 1 else 4.0), f"all_reduce in the split {t}")
    # Group rank 0 of [2, 0] is global rank 2: its broadcast reaches rank 0.
    b = torch.tensor([float(rank)])
    dist.broadcast(b, group_src=0, group=sub)
    check(b.item() == (1.0 if rank == 1 else 2.0), f"broadcast from the split's rank 0 {b}")
    only = dist.split_group(split_ranks=[[0, 1]])
    if rank == 2:
        check(only == dist.GroupMember.NON_GROUP_MEMBER, f"rank 2 is in no split, got {only}")
    else:
        u = torch.ones(2)
        dist.all_reduce(u, group=only)
        check(u.tolist() == [2.0, 2.0], f"all_reduce in the second split {u}")
    w = torch.ones(1)
    dist.all_reduce(w)
    check(w.item() == float(world), f"the parent after the splits {w}")
    print(f"rank {rank}: split_group ok", flush=True)


def _premul(factor):
    return dist._make_nccl_premul_sum(factor)


def premul():
    """PREMUL_SUM(f) is f times the sum: all_reduce (float32, bfloat16,
    complex64), reduce_scatter_tensor, reduce (the other ranks' tensors
    untouched), the coalesced reduce_scatter; an integer tensor is refused;
    FSDP2 with set_gradient_divide_factor (which reduce-scatters with
    PREMUL_SUM) gives the gradients of the default (AVG) times world/f."""
    rank, world = dist.get_rank(), dist.get_world_size()
    tri = world * (world + 1) / 2
    for dtype in (torch.float32, torch.bfloat16, torch.float64):
        t = torch.full((5,), float(rank + 1), dtype=dtype)
        dist.all_reduce(t, op=_premul(0.5))
        check(torch.equal(t, torch.full((5,), 0.5 * tri, dtype=dtype)), f"all_reduce premul {dtype} {t}")
    c = torch.full((3,), complex(rank + 1, -(rank + 1)), dtype=torch.complex64)
    dist.all_reduce(c, op=_premul(0.25))
    check(torch.equal(c, torch.full((3,), complex(0.25 * tri, -0.25 * tri), dtype=torch.complex64)),
          f"all_reduce premul complex64 {c}")
    # A factor given as a tensor (as torch's own premul tests do).
    t = torch.full((2,), float(rank + 1))
    dist.all_reduce(t, op=_premul(torch.tensor([2.0])))
    check(t.tolist() == [2 * tri] * 2, f"all_reduce premul with a tensor factor {t}")

    inp = torch.arange(2 * world, dtype=torch.float32) + rank
    kept = inp.clone()
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, inp, op=_premul(0.5))
    want = [0.5 * sum(2 * rank + i + r for r in range(world)) for i in range(2)]
    check(out.tolist() == want, f"reduce_scatter_tensor premul {out}, want {want}")
    check(torch.equal(inp, kept), "reduce_scatter_tensor premul changed its input")

    r = torch.full((4,), float(rank + 1))
    dist.reduce(r, dst=1, op=_premul(0.5))
    want = 0.5 * tri if rank == 1 else float(rank + 1)
    check(r.tolist() == [want] * 4, f"reduce premul on rank {rank}: {r}")

    import torch.distributed._functional_collectives as fc
    a, b = torch.ones(2 * world), torch.full((4 * world,), 2.0)
    outs = fc.reduce_scatter_tensor_coalesced([a, b], "sum", [0, 0], dist.group.WORLD)
    check(outs[0].tolist() == [float(world)] * 2 and outs[1].tolist() == [2.0 * world] * 4,
          f"coalesced reduce_scatter {outs}")
    o1, o2 = torch.empty(2), torch.empty(4)
    with dist._coalescing_manager(async_ops=False):
        dist.reduce_scatter_tensor(o1, a, op=_premul(0.5))
        dist.reduce_scatter_tensor(o2, b, op=_premul(0.5))
    check(o1.tolist() == [0.5 * world] * 2 and o2.tolist() == [1.0 * world] * 4,
          f"coalesced reduce_scatter premul {o1} {o2}")

    expect_config_error(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=_premul(2.0)),
                        "PREMUL_SUM", "floating-point", "use SUM and scale")

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    grads = []
    for factor in (None, 4.0 * world):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        fully_shard(model, mesh=mesh)
        if factor is not None:
            model.set_gradient_divide_factor(factor)
        gen = torch.Generator().manual_seed(7 + rank)
        model(torch.randn(4, 8, generator=gen)).pow(2).sum().backward()
        grads.append([p.grad.to_local().clone() for p in model.parameters()])
    for i, (avg, div) in enumerate(zip(*grads)):
        check(torch.allclose(div, avg * world / (4.0 * world), rtol=1e-6, atol=1e-7),
              f"FSDP2 gradient {i} with divide factor {4 * world}: {div} against AVG's {avg}")
    print(f"rank {rank}: PREMUL_SUM ok", flush=True)


# Values per rank for the dtypes mci has no type of its own for, as Python
# ints or complex numbers; what the reductions give is computed from them.
UNSIGNED_BITS = {torch.uint16: 16, torch.uint32: 32, torch.uint64: 64}


def _ints(dtype, rank):
    if dtype == torch.int16:
        return [-(rank + 1), rank + 2, 300 * (rank + 1), -32768 + rank, 7]
    bits = UNSIGNED_BITS[dtype]
    top = 1 << (bits - 1)
    # Above and below the top bit, so a signed comparison would misorder them.
    return [rank + 1, top + rank, (1 << bits) - 1 - rank, 3, top - 1 - rank]


def _as_bits(t):
    """t's bits as the signed type of its width (comparable with equal)."""
    return t.reshape(-1).view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64,
                               16: torch.int64}[t.element_size()])


def _int_tensor(values, dtype):
    bits = 16 if dtype == torch.int16 else UNSIGNED_BITS[dtype]
    signed = [v - (1 << bits) if dtype != torch.int16 and v >= 1 << (bits - 1) else v for v in values]
    wide = torch.tensor(signed, dtype=torch.int64)
    return wide.to({16: torch.int16, 32: torch.int32, 64: torch.int64}[bits]).view(dtype)


def dtypes():
    """int16, uint16/32/64, complex64/128 and the float8s: moved exactly by
    broadcast, all_gather_into_tensor, all_to_all_single and send/recv;
    reduced exactly (integers: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR,
    BXOR with the narrow type's wrap-around; complex: SUM, AVG); what mci
    cannot do exactly is refused, saying what to do."""
    rank, world = dist.get_rank(), dist.get_world_size()
    every = [torch.int16, torch.uint16, torch.uint32, torch.uint64, torch.complex64, torch.complex128,
             torch.float8_e4m3fn, torch.float8_e5m2]
    for dtype in every:
        if dtype.is_complex:
            mine = torch.tensor([complex(rank, 1), complex(-1, rank + 0.5), complex(3, 4)], dtype=dtype)
        elif dtype.is_floating_point:
            mine = torch.tensor([0.5 * (rank + 1), -2.0, 448.0 if dtype == torch.float8_e4m3fn else 1.5]).to(dtype)
        else:
            mine = _int_tensor(_ints(dtype, rank), dtype)
        bits = _as_bits(mine)
        gathered = torch.empty(world * mine.numel(), dtype=dtype)
        dist.all_gather_into_tensor(gathered, mine)
        rows = _as_bits(gathered).view(world, -1)  # rank r's values, as bits
        check(torch.equal(rows[rank], bits), f"{dtype}: all_gather of my row")
        if not (dtype.is_complex or dtype.is_floating_point):
            want = torch.stack([_as_bits(_int_tensor(_ints(dtype, r), dtype)) for r in range(world)])
            check(torch.equal(rows, want), f"{dtype}: all_gather {gathered}")
        b = mine.clone()
        dist.broadcast(b, src=1)
        check(torch.equal(_as_bits(b), rows[1]), f"{dtype}: broadcast from rank 1 {b}")
        a2a_in = torch.cat([mine] * world)
        a2a_out = torch.empty_like(a2a_in)
        dist.all_to_all_single(a2a_out, a2a_in)
        check(torch.equal(_as_bits(a2a_out), _as_bits(gathered)), f"{dtype}: all_to_all_single")
        if rank in (0, 1):
            peer = 1 - rank
            got = torch.empty_like(mine)
            ops = [dist.P2POp(dist.isend, mine, peer), dist.P2POp(dist.irecv, got, peer)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            check(torch.equal(_as_bits(got), rows[peer]), f"{dtype}: send/recv")

        if dtype.is_floating_point:
            expect_config_error(lambda: dist.all_reduce(mine.clone()), "float8", "bfloat16", "all_gather")
            continue
        if dtype.is_complex:
            every_row = gathered.view(world, -1)
            s = mine.clone()
            dist.all_reduce(s)
            check(torch.allclose(s, every_row.sum(0)), f"{dtype}: SUM {s}")
            a = mine.clone()
            dist.all_reduce(a, op=R.AVG)
            check(torch.allclose(a, every_row.sum(0) / world), f"{dtype}: AVG {a}")
            # torch's all_reduce hands the backend complex tensors as reals
            # (and refuses MAX itself); the backend's own entry point and
            # reduce_scatter_tensor take them as they are.
            backend = dist.group.WORLD._get_backend(torch.device("cpu"))
            opts = dist.AllreduceOptions()
            direct = mine.clone()
            backend.allreduce([direct], opts).wait()
            check(torch.allclose(direct, every_row.sum(0)), f"{dtype}: the backend's SUM {direct}")
            opts.reduceOp = R.MAX
            expect_config_error(lambda: backend.allreduce([mine.clone()], opts).wait(), "complex",
                                "SUM, AVG or PREMUL_SUM")
            rs_out = torch.empty_like(mine)
            dist.reduce_scatter_tensor(rs_out, torch.cat([mine] * world))
            check(torch.allclose(rs_out, every_row.sum(0)), f"{dtype}: reduce_scatter_tensor SUM {rs_out}")
            continue
        nbits = 16 if dtype == torch.int16 else UNSIGNED_BITS[dtype]
        vals = [_ints(dtype, r) for r in range(world)]
        ops = {R.SUM: sum, R.MIN: min, R.MAX: max}
        for op, f in ops.items():
            if dtype == torch.int16:
                want = [f(col) for col in zip(*vals)]
                if op == R.SUM:
                    want = [((v + 32768) % 65536) - 32768 for v in want]
            else:
                want = [f(col) % (1 << nbits) for col in zip(*vals)]
            t = mine.clone()
            dist.all_reduce(t, op=op)
            check(torch.equal(_as_bits(t), _as_bits(_int_tensor(want, dtype))), f"{dtype} {op}: {t}, want {want}")
        prod_in = _int_tensor([rank + 2, 3, 1, 2, 5], dtype)
        p = prod_in.clone()
        dist.all_reduce(p, op=R.PRODUCT)
        want = [1, 1, 1, 1, 1]
        for r in range(world):
            for i, v in enumerate([r + 2, 3, 1, 2, 5]):
                want[i] *= v
        check(torch.equal(_as_bits(p), _as_bits(_int_tensor(want, dtype))), f"{dtype} PRODUCT {p}")
        for op, f in ((R.BAND, lambda x, y: x & y), (R.BOR, lambda x, y: x | y), (R.BXOR, lambda x, y: x ^ y)):
            t = mine.clone()
            dist.all_reduce(t, op=op)
            want = []
            for col in zip(*vals):
                acc = col[0] % (1 << nbits)
                for v in col[1:]:
                    acc = f(acc, v % (1 << nbits))
                want.append(acc if dtype != torch.int16 or acc < 32768 else acc - 65536)
            check(torch.equal(_as_bits(t), _as_bits(_int_tensor(want, dtype))), f"{dtype} {op}: {t}")
        if dtype == torch.uint64:
            expect_config_error(lambda: dist.all_reduce(mine.clone(), op=R.AVG), "uint64", "use SUM and divide")
        else:
            small = _int_tensor([rank + 1, 2 * (rank + 1), 9, 0, 4], dtype)
            t = small.clone()
            dist.all_reduce(t, op=R.AVG)
            want = [sum(col) // world for col in zip(*[[r + 1, 2 * (r + 1), 9, 0, 4] for r in range(world)])]
            check(torch.equal(_as_bits(t), _as_bits(_int_tensor(want, dtype))), f"{dtype} AVG {t}, want {want}")
        # reduce_scatter of a narrow type: the wrap-around is the narrow one.
        rs_in = torch.cat([mine] * world)
        rs_out = torch.empty_like(mine)
        dist.reduce_scatter_tensor(rs_out, rs_in, op=R.MAX)
        want = [max(col) % (1 << nbits) if dtype != torch.int16 else max(col) for col in zip(*vals)]
        check(torch.equal(_as_bits(rs_out), _as_bits(_int_tensor(want, dtype))), f"{dtype} reduce_scatter MAX")
    print(f"rank {rank}: dtypes ok", flush=True)


def device_keyed():
    """A group made with a device-keyed backend string: "cpu:mci" and
    "cpu:mci,cuda:gloo" (a CUDA backend every torch has; NCCL's half needs
    a GPU) send CPU tensors to mci: the CPU backend is not gloo's, and AVG,
    which gloo refuses, works."""
    rank, world = dist.get_rank(), dist.get_world_size()
    for spec in ("cpu:mci", "cpu:mci,cuda:gloo"):
        g = dist.new_group(backend=spec)
        check(str(dist.get_backend_config(g)) == spec, f"{spec}: config {dist.get_backend_config(g)}")
        backend = g._get_backend(torch.device("cpu"))
        check(not isinstance(backend, dist.ProcessGroupGloo), f"{spec}: the CPU backend is gloo's")
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, op=R.AVG, group=g)
        check(t.tolist() == [(world + 1) / 2] * 3, f"{spec}: all_reduce AVG {t}")
    dist.barrier(device_ids=[0])  # torch 2.x's form; a CPU backend has no device to bind
    print(f"rank {rank}: device-keyed ok", flush=True)


def shrink():
    """torch's own shrink_group on "mci": rank 2, alive, is excluded by the
    two others (torch's contract: only the ranks that stay call it); they go
    on in a group of 2 that replaces the default group, on which DDP works
    (the shrunk backend is registered as mci's, not as Gloo's)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    check(world == 3, "shrink runs on 3 ranks")
    if rank == 2:
        print("rank 2: excluded, leaves", flush=True)
        return
    new = dist.shrink_group([2])
    check((new.rank(), new.size()) == (rank, 2), f"shrunk group rank {new.rank()} of {new.size()}")
    check(dist.get_world_size() == 2, f"the default group has {dist.get_world_size()} ranks")
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    check(t.item() == 3.0, f"all_reduce in the shrunk group {t}")
    model = torch.nn.Linear(4, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp(torch.full((2, 4), float(rank))).sum().backward()
    check(torch.allclose(model.weight.grad, torch.full((1, 4), 1.0)), f"DDP's averaged gradient {model.weight.grad}")
    print(f"rank {rank}: shrink_group ok", flush=True)


def exit_pending():
    """A program that ends with an operation still running and no
    destroy_process_group: rank 0 leaves an irecv from rank 1 that never
    comes, while rank 1 stays alive until rank 0 has gone (it waits on
    rank 0's store, which goes with it). Rank 0 must exit at once, with
    code 0: its running operation is aborted at exit, not waited on for
    the group's timeout (900 s here, longer than the test's own limit)."""
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        dist.irecv(torch.empty(4), src=1)  # never sent, never waited on
        store.set("posted", "1")
        print("rank 0: leaving with an irecv running", flush=True)
        return
    store.wait(["posted"])
    try:
        store.wait(["never set"])  # ends when rank 0's store goes away
    except Exception:  # noqa: BLE001 - torch's store raises its own types
        pass
    print("rank 1: rank 0 has gone", flush=True)
    os._exit(0)  # its groups' peer is gone: nothing to close


def options():
    """pg_options reach mci: a group's own timeout (a recv nobody sends
    ends at 2 s, not at the default group's 60); mci settings by name (an unknown one is refused naming it);
    a wrong pg_options type is refused saying what to pass."""
    import time

    rank = dist.get_rank()
    short = dist.new_group([0, 1], backend="mci", pg_options=mci_torch.Options(timeout=timedelta(seconds=2),
                                                                               algorithm="ring"))
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t, group=short)
    check(t.tolist() == [3.0] * 3, f"all_reduce with MCI_ALGO=ring from pg_options {t}")
    if rank == 0:
        started = time.monotonic()
        try:
            dist.recv(torch.empty(1), src=1, group=short)
            check(False, "a recv nobody sends completed")
        except RuntimeError as e:
            waited = time.monotonic() - started
            check("Timed out" in str(e) or "timed out" in str(e), f"the recv's error is not a timeout: {e}")
            # The group's 2 s, not the default group's 60 s.
            check(waited < 30, f"the recv waited {waited:.1f} s: pg_options' timeout was not used")
    expect_config_error(lambda: dist.new_group([0, 1], backend="mci",
                                               pg_options=mci_torch.Options(settings={"MCI_NO_SUCH_THING": 1})),
                        "MCI_NO_SUCH_THING")
    expect_config_error(lambda: mci_torch.Options(algoritm="ring"), "algoritm", "algorithm")
    expect_config_error(lambda: dist.new_group([0, 1], backend="mci", pg_options=42), "mci_torch.Options")
    # reproducible=True is MCI_REPRODUCIBLE=1 for the group; every rank
    # must give the same (checked when the group forms, as the job's
    # settings are).
    check(mci_torch.Options(reproducible=True).settings == {"MCI_REPRODUCIBLE": "1"}, "reproducible=True")
    check(mci_torch.Options(reproducible=False).settings == {"MCI_REPRODUCIBLE": "0"}, "reproducible=False")
    same = dist.new_group([0, 1], backend="mci", pg_options=mci_torch.Options(reproducible=True, transport="tcp"))
    b = torch.full((1001,), 0.1 * (rank + 1), dtype=torch.bfloat16)
    dist.all_reduce(b, group=same)
    want = (torch.tensor(0.1, dtype=torch.bfloat16).float() + torch.tensor(0.2, dtype=torch.bfloat16).float())
    check(torch.equal(b, torch.full((1001,), want.item()).bfloat16()), f"a reproducible group's bf16 sum {b[:3]}")
    expect_config_error(lambda: dist.new_group([0, 1], backend="mci",
                                               pg_options=mci_torch.Options(reproducible=rank == 0)),
                        "MCI_REPRODUCIBLE")
    print(f"rank {rank}: pg_options ok", flush=True)


def monitored_zero():
    """monitored_barrier honours the timeout it is given, zero included.
    Rank 0 first, rank 1 not in it: timedelta(0) raises at once with gloo's
    sentence ("Rank 0 timed out in monitoredBarrier") then mci's. Then rank
    1, rank 0 not releasing it: timedelta(0) raises at once too (torch's
    store takes a zero wait as "forever": mci must not pass it on). The
    group's timeout is 60 s, which neither may wait for; then a barrier
    both reach passes."""
    import time

    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    if rank == 1:
        store.wait(["rank0_done"])
    started = time.monotonic()
    try:
        dist.monitored_barrier(timeout=timedelta(0))
        check(False, "monitored_barrier with timedelta(0) passed although the other rank was not there")
    except RuntimeError as e:
        text = str(e)
        want = ("Rank 0 timed out in monitoredBarrier after 0 ms" if rank == 0 else
                "Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv "
                "from rank 0")
        check(want in text and "mci_torch: monitored_barrier #1" in text,
              f"the error lacks torch's or mci's text: {text}")
    waited = time.monotonic() - started
    check(waited < 20, f"a zero timeout waited {waited:.1f} s")
    if rank == 0:
        store.set("rank0_done", "1")
    dist.monitored_barrier(timeout=timedelta(seconds=30))
    print(f"rank {rank}: monitored_barrier zero timeout ok", flush=True)


def init_timeout(scenario):
    return timedelta(seconds=900 if scenario == "exit_pending" else 60)


def teardown(scenario):
    if scenario != "exit_pending":
        dist.destroy_process_group()


if __name__ == "__main__":
    if mci_torch.PATH != "ext":
        sys.exit(f"these scenarios need mci's C++ backend, but mci_torch.PATH is {mci_torch.PATH!r}")
    torch_batch.main(sys.argv[1:], globals(), "mci", init_timeout, teardown)
