"""One rank of the mci_torch tests of torch 2.x's newer distributed layers
on the backend "mci": DeviceMesh and the functional collectives, DTensor,
FSDP2 (fully_shard) against gloo, and a torch.compile'd function calling a
functional collective. Run under mcirun; the scenario named on the command
line asserts what every rank sees and exits non-zero if not.

These layers call the backend through torch's C++ (the ops of
torch.ops._c10d_functional resolve the group by its name), so they need
torch 2.x; the tests register them on the torch2 tier only (CMakeLists.txt
says why the others skip)."""

import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import mci_torch
import torch_batch

# FSDP2 on gloo and on mci compare bit for bit only if neither side's
# kernels split their work by thread count differently between runs.
torch.set_num_threads(1)


def check(ok, what):
    if not ok:
        print(f"rank {dist.get_rank()}: FAILED {what}", flush=True)
        sys.exit(3)


def funcol():
    """all_reduce, all_gather_tensor (dims 0 and 1), reduce_scatter_tensor
    and their coalesced forms on a 1-D DeviceMesh over "mci", and
    dist._coalescing_manager around the collectives it coalesces. Then two
    collectives in flight at once on tensors Python owns, waited on in the
    reverse order."""
    from torch.distributed.device_mesh import init_device_mesh
    import torch.distributed._functional_collectives as fc

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    check(mesh.get_group().group_name == dist.group.WORLD.group_name, "the 1-D mesh is not the default group")
    tri = float(world * (world + 1) // 2)

    summed = fc.all_reduce(torch.full((4,), float(rank + 1)), "sum", mesh)
    check(torch.equal(summed, torch.full((4,), tri)), f"all_reduce {summed}")
    biggest = fc.all_reduce(torch.tensor([rank, -rank], dtype=torch.int64), "max", mesh)
    check(biggest.tolist() == [world - 1, 0], f"all_reduce max {biggest}")

    gathered = fc.all_gather_single(torch.tensor([float(rank), 10.0 + rank]), 0, mesh)
    want = [v for r in range(world) for v in (float(r), 10.0 + r)]
    check(gathered.tolist() == want, f"all_gather_single dim 0 {gathered}")
    rows = torch.arange(6, dtype=torch.float32).reshape(2, 3) + 100 * rank
    by_col = fc.all_gather_single(rows, 1, mesh)
    want = torch.cat([torch.arange(6, dtype=torch.float32).reshape(2, 3) + 100 * r for r in range(world)], dim=1)
    check(torch.equal(by_col, want), f"all_gather_single dim 1 {by_col}")

    # rank r contributes (r + 1) * [0, 1, ..., 2 world - 1]; rank k keeps rows 2k, 2k + 1
    full = torch.arange(2 * world, dtype=torch.float64) * (rank + 1)
    mine = fc.reduce_scatter_single(full, "sum", 0, mesh)
    check(mine.tolist() == [tri * (2 * rank), tri * (2 * rank + 1)], f"reduce_scatter_single {mine}")
    avg = fc.reduce_scatter_single(full, "avg", 0, mesh)
    check(torch.allclose(avg, mine / world), f"reduce_scatter_single avg {avg}")

    a, b = torch.full((3,), float(rank)), torch.full((2, 2), 10.0 * rank, dtype=torch.float64)
    ga, gb = fc.all_gather_single_coalesced([a, b], mesh)
    check(torch.equal(ga, torch.cat([torch.full((3,), float(r)) for r in range(world)])), f"coalesced gather a {ga}")
    check(torch.equal(gb, torch.cat([torch.full((2, 2), 10.0 * r, dtype=torch.float64) for r in range(world)])),
          f"coalesced gather b (float64 beside float32) {gb}")
    xa = torch.arange(2 * world, dtype=torch.float32) + rank
    xb = torch.ones(world, 3) * (rank + 1)
    ra, rb = fc.reduce_scatter_single_coalesced([xa, xb], "sum", [0, 0], mesh)
    check(ra.tolist() == [float(world * (2 * rank) + tri - world), float(world * (2 * rank + 1) + tri - world)],
          f"coalesced reduce_scatter a {ra}")
    check(rb.tolist() == [[tri] * 3], f"coalesced reduce_scatter b {rb}")
    # A reduction of two dtypes in one buffer cannot be: refused on every
    # rank before anything is sent, with what to do.
    try:
        fc.reduce_scatter_single_coalesced([xa, xb.to(torch.int32)], "sum", [0, 0], mesh)
        check(False, "mixed-dtype reduce_scatter_tensor_coalesced was not refused")
    except RuntimeError as e:
        check("make one call per dtype" in str(e) and "tensor 1" in str(e), f"mixed-dtype error text: {e}")
    s1, s2 = fc.all_reduce_coalesced([torch.ones(2) * rank, torch.ones(3, 1)], "sum", mesh)
    check(s1.tolist() == [tri - world] * 2 and s2.tolist() == [[world]] * 3, f"all_reduce_coalesced {s1} {s2}")
    try:
        fc.all_reduce_coalesced([torch.ones(2), torch.ones(3, dtype=torch.int64)], "sum", mesh)
        check(False, "mixed-dtype all_reduce_coalesced was not refused")
    except RuntimeError as e:
        check("make one call per dtype" in str(e) and "torch.int64" in str(e), f"mixed-dtype error text: {e}")

    # torch's _coalescing_manager: the backend does not say supports_coalescing,
    # so torch gathers the calls and makes one coalesced call of them.
    outs = [torch.empty(2 * world), torch.empty(world, 3, dtype=torch.float64)]
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_single(outs[0], torch.full((2,), float(rank)))
        dist.all_gather_single(outs[1], torch.full((1, 3), rank + 0.25, dtype=torch.float64))
    cm.wait()
    check(outs[0].tolist() == [float(r) for r in range(world) for _ in range(2)], f"managed all_gather {outs[0]}")
    check(outs[1].tolist() == [[r + 0.25] * 3 for r in range(world)], f"managed all_gather float64 {outs[1]}")
    shares = [torch.empty(2), torch.empty(1)]
    with dist._coalescing_manager():
        dist.reduce_scatter_single(shares[0], torch.arange(2.0 * world) + rank)
        dist.reduce_scatter_single(shares[1], torch.ones(world) * (rank + 1))
    check(shares[0].tolist() == [float(world * (2 * rank + j) + tri - world) for j in (0, 1)] and
          shares[1].tolist() == [tri], f"managed reduce_scatter {shares}")
    sums = [torch.ones(2) * rank, torch.ones(1)]
    with dist._coalescing_manager():
        for t in sums:
            dist.all_reduce(t)
    check(sums[0].tolist() == [tri - world] * 2 and sums[1].tolist() == [float(world)], f"managed all_reduce {sums}")

    # In flight together, on tensors Python owns; the later one waited first.
    first = fc.all_gather_single(torch.tensor([float(rank)]), 0, mesh)
    second = fc.all_gather_single(torch.tensor([float(rank) + 0.5]), 0, mesh)
    check(second.tolist() == [r + 0.5 for r in range(world)], f"second in flight {second}")
    check(first.tolist() == [float(r) for r in range(world)], f"first in flight {first}")
    print(f"rank {rank}: funcol ok", flush=True)


def dtensor():
    """distribute_tensor, then redistribute Shard(0) -> Replicate, Shard(1)
    -> Shard(0) (an all_to_all), Partial -> Replicate (an all_reduce) and
    Replicate -> Shard(0); each compared with the tensor every rank knows."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)  # the same tensor on every rank
    full = torch.randn(4 * world, 3 * world)

    d = distribute_tensor(full, mesh, [Shard(0)])
    check(torch.equal(d.to_local(), full.chunk(world, 0)[rank]), "Shard(0) local piece")
    rep = d.redistribute(mesh, [Replicate()])
    check(torch.equal(rep.to_local(), full), "Shard(0) -> Replicate")
    check(torch.equal(d.full_tensor(), full), "full_tensor")

    by_col = distribute_tensor(full, mesh, [Shard(1)])
    by_row = by_col.redistribute(mesh, [Shard(0)])
    check(torch.equal(by_row.to_local(), full.chunk(world, 0)[rank]), "Shard(1) -> Shard(0)")

    part = DTensor.from_local(torch.full((2, 2), float(rank + 1)), mesh, [Partial()])
    total = part.redistribute(mesh, [Replicate()]).to_local()
    check(torch.equal(total, torch.full((2, 2), float(world * (world + 1) // 2))), f"Partial -> Replicate {total}")

    back = rep.redistribute(mesh, [Shard(0)])
    check(torch.equal(back.to_local(), full.chunk(world, 0)[rank]), "Replicate -> Shard(0)")

    # An op on sharded DTensors: torch's sharding propagation plans the
    # collectives (here an all_reduce of partial sums for the matmul).
    x = distribute_tensor(full, mesh, [Shard(1)])
    w = distribute_tensor(full.t().contiguous(), mesh, [Shard(0)])
    prod = (x @ w).full_tensor()
    check(torch.allclose(prod, full @ full.t(), rtol=1e-5, atol=1e-5), "sharded matmul")
    print(f"rank {rank}: dtensor ok", flush=True)


def mesh_2d():
    """A 2-D mesh (2 x world/2): the row and column groups are new "mci"
    groups torch makes; a collective on each dimension."""
    from torch.distributed.device_mesh import init_device_mesh
    import torch.distributed._functional_collectives as fc

    rank, world = dist.get_rank(), dist.get_world_size()
    cols = world // 2
    mesh = init_device_mesh("cpu", (2, cols), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]
    check(dist.get_backend(dp.get_group()) == "mci", f"dp group backend {dist.get_backend(dp.get_group())}")
    row, col = rank // cols, rank % cols
    over_dp = fc.all_reduce(torch.tensor([float(rank)]), "sum", dp)
    check(over_dp.item() == float(col + (col + cols)), f"all_reduce over dp {over_dp}")
    over_tp = fc.all_gather_single(torch.tensor([float(rank)]), 0, tp)
    check(over_tp.tolist() == [float(row * cols + c) for c in range(cols)], f"all_gather over tp {over_tp}")
    print(f"rank {rank}: 2-D mesh ok", flush=True)


def _fsdp_train(group, steps=4, optimizer="adam"):
    """A small MLP sharded by fully_shard over group's 1-D mesh (or over a
    DeviceMesh given as group), trained a few steps on data every rank draws
    the same way; its final parameters (gathered whole) and losses."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    rank = dist.get_rank()
    mesh = group if isinstance(group, DeviceMesh) else DeviceMesh.from_group(group, "cpu")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen)
        y = torch.randn(8, 4, generator=gen)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    params = [p.full_tensor().detach().clone() for p in model.parameters()]
    return params, losses


