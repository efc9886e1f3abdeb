"""mci_torch's view of libmci's C interface against include/mci/mci_c.h: the
enum values (op kinds, reductions, dtypes, statuses), the mci_op struct and
every prototype's argument and result types. A value renumbered or an
argument added on one side only fails here rather than as wrong results.

usage: test_c_abi.py MCI_C_H PYTHON_PACKAGE_PARENT
(the build tree's python/ folder, where mci_torch and its _libpath are)."""

import ctypes
import os
import re
import sys
import types


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", text), flags=re.S)


def enums(text):
    """{enum name: {constant: value}}, implicit values counted as C does."""
    out = {}
    for name, body in re.findall(r"enum\s+(\w+)\s*\{(.*?)\}", text, flags=re.S):
        values, nxt = {}, 0
        for item in (i.strip() for i in body.split(",")):
            if not item:
                continue
            constant, _, value = (p.strip() for p in item.partition("="))
            nxt = int(value, 0) if value else nxt
            values[constant] = nxt
            nxt += 1
        out[name] = values
    return out


def struct_fields(text, name):
    """[(C type, field name)] of `typedef struct NAME { ... } NAME;`."""
    body = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}" % name, text, flags=re.S).group(1)
    fields = []
    for decl in (d.strip() for d in body.split(";")):
        if decl:
            m = re.fullmatch(r"(.+?)\s*(\w+)", decl)
            fields.append((m.group(1).replace(" ", ""), m.group(2)))
    return fields


def prototypes(text):
    """{function: (C result type, [C argument types])} of the mci_* functions."""
    out = {}
    for result, name, args in re.findall(r"^\s*([\w\s\*]+?)\s*\b(mci_\w+)\(([^)]*)\);", text, flags=re.M | re.S):
        types = []
        for arg in (a.strip() for a in args.split(",")):
            if arg and arg != "void":
                types.append(re.fullmatch(r"(.+?)\s*\w+", " ".join(arg.split())).group(1).replace(" ", ""))
        out[name] = (result.replace(" ", ""), types)
    return out


def ctype_of(c_type, lib_module):
    """The ctypes type that matches a C type of the header."""
    scalars = {"int": ctypes.c_int, "int64_t": ctypes.c_int64, "size_t": ctypes.c_size_t,
               "double": ctypes.c_double, "void": None, "constchar*": ctypes.c_char_p, "void*": ctypes.c_void_p}
    if c_type in scalars:
        return scalars[c_type]
    base = c_type.replace("const", "")
    if base == "mci_op*":
        return ctypes.POINTER(lib_module.Op)
    if base.endswith("**") and base.startswith("mci_"):
        return ctypes.POINTER(ctypes.c_void_p)  # an opaque handle's out-parameter
    if base.endswith("*") and base.startswith("mci_"):
        return ctypes.c_void_p  # an opaque handle
    if base == "int*":
        return ctypes.POINTER(ctypes.c_int)
    if base == "char**":
        return ctypes.POINTER(ctypes.c_char_p)  # a NULL-terminated array of strings
    raise AssertionError(f"test_c_abi.py does not know the C type '{c_type}': teach ctype_of")


