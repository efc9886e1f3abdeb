"""ProcessGroupMCI: torch.distributed's process group interface over mci.

Every operation is queued on the mci group's progress thread and returns a
torch Work made from a Future (torch._C._distributed_c10d's
_create_work_from_future), completed by the group's Completer: async_op=True
really runs in the background (DDP overlaps its all-reduces with backward),
and a blocking call is the same with an immediate wait()."""

import atexit
import ctypes
import datetime
import os
import sys
import time
import weakref

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _create_work_from_future

from . import _lib
from ._completion import Completer
from ._lib import ConfigError, check, lib
from ._rendezvous import has_key as _has_key
from ._rendezvous import meet
from ._work import MciWork, WorkRegistry

_DTYPES = {
    torch.float32: _lib.F32,
    torch.float64: _lib.F64,
    torch.float16: _lib.F16,
    torch.bfloat16: _lib.BF16,
    torch.int8: _lib.I8,
    torch.uint8: _lib.U8,
    torch.int32: _lib.I32,
    torch.int64: _lib.I64,
    torch.bool: _lib.U8,  # as uint8 (one byte, 0 or 1)
}

# The groups still open, closed at exit (ProcessGroupMCI._close_at_exit).
_LIVE_GROUPS = weakref.WeakSet()


def _close_groups_at_exit():
    for pg in list(_LIVE_GROUPS):
        pg._close_at_exit()


atexit.register(_close_groups_at_exit)

def _fail_config(text):
    raise ConfigError(f"mci_torch: {text}")


def _check_tensor(t, what="tensor"):
    if not isinstance(t, torch.Tensor):
        _fail_config(f"{what} is a {type(t).__name__}, not a torch.Tensor")
    if t.device.type != "cpu":
        _fail_config(
            f"{what} is on {t.device}: the mci backend takes CPU tensors; use backend 'nccl' for CUDA tensors "
            "(or move the tensor to the CPU)"
        )
    if t.layout != torch.strided:
        _fail_config(f"{what} has layout {t.layout}: the mci backend takes dense tensors")
    if t.dtype not in _DTYPES:
        _fail_config(
            f"{what} has dtype {t.dtype}, which mci does not carry; use one of "
            + ", ".join(str(d).replace("torch.", "") for d in _DTYPES)
        )


def _op_name(op):
    """SUM, AVG, ...: torch 2.x's ReduceOp objects print as an address."""
    name = str(getattr(op, "op", op))
    return name.rsplit(".", 1)[-1]


def _reduce_code(op, dtype):
    """mci's reduction for torch's ReduceOp on dtype, or None for the bitwise
    ones (done on gathered values)."""
    R = dist.ReduceOp
    if dtype == torch.bool:
        # bool: sum and max are "or", product and min are "and" (as ProcessGroupNCCL).
        table = {R.SUM: _lib.MAX, R.MAX: _lib.MAX, R.BOR: _lib.MAX, R.PRODUCT: _lib.MIN, R.MIN: _lib.MIN, R.BAND: _lib.MIN}
        for k, v in table.items():
            if op == k:
                return v
        if op == R.BXOR:
            return None
        _fail_config(f"ReduceOp {_op_name(op)} does not apply to bool tensors; use SUM/MAX (or), PRODUCT/MIN (and) "
                     "or BXOR")
    for k, v in ((R.SUM, _lib.SUM), (R.AVG, _lib.AVG), (R.PRODUCT, _lib.PROD), (R.MIN, _lib.MIN), (R.MAX, _lib.MAX)):
        if op == k:
            return v
    # any(==), not `in`: torch 2.x's ReduceOp objects do not compare equal
    # to RedOpType values from that side.
    if any(op == k for k in (R.BAND, R.BOR, R.BXOR)):
        if dtype.is_floating_point:
            _fail_config(f"ReduceOp {_op_name(op)} needs an integer (or bool) tensor, not {dtype}")
        return None
    _fail_config(f"ReduceOp {_op_name(op)} is not supported by mci (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR "
                 "are)")


def _bitwise(op, stacked):
    R = dist.ReduceOp
    f = torch.bitwise_and if op == R.BAND else torch.bitwise_or if op == R.BOR else torch.bitwise_xor
    acc = stacked[0].clone()
    for row in stacked[1:]:
        acc = f(acc, row)
    return acc