def fsdp2_like_gloo():
    """FSDP2 on "mci" and on gloo, same model, data and optimizer (Adam,
    then SGD with momentum): the same parameters (relative 1e-6) and
    losses; and training changed them (a no-op would match too)."""
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    mci = dist.new_group(backend="mci")
    check(dist.get_backend(mci) == "mci", f"the mci group's backend is {dist.get_backend(mci)}")
    for optimizer in ("adam", "sgd"):
        want, want_losses = _fsdp_train(gloo, optimizer=optimizer)
        got, got_losses = _fsdp_train(mci, optimizer=optimizer)
        torch.manual_seed(0)
        init = [p.detach() for p in torch.nn.Linear(16, 32).parameters()]
        check(not torch.allclose(want[0], init[0]), f"{optimizer}: training left the first weight as it was")
        _check_same(want, got, want_losses, got_losses, optimizer, atol=1e-7)
    print(f"rank {rank}: fsdp2 matches gloo (losses {got_losses})", flush=True)


def _check_same(want, got, want_losses, got_losses, what, atol):
    """gloo's parameters and losses (want) against mci's (got), to 1e-6
    relative."""
    for i, (a, b) in enumerate(zip(want, got)):
        check(torch.allclose(b, a, rtol=1e-6, atol=atol),
              f"{what}: parameter {i} differs between gloo and mci by {(a - b).abs().max().item():.3g}")
    check(all(abs(a - b) <= 1e-6 * max(1.0, abs(a)) for a, b in zip(want_losses, got_losses)),
          f"{what}: losses differ: gloo {want_losses}, mci {got_losses}")


