"""mci's page on torch 2.15's debug server: a torch job on "mci" under
mcirun --monitor starts torch.distributed.debug.start_debug_server with
mci_torch.debug.debug_handlers(); while rank 1 stalls, the debug server's
/mci page (served by rank 0) names it as the one everyone waits for, and
torch's own pages are still there.

    torch_debug_server.py MCIRUN       the test (the torch venv's python)
    torch_debug_server.py --worker     one rank (started by mcirun)
Exit 77 (skipped) without aiohttp (which the debug server needs)."""
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def worker():
    import datetime

    import torch.distributed as dist
    import torch.distributed.debug as debug
    import mci_torch  # noqa: F401
    import mci_torch.debug
    from monitor_job import torch_steps

    dist.init_process_group("mci", timeout=datetime.timedelta(seconds=60))
    debug.start_debug_server(port=int(os.environ["DEBUG_PORT"]), handlers=mci_torch.debug.debug_handlers(),
                             start_method="spawn")
    torch_steps(256)
    if dist.get_rank() == 0:  # torch's stop_debug_server asserts on the other ranks (no frontend there)
        debug.stop_debug_server()
    dist.destroy_process_group()


def main():
    try:
        import aiohttp  # noqa: F401
        import tabulate  # noqa: F401
    except ImportError as e:
        print("skipped: torch's debug server needs %s (scripts/torch-pin.txt)" % e.name)
        return 77
    from monitor_job import MonitoredJob, free_port

    port = free_port()
    env = {"MCI_PYTHON": sys.executable, "DEBUG_PORT": str(port)}
    with MonitoredJob(sys.argv[1], None, 2, env, command=[os.path.abspath(__file__), "--worker"]) as job:
        job.until(lambda j: j["verdict"]["state"] == "stalled", limit=90, what="a stalled verdict")
        end = time.monotonic() + 60
        page = ""
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/mci" % port, timeout=10) as r:
                    page = r.read().decode()
                if "for rank 1" in page:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        assert "<b>stalled</b>: waiting" in page and "for rank 1, which is running its own code" in page, page[-3000:]
        assert "(everyone waits for it)" in page, page[-3000:]
        assert 'href="/mci"' in page, "the nav link"
        with urllib.request.urlopen("http://127.0.0.1:%d/" % port, timeout=10) as r:
            assert r.status == 200  # torch's own index is still served
        code = job.finish(limit=90)
        assert code == 0, "mcirun exited %s:\n%s" % (code, job.output())
    print("ok")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        sys.exit(main())