def main():
    header_path, package_parent = sys.argv[1], sys.argv[2]
    # The package's modules without its __init__, which imports torch: this
    # check needs no torch, so any python3 runs it.
    package = types.ModuleType("mci_torch")
    package.__path__ = [os.path.join(package_parent, "mci_torch")]
    sys.modules["mci_torch"] = package
    from mci_torch import _lib, errors

    text = strip_comments(open(header_path).read())
    failures = []

    def expect(ok, what):
        if not ok:
            failures.append(what)

    e = enums(text)
    for enum, prefix in (("mci_op_kind", "MCI_"), ("mci_reduce_op", "MCI_"), ("mci_dtype", "MCI_")):
        expect(enum in e, f"mci_c.h has no enum {enum}")
        for constant, value in e.get(enum, {}).items():
            if constant == "MCI_NUM_OP_KINDS":
                continue  # a count, not a kind
            name = constant[len(prefix):]
            expect(getattr(_lib, name, None) == value,
                   f"{enum}: {constant} is {value} in mci_c.h, _lib.{name} is {getattr(_lib, name, 'missing')}")

    # Every kind libmci's rows know has its constant, named alike
    # (MCI_ALL_REDUCE is "all_reduce"), and no constant lacks its row.
    kinds = {c: v for c, v in e.get("mci_op_kind", {}).items() if c != "MCI_NUM_OP_KINDS"}
    expect(e.get("mci_op_kind", {}).get("MCI_NUM_OP_KINDS") == len(_lib.OP_KIND_NAMES),
           "mci_op_kind's MCI_NUM_OP_KINDS is not the number of kinds libmci has")
    expect(sorted(_lib.OP_KIND_NAMES) == sorted(kinds.values()),
           f"libmci's kinds are {sorted(_lib.OP_KIND_NAMES.items())}, mci_c.h's mci_op_kind {sorted(kinds.items())}")
    for constant, value in kinds.items():
        expect(_lib.OP_KIND_NAMES.get(value) == constant[len("MCI_"):].lower(),
               f"{constant} ({value}) is '{_lib.OP_KIND_NAMES.get(value)}' in libmci's rows")

    classes = {"CONFIG": errors.ConfigError, "TIMEOUT": errors.TimeoutError, "PEER": errors.PeerError,
               "MISMATCH": errors.MismatchError, "OTHER": errors.MciError}
    statuses = {c: v for c, v in e.get("mci_status", {}).items() if c != "MCI_OK"}
    expect(e.get("mci_status", {}).get("MCI_OK") == 0, "MCI_OK is not 0")
    expect(set(_lib._ERRORS) == set(statuses.values()),
           f"_lib._ERRORS maps {sorted(_lib._ERRORS)}, mci_c.h's errors are {sorted(statuses.values())}")
    for constant, value in statuses.items():
        word = constant.replace("MCI_ERR_", "")
        expect(word in classes, f"{constant}: no Python class is known for it (add it to errors.py and here)")
        expect(_lib._ERRORS.get(value) is classes.get(word), f"status {value} ({constant}) raises "
               f"{_lib._ERRORS.get(value)}, expected {classes.get(word)}")

    c_fields = struct_fields(text, "mci_op")
    py_fields = _lib.Op._fields_
    expect(len(c_fields) == len(py_fields), f"mci_op has {len(c_fields)} fields, _lib.Op {len(py_fields)}")
    for (c_type, c_name), (py_name, py_type) in zip(c_fields, py_fields):
        expect(ctype_of(c_type, _lib) == py_type,
               f"mci_op.{c_name} is {c_type}, _lib.Op.{py_name} is {py_type.__name__}")

    protos = prototypes(text)
    expect(len(protos) >= 10, f"only {len(protos)} prototypes found in mci_c.h: the parser is wrong")
    for name, (result, args) in protos.items():
        fn = getattr(_lib.lib, name)
        want_args = [ctype_of(a, _lib) for a in args]
        expect(fn.argtypes is not None and list(fn.argtypes) == want_args,
               f"{name}: mci_c.h takes ({', '.join(args)}), _lib declares {fn.argtypes}")
        want_result = ctype_of(result, _lib)
        expect(fn.restype == want_result,
               f"{name}: mci_c.h returns {result}, _lib declares {getattr(fn.restype, '__name__', fn.restype)}")

    if failures:
        print("mci_torch does not match include/mci/mci_c.h:\n  " + "\n  ".join(failures))
        return 1
    print(f"mci_torch matches mci_c.h: {sum(len(v) for v in e.values())} constants, "
          f"{len(c_fields)} mci_op fields, {len(protos)} functions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