def hsdp_like_gloo():
    """FSDP2 on a 2-D "mci" mesh (replicate x shard: HSDP, the gradients
    reduce-scattered within a row, then all-reduced across rows) against
    plain FSDP2 over gloo on every rank: the same parameters."""
    from torch.distributed.device_mesh import init_device_mesh

    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
    want, want_losses = _fsdp_train(gloo, optimizer="sgd")
    got, got_losses = _fsdp_train(mesh, optimizer="sgd")
    _check_same(want, got, want_losses, got_losses, "HSDP against gloo's FSDP", atol=1e-6)
    print(f"rank {rank}: hsdp matches gloo", flush=True)


def compiled():
    """torch.compile(backend="aot_eager") of a function calling
    funcol.all_reduce and all_gather_single: dynamo traces the functional
    collectives into the graph, and they run on "mci"."""
    import torch.distributed._functional_collectives as fc

    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD

    def step(x):
        y = fc.all_reduce(x * 2, "sum", group)
        z = fc.all_gather_single(y + 1, 0, group)
        return z.sum(), y

    seen = []

    def recording_backend(gm, example_inputs):
        """What dynamo put in the graph; the graph then runs as it is."""
        seen.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        return gm.forward

    fn = torch.compile(step, backend="aot_eager", fullgraph=True)
    x = torch.full((3,), float(rank + 1))
    total, y = fn(x)
    tri = float(world * (world + 1) // 2)
    check(torch.equal(y, torch.full((3,), 2 * tri)), f"compiled all_reduce {y}")
    check(total.item() == world * 3 * (2 * tri + 1), f"compiled all_gather sum {total}")
    # A second call with other values reuses the graph and still communicates.
    total2, y2 = fn(x * 10)
    check(torch.equal(y2, torch.full((3,), 20 * tri)), f"second compiled call {y2}")
    # The collectives are in the one graph (fullgraph=True raises on a graph
    # break), not run by dynamo outside it.
    torch._dynamo.reset()
    _, y3 = torch.compile(step, backend=recording_backend, fullgraph=True)(x)
    check(torch.equal(y3, y), f"recorded graph's all_reduce {y3}")
    ops = " ".join(seen[0]) if len(seen) == 1 else ""
    check("all_reduce" in ops and "all_gather" in ops and "wait_tensor" in ops,
          f"the graph lacks the collectives: {seen}")
    print(f"rank {rank}: compiled ok", flush=True)


def init_timeout(scenario):
    return timedelta(seconds=60)


def teardown(scenario):
    # Rank 0 hosts torch's store: nobody leaves while another may still use it.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    if mci_torch.PATH != "ext":
        sys.exit(f"these scenarios need mci's C++ backend, but mci_torch.PATH is {mci_torch.PATH!r}")
    torch_batch.main(sys.argv[1:], globals(), "mci", init_timeout, teardown)