def _staged(t):
    """(contiguous tensor to hand to mci, finish() copying back into t)."""
    if t.is_contiguous():
        return t, lambda: None
    work = t.contiguous()
    return work, lambda: t.copy_(work)


def _flat(tensors):
    """One contiguous buffer holding tensors (all of one dtype), and a
    function copying it back into them."""
    if len(tensors) == 1:
        return _staged(tensors[0])
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        _fail_config(f"the tensors of one call must share a dtype, got {sorted(map(str, dtypes))}")
    flat = torch.cat([t.reshape(-1) for t in tensors])

    def back():
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t))
            offset += n

    return flat, back


def _caller_waits_at_once():
    """True when torch.distributed's own function called us with
    async_op=False: it waits on the Work at once, so the operation runs on
    this thread (no hand-over to mci's progress thread and back, which costs
    tens of microseconds on a small tensor). Any other caller (DDP's reducer,
    async_op=True, a direct call) gets the operation queued."""
    try:
        frame = sys._getframe(3)  # _submit <- the group's method <- its caller
    except ValueError:  # called from C++ with no Python caller (DDP's reducer)
        return False
    return (
        frame.f_globals.get("__name__") == "torch.distributed.distributed_c10d"
        and frame.f_locals.get("async_op") is False
    )


def _ptr(t):
    return ctypes.c_void_p(t.data_ptr()) if t.numel() else ctypes.c_void_p(0)


