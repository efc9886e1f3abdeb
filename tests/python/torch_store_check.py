"""torch's store over mci's (mci_torch/_torch_store.py): each operation
torch calls, with torch's TCPStore's semantics where the two stores differ,
and env:// routed to it when MCI_TORCH_STORE=mci (mcirun sets it when the
job's store is on etcd). One process, against an mci store it starts (the
mcirun it runs under only gives it the path to mci_torch).

    mcirun --standalone --nproc_per_node=1 python torch_store_check.py    exit 0: passed
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import mci_torch


def main():
    if mci_torch.PATH != "ext":
        print(f"skipped: torch's store over mci's is the C++ extension's (mci_torch.PATH={mci_torch.PATH!r})")
        return 77
    from mci_torch import _C, _torch_store

    server = _C.StoreServer("127.0.0.1", "tok")
    os.environ.update(MCI_STORE_HOSTED="1", MCI_STORE_ADDR="127.0.0.1", MCI_STORE_PORT=str(server.port),
                      MCI_JOB_TOKEN="tok", RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      TORCHELASTIC_RESTART_COUNT="2")
    # No torch store listens at MASTER_PORT: env:// must not go there.
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    fails = []

    def expect(what, got, want):
        if got != want:
            fails.append(f"{what}: got {got!r}, want {want!r}")

    store = _torch_store.client(datetime.timedelta(seconds=5))
    expect("a torch Store", isinstance(store, dist.Store), True)
    store.set("a", "x")
    expect("get", store.get("a"), b"x")
    expect("add", (store.add("n", 3), store.add("n", 2)), (3, 5))
    expect("check", (store.check(["a", "n"]), store.check(["a", "b"])), (True, False))
    # torch's TCPStore: a missing key with a non-empty expected answers expected.
    expect("compare_set on a missing key", store.compare_set("c", "q", "z"), b"q")
    expect("compare_set creates", store.compare_set("c", "", "z"), b"z")
    expect("compare_set swaps", store.compare_set("c", "z", "w"), b"w")
    expect("compare_set refuses", store.compare_set("c", "z", "v"), b"w")
    store.append("a", "yz")
    expect("append", store.get("a"), b"xyz")
    expect("multi_get", store.multi_get(["a", "c"]), [b"xyz", b"w"])
    store.multi_set(["m1", "m2"], ["1", "2"])
    expect("multi_set", store.get("m2"), b"2")
    expect("delete_key", (store.delete_key("a"), store.check(["a"])), (True, False))
    expect("a clone sees the same keys", store.clone().get("c"), b"w")
    store.set_timeout(datetime.timedelta(milliseconds=300))
    for what, call in (("get", lambda: store.get("never")),
                       ("wait", lambda: store.wait(["never"], datetime.timedelta(milliseconds=200)))):
        try:
            call()
            fails.append(f"{what} of a key nobody sets returned")
        except dist.DistStoreError as e:
            if "never" not in str(e):
                fails.append(f"{what}'s timeout does not name the key: {e}")
    # Its keys live in mci's store under torch/<attempt>/.
    expect("keys under torch/2", _C.torch_store("127.0.0.1", server.port, "tok", "torch", 5000).get("2/c"), b"w")

    os.environ["MCI_TORCH_STORE"] = "mci"
    keys_before = store.num_keys()
    dist.init_process_group("mci", timeout=datetime.timedelta(seconds=30))
    t = torch.ones(3)
    dist.all_reduce(t)
    expect("all_reduce", t.tolist(), [1.0, 1.0, 1.0])
    # env:// met on mci's store: torch's init left its keys there.
    expect("init's keys in mci's store", store.num_keys() > keys_before, True)
    dist.destroy_process_group()
    dist.init_process_group("mci", init_method="mci://?rank=0&world_size=1")
    expect("mci:// world", dist.get_world_size(), 1)
    dist.destroy_process_group()
    if fails:
        print("\n".join(fails))
        return 1
    print("passed: torch's store over mci's behaves as torch's TCPStore; env:// and mci:// meet on it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
