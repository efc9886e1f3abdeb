"""mcirun --monitor with a torch 2.15 program on "mci": the page sees the
ranks of torch's process group (its flight recorder is the extension's
mci group's), names the rank the others wait for while it stalls, and
exports the steps to /metrics.

    torch_monitor.py MCIRUN             the test (run with the torch venv's python)
    torch_monitor.py --worker           one rank (started by mcirun)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def worker():
    import datetime

    import torch.distributed as dist
    import mci_torch  # noqa: F401
    from monitor_job import torch_steps

    dist.init_process_group("mci", timeout=datetime.timedelta(seconds=60))
    torch_steps(4096)
    dist.destroy_process_group()


def main():
    from monitor_job import MonitoredJob

    mcirun = sys.argv[1]
    env = {"MCI_PYTHON": sys.executable}
    with MonitoredJob(mcirun, None, 2, env, command=[os.path.abspath(__file__), "--worker"]) as job:
        j = job.until(lambda j: j["verdict"]["state"] == "stalled", limit=90, what="a stalled verdict")
        assert j["verdict"]["rank"] == 1, j["verdict"]
        assert "in all_reduce #20 for rank 1, which is running its own code" in j["verdict"]["text"], j["verdict"]
        r0 = j["ranks"][0]
        assert r0["state"] == "waiting" and r0["op"]["kind"] == "all_reduce" and r0["op"]["bytes"] == 4096 * 4, r0
        assert r0["op"]["dtype"] == "f32", r0
        status, metrics = job.get("metrics")
        assert status == 200
        assert 'mci_collectives_total{rank="0",node="0",group="' in metrics, metrics[:2000]
        assert "mci_hang_state 2\n" in metrics, metrics[:2000]
        code = job.finish(limit=90)
        assert code == 0, "mcirun exited %s:\n%s" % (code, job.output())
    print("ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        main()
