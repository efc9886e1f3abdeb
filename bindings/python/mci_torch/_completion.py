"""Completes the Works of queued mci operations, in order, on one thread
per group: mci runs a group's async operations in order on its progress
thread, so waiting for them in the same order never waits longer than
needed. The queue holds the tensors until their operation is done."""

import queue
import threading

from ._lib import error, lib


class Completer:
    def __init__(self):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mci_torch completion", daemon=True)
        self._thread.start()

    def submit(self, handle, work, finish):
        """handle: an mci_work; work: its MciWork; finish(): what to do once
        it succeeded (copy results out), returning the Work's value."""
        self._queue.put((handle, work, finish))

    def close(self):
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            handle, work, finish = item
            del item
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
            work._finish(value, failure)
            del work, value, failure
