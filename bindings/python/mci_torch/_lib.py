"""libmci through ctypes: its C interface (include/mci/mci_c.h) and the
errors it reports, as Python exceptions."""

import ctypes
import os

from . import _libpath
from .errors import ConfigError, MciError, MismatchError, PeerError, TimeoutError


_ERRORS = {1: ConfigError, 2: TimeoutError, 3: PeerError, 4: MismatchError, 5: MciError}

# mci_op_kind: ALL_REDUCE, BROADCAST, ... are made below from libmci's own
# list (mci_op_kind_name), so a kind needs no line here.
# mci_reduce_op
SUM, AVG, PROD, MIN, MAX = range(5)
# mci_dtype
F32, F64, F16, BF16, I8, U8, I32, I64 = range(8)
# These lists follow include/mci/mci_c.h; tests/python/test_c_abi.py checks
# them, the errors, Op and every prototype against it.


class Op(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int),
        ("inp", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("root", ctypes.c_int),
        ("peer", ctypes.c_int),
        ("tag", ctypes.c_int),
        ("async_", ctypes.c_int),
    ]


def _load():
    path = os.environ.get("MCI_LIBRARY") or _libpath.LIBRARY
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(
            f"mci_torch cannot load libmci ({path}): {e}. Set MCI_LIBRARY to the path of libmci.so, "
            "or reinstall mci so that the package and the library sit side by side."
        ) from e
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    lib.mci_last_error.restype = cp
    lib.mci_last_error.argtypes = []
    lib.mci_op_kind_name.restype = cp
    lib.mci_op_kind_name.argtypes = [ci]
    lib.mci_store_server_start.argtypes = [cp, cp, ctypes.POINTER(vp), ctypes.POINTER(ci)]
    lib.mci_store_server_free.argtypes = [vp]
    lib.mci_store_server_free.restype = None
    lib.mci_group_new.argtypes = [cp, ci, cp, ci, ci, ctypes.c_int64, cp, cp, ctypes.POINTER(cp), ctypes.POINTER(vp)]
    lib.mci_group_free.argtypes = [vp]
    lib.mci_group_free.restype = None
    lib.mci_group_abort.argtypes = [vp, cp]
    lib.mci_run.argtypes = [vp, ctypes.POINTER(Op), ctypes.POINTER(vp)]
    lib.mci_work_wait.argtypes = [vp]
    lib.mci_work_is_completed.argtypes = [vp]
    lib.mci_work_duration_ms.argtypes = [vp]
    lib.mci_work_duration_ms.restype = ctypes.c_double
    lib.mci_work_free.argtypes = [vp]
    lib.mci_work_free.restype = None
    return lib


lib = _load()


def error(status):
    """The exception for a failed call, read on the thread that made it."""
    text = lib.mci_last_error().decode("utf-8", "replace")
    return _ERRORS.get(status, MciError)(text)


def _op_kind_names():
    names = []
    while (name := lib.mci_op_kind_name(len(names))) is not None:
        names.append(name.decode())
    return names


# {mci_op_kind: its name}, read once from libmci's rows ("all_reduce").
OP_KIND_NAMES = dict(enumerate(_op_kind_names()))
# One constant per kind, named as mci_c.h names it: ALL_REDUCE = 0, ...
globals().update({name.upper(): value for value, name in OP_KIND_NAMES.items()})


def check(status):
    if status != 0:
        raise error(status)