class ProcessGroupMCI(dist.ProcessGroup):
    """A torch process group whose operations run on mci (backend 'cpu':
    shared memory between the ranks of a host, TCP between hosts)."""

    def __init__(self, store, rank, size, timeout=datetime.timedelta(minutes=30)):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._timeout_ms = max(1, int(timeout.total_seconds() * 1000))
        self._server = ctypes.c_void_p()
        self._group = ctypes.c_void_p()
        self._completer = None
        self._works = WorkRegistry()
        self._store = store  # for monitored_barrier
        self._monitored_rounds = 0
        def start_server(token):
            port = ctypes.c_int()
            check(lib.mci_store_server_start(b"0.0.0.0", token.encode(), ctypes.byref(self._server), ctypes.byref(port)))
            return self._server, port.value

        host, port, token, _, group_name = meet(store, rank, size, timeout, start_server)
        backend = os.environ.get("MCI_TORCH_ENGINE", "cpu").encode()
        check(
            lib.mci_group_new(
                host.encode(), port, token.encode(), rank, size, self._timeout_ms, backend, group_name.encode(),
                None, ctypes.byref(self._group),
            )
        )
        self._completer = Completer()
        _LIVE_GROUPS.add(self)

    # torch's names --------------------------------------------------------

    def getBackendName(self):  # noqa: N802 - torch's name
        return "mci"

    def name(self):
        return "mci"

    def _get_backend(self, device):  # noqa: ARG002 - torch's signature
        """torch 2.x asks a group for its backend on a device (e.g.
        batch_isend_irecv, whether it coalesces): this group is its own,
        and it does not coalesce (supports_coalescing is absent)."""
        return self

    def __del__(self):
        self.shutdown()

    def _close_at_exit(self):
        """Before the interpreter's finalization (atexit): operations still
        running are aborted (the program is leaving, nobody will wait on
        them), then the group is closed while its completion thread can
        still run: a thread inside torch's C++ when finalization begins
        would abort the process (see _work.py)."""
        if getattr(self, "_group", None) and self._works.pending():
            lib.mci_group_abort(self._group, b"the process is exiting with operations still running")
        self.shutdown()

    def shutdown(self):
        """Waits for queued work, then closes the group (also at garbage collection)."""
        if getattr(self, "_completer", None) is not None:
            self._completer.close()
            self._completer = None
        if getattr(self, "_group", None):
            lib.mci_group_free(self._group)
            self._group = ctypes.c_void_p()
        if getattr(self, "_server", None):
            lib.mci_store_server_free(self._server)
            self._server = ctypes.c_void_p()

    # plumbing ---------------------------------------------------------------

    def _submit(self, kind, inp=None, out=None, count=0, dtype=0, op=0, root=0, peer=0, tag=0, finish=None):
        if not self._group:
            _fail_config("this process group was shut down (destroy_process_group); create a new one")
        failed = self._works.take_unseen_failure()
        if failed is not None:
            # An async operation failed and its Work was never waited on:
            # its output tensors were never written, so going on would
            # compute with stale values.
            e = failed._failure
            raise type(e)(f"mci_torch: an earlier async {failed._what} on this group failed, and nobody "
                          f"waited on its Work (its output was never written): {e}") from None
        blocking = _caller_waits_at_once()
        o = _lib.Op(kind, _ptr(inp) if inp is not None else None, _ptr(out) if out is not None else None, count,
                    dtype, op, root, peer, tag, 0 if blocking else 1)
        handle = ctypes.c_void_p()
        status = lib.mci_run(self._group, ctypes.byref(o), ctypes.byref(handle))
        if status != 0:
            raise _lib.error(status) from None  # raised here, not from a helper: a shorter traceback
        if blocking:
            fut = torch.futures.Future()
            fut.set_result(finish())
            return _create_work_from_future(fut)
        work = MciWork(self._works, _lib.OP_KIND_NAMES.get(kind, "operation"))
        # finish keeps inp and out alive until the operation is done.
        keep = (inp, out)
        self._completer.submit(handle, work, lambda: (keep, finish())[1])
        return work

    def _check_root(self, root, what):
        if not 0 <= root < self._size:
            _fail_config(f"{what}: root {root} is outside [0, {self._size})")

    # collectives ------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        if not isinstance(tensors, (list, tuple)):
            tensors = [tensors]
        op = opts.reduceOp if isinstance(opts, dist.AllreduceOptions) else (opts if opts is not None else dist.ReduceOp.SUM)
        for t in tensors:
            _check_tensor(t)
        buf, back = _flat(list(tensors))
        code = _reduce_code(op, buf.dtype)
        if code is None:
            return self._bitwise_allreduce(op, buf, lambda: (back(), list(tensors))[1])
        return self._submit(_lib.ALL_REDUCE, buf, buf, buf.numel(), _DTYPES[buf.dtype], code,
                            finish=lambda: (back(), list(tensors))[1])

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts)

    def _bitwise_allreduce(self, op, buf, done):
        gathered = torch.empty((self._size,) + tuple(buf.shape), dtype=buf.dtype)

        def finish():
            buf.copy_(_bitwise(op, gathered))
            return done()

        return self._submit(_lib.ALL_GATHER, buf, gathered, buf.numel(), _DTYPES[buf.dtype], finish=finish)

    def broadcast(self, tensors, opts=None):
        if not isinstance(tensors, (list, tuple)):
            tensors = [tensors]
        root = opts.rootRank if isinstance(opts, dist.BroadcastOptions) else int(opts or 0)
        self._check_root(root, "broadcast")
        for t in tensors:
            _check_tensor(t)
        buf, back = _flat(list(tensors))
        return self._submit(_lib.BROADCAST, buf, buf, buf.numel(), _DTYPES[buf.dtype], root=root,
                            finish=lambda: (back(), list(tensors))[1])

    def reduce(self, tensors, opts):
        (t,) = tensors
        _check_tensor(t)
        self._check_root(opts.rootRank, "reduce")
        buf, back = _staged(t)
        code = _reduce_code(opts.reduceOp, t.dtype)
        if code is None:
            _fail_config(f"reduce with {_op_name(opts.reduceOp)}: use all_reduce for the bitwise operations")
        return self._submit(_lib.REDUCE, buf, buf, buf.numel(), _DTYPES[t.dtype], code, root=opts.rootRank,
                            finish=lambda: (back(), [t])[1])

    def _one_per_rank(self, ref, tensors, what, side):
        """tensors: one per rank, each like ref (the tensor on the other side)."""
        if len(tensors) != self._size:
            _fail_config(f"{what} needs {self._size} {side} tensors (one per rank), got {len(tensors)}")
        for i, t in enumerate(tensors):
            _check_tensor(t, f"{what} {side} {i}")
            if t.numel() != ref.numel() or t.dtype != ref.dtype:
                _fail_config(f"{what}: {side} {i} has {t.numel()} {t.dtype} elements, the other side "
                             f"{ref.numel()} {ref.dtype}")

    def allgather(self, output_tensors, input_tensors, opts=None):
        (inp,) = input_tensors
        (outs,) = output_tensors
        _check_tensor(inp, "all_gather input")
        self._one_per_rank(inp, outs, "all_gather", "output")
        src = inp.contiguous()
        flat = torch.empty((self._size, inp.numel()), dtype=inp.dtype)

        def finish():
            for i, o in enumerate(outs):
                o.copy_(flat[i].view_as(o))
            return output_tensors

        return self._submit(_lib.ALL_GATHER, src, flat, inp.numel(), _DTYPES[inp.dtype], finish=finish)

    def _check_whole_tensor(self, op, whole_name, whole, share):
        """whole holds one share per rank, of share's dtype."""
        _check_tensor(whole, f"{op} {whole_name}")
        _check_tensor(share, f"{op} {'input' if whole_name == 'output' else 'output'}")
        if whole.numel() != share.numel() * self._size or whole.dtype != share.dtype:
            _fail_config(f"{op}: the {whole_name} needs {self._size} x {share.numel()} {share.dtype} "
                         f"elements, it has {whole.numel()} {whole.dtype}")

    def _allgather_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        self._check_whole_tensor("all_gather_into_tensor", "output", output, input)
        src = input.contiguous()
        out, back = _staged(output)
        return self._submit(_lib.ALL_GATHER, src, out, input.numel(), _DTYPES[input.dtype],
                            finish=lambda: (back(), [output])[1])

    all_gather_into_tensor = _allgather_base
    all_gather_single = _allgather_base  # the name torch >= 2.13 calls (all_gather_into_tensor, FSDP2)

    def gather(self, output_tensors, input_tensors, opts):
        (inp,) = input_tensors
        _check_tensor(inp, "gather input")
        root = opts.rootRank
        self._check_root(root, "gather")
        src = inp.contiguous()
        flat = torch.empty((self._size, inp.numel()), dtype=inp.dtype) if self._rank == root else torch.empty(0, dtype=inp.dtype)
        outs = output_tensors[0] if self._rank == root else []
        if self._rank == root:
            self._one_per_rank(inp, outs, "gather", "output")

        def finish():
            for i, o in enumerate(outs):
                o.copy_(flat[i].view_as(o))
            return output_tensors

        return self._submit(_lib.GATHER, src, flat, inp.numel(), _DTYPES[inp.dtype], root=root, finish=finish)

    def scatter(self, output_tensors, input_tensors, opts):
        (out,) = output_tensors
        _check_tensor(out, "scatter output")
        root = opts.rootRank
        self._check_root(root, "scatter")
        if self._rank == root:
            ins = input_tensors[0]
            self._one_per_rank(out, ins, "scatter", "input")
            flat = torch.stack([t.reshape(-1) for t in ins])
        else:
            flat = torch.empty(0, dtype=out.dtype)
        dst, back = _staged(out)
        return self._submit(_lib.SCATTER, flat, dst, out.numel(), _DTYPES[out.dtype], root=root,
                            finish=lambda: (back(), output_tensors)[1])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        (out,) = output_tensors
        (ins,) = input_tensors
        _check_tensor(out, "reduce_scatter output")
        self._one_per_rank(out, ins, "reduce_scatter", "input")
        flat = torch.stack([t.reshape(-1) for t in ins])
        return self._reduce_scatter_flat(out, flat, opts, output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002 - torch's name
        self._check_whole_tensor("reduce_scatter_tensor", "input", input, output)
        return self._reduce_scatter_flat(output, input.contiguous(), opts, [output])

    reduce_scatter_tensor = _reduce_scatter_base
    reduce_scatter_single = _reduce_scatter_base  # the name torch >= 2.13 calls

    def _reduce_scatter_flat(self, out, flat, opts, result):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        code = _reduce_code(op, out.dtype)
        if code is None:
            _fail_config(f"reduce_scatter with {_op_name(op)}: use all_reduce for the bitwise operations")
        dst, back = _staged(out)
        return self._submit(_lib.REDUCE_SCATTER, flat, dst, out.numel(), _DTYPES[out.dtype], code,
                            finish=lambda: (back(), result)[1])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        _check_tensor(output, "all_to_all_single output")
        _check_tensor(input, "all_to_all_single input")
        n = self._size
        row_in = input[0].numel() if input.dim() and input.shape[0] else 1
        row_out = output[0].numel() if output.dim() and output.shape[0] else 1
        ins = list(input_split_sizes) or ([input.shape[0] // n] * n if input.dim() else [])
        outs = list(output_split_sizes) or ([output.shape[0] // n] * n if output.dim() else [])
        if not input_split_sizes and not output_split_sizes:
            if input.numel() % n or output.numel() % n:
                _fail_config(f"all_to_all_single: {input.numel()} elements do not split evenly over {n} ranks; "
                             "pass input_split_sizes and output_split_sizes")
            dst, back = _staged(output)
            return self._submit(_lib.ALL_TO_ALL, input.contiguous(), dst, input.numel() // n, _DTYPES[input.dtype],
                                finish=lambda: (back(), [output])[1])
        if len(ins) != n or len(outs) != n:
            _fail_config(f"all_to_all_single: the split sizes need {n} entries each, got {len(ins)} and {len(outs)}")
        return self._uneven_all_to_all(
            [input.reshape(-1)[sum(ins[:j]) * row_in:(sum(ins[:j]) + ins[j]) * row_in] for j in range(n)],
            output, [o * row_out for o in outs])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self._size
        if len(input_tensors) != n or len(output_tensors) != n:
            _fail_config(f"all_to_all needs {n} input and {n} output tensors, got {len(input_tensors)} and "
                         f"{len(output_tensors)}")
        for t in list(input_tensors) + list(output_tensors):
            _check_tensor(t, "all_to_all tensor")
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=output_tensors[0].dtype)
        return self._uneven_all_to_all([t.reshape(-1) for t in input_tensors], flat_out,
                                       [t.numel() for t in output_tensors],
                                       after=lambda: self._split_into(flat_out, output_tensors))

    @staticmethod
    def _split_into(flat, tensors):
        offset = 0
        for t in tensors:
            t.copy_(flat[offset:offset + t.numel()].view_as(t))
            offset += t.numel()
        return tensors

    def _uneven_all_to_all(self, pieces, output, out_counts, after=None):
        """Slices of different sizes: every slice padded to the largest one
        in the job (found with one small all-reduce), one all_to_all, then
        the received slices packed into output."""
        n = self._size
        dtype = pieces[0].dtype if pieces else output.dtype
        longest = torch.tensor([max([p.numel() for p in pieces] + out_counts + [0])], dtype=torch.int64)
        self._submit(_lib.ALL_REDUCE, longest, longest, 1, _DTYPES[torch.int64], _lib.MAX,
                     finish=lambda: None).wait()
        width = int(longest.item())
        if width == 0:
            return self._submit(_lib.BARRIER, finish=after or (lambda: [output]))
        send = torch.zeros((n, width), dtype=dtype)
        for j, p in enumerate(pieces):
            send[j, : p.numel()] = p
        recv = torch.empty((n, width), dtype=dtype)
        dst, back = _staged(output)
        flat_dst = dst.reshape(-1)

        def finish():
            offset = 0
            for i, c in enumerate(out_counts):
                flat_dst[offset:offset + c] = recv[i, :c]
                offset += c
            back()
            return after() if after else [output]

        return self._submit(_lib.ALL_TO_ALL, send, recv, width, _DTYPES[dtype], finish=finish)

    def barrier(self, opts=None):
        return self._submit(_lib.BARRIER, finish=lambda: [])

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """gloo's monitored_barrier, over the store torch gave this group:
        rank 0 waits at most timeout for every other rank and raises
        TimeoutError naming the first one missing (every missing one with
        wait_all_ranks=True); the others wait as long for rank 0's release.
        The timeout is the one given, zero included (then rank 0 only looks
        whether the others are there); None or a negative one means the
        group's. Errors start with gloo's sentence, then mci's."""
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
        if seconds is None or seconds < 0:
            seconds = self._timeout_ms / 1000
        ms = int(seconds * 1000)
        self._monitored_rounds += 1
        prefix = f"mci_torch/monitored_barrier/{self._monitored_rounds}/"
        what = f"monitored_barrier #{self._monitored_rounds}"

        def arrived(key, left):
            # torch's store takes a zero timeout as "no timeout": a zero
            # budget is a look, never a wait.
            try:
                if left > 0:
                    self._store.wait([key], datetime.timedelta(seconds=left))
                    return True
                return _has_key(self._store, key)
            except Exception:  # noqa: BLE001 - torch's store raises its own types
                return False

        if self._rank != 0:
            self._store.set(prefix + str(self._rank), "1")
            if not arrived(prefix + "release", seconds):
                raise _lib.TimeoutError(
                    f"Rank {self._rank} successfully reached monitoredBarrier, but received errors while waiting "
                    "for send/recv from rank 0. Please check rank 0 logs for faulty rank. "
                    f"mci_torch: {what}: rank {self._rank} arrived, but rank 0 did not release it within "
                    f"{seconds:g}s: rank 0 has not reached the barrier, or found ranks missing (its error names "
                    "them)")
            return
        deadline = time.monotonic() + seconds
        missing, passed = [], []
        for r in range(1, self._size):
            left = deadline - time.monotonic()
            if arrived(prefix + str(r), left):
                passed.append(r)
                continue
            if not wait_all_ranks and left <= 0:
                done = (f"Successfully processed ranks: {', '.join(map(str, passed))}." if passed
                        else "No ranks successfully processed in monitoredBarrier.")
                raise _lib.TimeoutError(
                    f"Rank 0 timed out in monitoredBarrier after {ms} ms. Current rank: {r}. {done} "
                    f"mci_torch: {what}: rank {r} had not reached it when the {seconds:g}s timeout ran out. "
                    "That rank is stuck or slower before this barrier.")
            missing.append(r)
            if not wait_all_ranks:
                break
        if missing:
            names = ", ".join(map(str, missing))
            many = len(missing) > 1
            raise _lib.TimeoutError(
                f"[Rank 0]: {'Ranks' if many else 'Rank'} {names} failed to pass monitoredBarrier in {ms} ms. "
                f"mci_torch: {what}: rank{'s' if many else ''} {names} did not reach it within "
                f"{seconds:g}s" + ("" if wait_all_ranks or self._size == 2 else
                                   " (the first missing one; wait_all_ranks=True names them all)")
                + ". Those ranks are stuck or slower before this barrier.")
        self._store.set(prefix + "release", "1")

    # point-to-point -----------------------------------------------------------

    def send(self, tensors, dst, tag=0):
        (t,) = tensors
        _check_tensor(t, "send tensor")
        if not 0 <= dst < self._size or dst == self._rank:
            _fail_config(f"send to rank {dst}: the peer must be another rank in [0, {self._size})")
        src = t.contiguous()
        return self._submit(_lib.SEND, src, None, t.numel(), _DTYPES[t.dtype], peer=dst, tag=tag,
                            finish=lambda: [t])

    def recv(self, tensors, src, tag=0):
        (t,) = tensors
        _check_tensor(t, "recv tensor")
        if not 0 <= src < self._size or src == self._rank:
            _fail_config(f"recv from rank {src}: the peer must be another rank in [0, {self._size})")
        dst, back = _staged(t)
        return self._submit(_lib.RECV, None, dst, t.numel(), _DTYPES[t.dtype], peer=src, tag=tag,
                            finish=lambda: (back(), [t])[1])

    def recv_anysource(self, tensors, tag=0):
        _fail_config("recv without a source rank is not supported: pass src= to recv/irecv")


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier for mci groups too: torch 1.13
    refuses it before the backend is called for every backend but gloo.
    Other groups go to torch's own."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupMCI):
        return pg.monitored_barrier(timeout, wait_all_ranks)
    return dist.monitored_barrier(group=group, timeout=timeout, wait_all_ranks=wait_all_ranks)


def create_process_group(store, rank, size, timeout):
    """The creator torch.distributed calls for backend 'mci'."""
    return ProcessGroupMCI(store, rank, size, timeout)
