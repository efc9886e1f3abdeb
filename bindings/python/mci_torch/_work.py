"""The torch Work of a queued mci operation: its wait() raises mci's error,
and its Future carries that error in C++ so that torch's own C++ callers
(DDP's reducer, the model check at DDP's construction) see a failure too.

Why not torch's _create_work_from_future alone: the Work it makes returns
True from wait() whatever the Future holds, and a Future's exception set
from Python (Future.set_exception) is, in C++, a successful value holding
the exception object, so DDP read it as its gradients and crashed. An
error raised inside a Future's then() callback is a real C++ error: the
Future handed out here is such a child of the one the completion thread
completes.

Why the group keeps each Work alive: torch's C++ callers hold the Work
through a pointer the Python object does not know about; once Python lets
go of it, its wait() and get_future() fall back to torch's base Work,
whose wait() blocks forever. So the group holds every Work until the
operation is done and somebody has waited on it or taken its Future (after
which C++ callers use the Future, a C++ object), and holds the last
_KEEP_UNTOUCHED finished ones that nobody touched."""

import collections
import datetime
import threading

import torch
import torch.distributed as dist

_KEEP_UNTOUCHED = 1024


def _raise_failure(fut):
    """then() callback: a failure becomes the child Future's C++ error."""
    value = fut.value()
    if isinstance(value, BaseException):
        raise value
    return value


def fresh(error):
    """A new exception of error's type and text, with no traceback: raised
    from the user's frame, not from mci_torch's internals, and raisable
    again by another wait() without growing."""
    try:
        copy = type(error)(*error.args)
    except Exception:  # noqa: BLE001 - a type that takes other arguments
        copy = RuntimeError(str(error))
    return copy.with_traceback(None)


class WorkRegistry:
    """The group's Works that torch's C++ side may still call (see above),
    and the failures nobody has seen yet."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live = set()
        self._untouched = {}  # insertion-ordered: the oldest first
        self._unseen = collections.deque()

    def add(self, work):
        with self._lock:
            self._live.add(work)

    def finished(self, work):
        with self._lock:
            work._finished = True  # under the lock: touched() decides on it, not on _done (set later)
            if work._failure is not None and not work._touched:
                self._unseen.append(work)
            if work._touched:
                self._live.discard(work)
            else:
                self._untouched[work] = None
                while len(self._untouched) > _KEEP_UNTOUCHED:
                    oldest = next(iter(self._untouched))
                    del self._untouched[oldest]
                    self._live.discard(oldest)

    def touched(self, work):
        with self._lock:
            if work._finished:
                self._live.discard(work)
                self._untouched.pop(work, None)

    def pending(self):
        """Whether an operation is still running."""
        with self._lock:
            return any(not w._done.is_set() for w in self._live)

    def take_unseen_failure(self):
        """The first failure of an operation nobody waited on, once."""
        if not self._unseen:  # every call asks: no lock while there is none
            return None
        with self._lock:
            while self._unseen:
                work = self._unseen.popleft()
                if not work._touched:
                    work._touched = True
                    return work
            return None


class MciWork(dist.Work):
    """A queued operation's Work. wait() and get_future() raise (or carry)
    mci's error; the output tensors are only written once it succeeded."""

    def __init__(self, registry, what):
        super().__init__()
        self._registry = registry
        self._what = what  # e.g. "all_reduce", for the messages
        self._done = threading.Event()
        self._value = None
        self._failure = None
        self._touched = False
        self._finished = False  # the registry's view, set under its lock
        self._base = torch.futures.Future()
        self._future = self._base.then(_raise_failure)
        registry.add(self)

    # called by the completion thread, once
    def _finish(self, value, failure):
        self._value, self._failure = value, failure
        # The Future first: once wait() returns, the program may exit, and
        # the completion thread must not be inside torch's C++ then (a
        # thread that takes the GIL during the interpreter's finalization
        # is ended by a forced unwind, which C++ frames turn into abort()).
        self._base.set_result(failure if failure is not None else value)
        self._registry.finished(self)
        self._done.set()

    def _touch(self):
        self._touched = True
        self._registry.touched(self)

    # torch's Work interface ------------------------------------------------

    def wait(self, timeout=None):
        """Waits for the operation; raises its error (TimeoutError with the
        hang report, MismatchError, PeerError) if it failed. timeout (a
        timedelta, torch's argument) bounds this wait only; the group's
        own timeout bounds the operation."""
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else timeout
        if seconds:
            if not self._done.wait(seconds):
                from .errors import TimeoutError  # noqa: A004 - mci's

                raise TimeoutError(
                    f"mci_torch: {self._what} did not finish within wait(timeout={seconds:g}s); it is still "
                    "running and will end by the group's own timeout (init_process_group/new_group timeout=)"
                )
        else:
            self._done.wait()
        self._touch()
        if self._failure is not None:
            raise fresh(self._failure) from None
        return True

    def get_future(self):
        """A Future that completes with the output tensors, or with mci's
        error (raised by its wait() and seen by torch's C++ callers)."""
        self._touch()
        return self._future

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._failure is None

    def exception(self):
        self._touch()
        return self._failure

    def result(self):
        self.wait()
        return self._value if isinstance(self._value, list) else []

    def synchronize(self):
        self.wait()
