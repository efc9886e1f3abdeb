"""Completes the Works of queued mci operations. One thread takes them in
the order they were queued: mci runs a group's async operations in order on
its progress thread, so waiting for them in the same order never waits
longer than needed. The queue holds the tensors until their operation is
done.

Completing a Work runs its future's callbacks on that thread, and a
callback may start an operation and wait for it (torch's powerSGD_hook
does), which that thread would then never complete. So while a thread runs
callbacks and more operations are queued than threads are idle, another
thread starts (gloo's completions run on a pool too), up to MAX_THREADS."""

import collections
import threading

from ._lib import error, lib

MAX_THREADS = 8


class Completer:
    def __init__(self):
        self._cv = threading.Condition()
        self._queue = collections.deque()
        self._threads = []
        self._idle = 0
        self._in_callbacks = 0
        self._closing = False
        with self._cv:
            self._start_thread()

    def submit(self, handle, work, finish):
        """handle: an mci_work; work: its MciWork; finish(): what to do once
        it succeeded (copy results out), returning the Work's value."""
        with self._cv:
            self._queue.append((handle, work, finish))
            self._add_thread_if_needed()
            self._cv.notify()

    def close(self):
        with self._cv:
            self._closing = True
            self._cv.notify_all()
            threads = list(self._threads)
        me = threading.current_thread()
        for t in threads:
            if t is not me:
                t.join()

    def _start_thread(self):
        t = threading.Thread(target=self._run, name="mci_torch completion", daemon=True)
        self._threads.append(t)
        t.start()

    def _add_thread_if_needed(self):
        # Under the lock.
        if (not self._closing and self._in_callbacks > 0 and len(self._queue) > self._idle
                and len(self._threads) < MAX_THREADS):
            self._start_thread()

    def _run(self):
        while True:
            with self._cv:
                self._idle += 1
                while not self._queue and not self._closing:
                    self._cv.wait()
                self._idle -= 1
                if not self._queue:
                    return  # closing, nothing left
                handle, work, finish = self._queue.popleft()
            status = lib.mci_work_wait(handle)  # ctypes lets go of the GIL meanwhile
            failure = error(status) if status != 0 else None
            lib.mci_work_free(handle)
            value = None
            if failure is None:
                try:
                    value = finish()
                except BaseException as e:  # noqa: BLE001 - goes to whoever waits
                    failure = e
            del finish  # lets go of the operation's tensors
            with self._cv:
                self._in_callbacks += 1
                self._add_thread_if_needed()
            try:
                work._finish(value, failure)  # its future's callbacks run here
            finally:
                with self._cv:
                    self._in_callbacks -= 1
            del work, value, failure
