"""A real Prometheus scrapes a running job's /metrics (mcirun --monitor),
and the values come back through Prometheus's own query API: the
collectives each rank ran, NCCL Inspector's bandwidth and time gauges, the
straggler's "last to arrive" count and the slow-step state. The job's rank
1 sleeps before each step, so it is the one that arrives last.

usage: monitor_prometheus.py MCIRUN PROGRAM
Exit 77 (skipped) when no prometheus is installed."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from monitor_job import MonitoredJob, free_port  # noqa: E402


def query(port, expr):
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (port, urllib.parse.quote(expr))
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.loads(r.read().decode())
    assert body["status"] == "success", body
    return body["data"]["result"]


def main():
    mcirun, program = sys.argv[1], sys.argv[2]
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        print("skipped: no prometheus (Debian's prometheus package)")
        return 77
    work = tempfile.mkdtemp(prefix="mci-prometheus-")
    prom = None
    try:
        with MonitoredJob(mcirun, program, 2, {"SLOW": "1", "SLOW_MS": "20"}) as job:
            job.until(lambda j: len(j["ranks"]) == 2, what="two ranks")
            with open(os.path.join(work, "prometheus.yml"), "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                        "scrape_configs:\n  - job_name: mci\n    static_configs:\n"
                        "      - targets: ['127.0.0.1:%d']\n" % job.port)
            pport = free_port()
            log = open(os.path.join(work, "prometheus.log"), "w+")
            prom = subprocess.Popen([prometheus, "--config.file=" + os.path.join(work, "prometheus.yml"),
                                     "--storage.tsdb.path=" + os.path.join(work, "data"),
                                     "--web.listen-address=127.0.0.1:%d" % pport],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            wanted = {
                'up{job="mci"}': lambda v: v == 1,
                'mci_collectives_total{rank="0",collective="all_reduce"}': lambda v: v > 10,
                'mci_collective_wait_seconds_total{rank="0",collective="all_reduce"}': lambda v: v > 0,
                'mci_bus_bandwidth_gbs{rank="1",collective="all_reduce",dtype="f32"}': lambda v: v > 0,
                'mci_algorithm_bandwidth_gbs{rank="1",collective="all_reduce",dtype="f32"}': lambda v: v > 0,
                'mci_collective_exec_time_microseconds{rank="0",collective="all_reduce"}': lambda v: v > 0,
                'mci_last_to_arrive_total{rank="1"}': lambda v: v > 10,
                'mci_hang_state': lambda v: v == 1,
                'mci_hang_rank': lambda v: v == 1,
                'mci_rank_up{rank="1"}': lambda v: v == 1,
                'mci_ranks_lost_total': lambda v: v == 0,
            }
            end = time.monotonic() + 60
            seen = {}
            while time.monotonic() < end and len(seen) < len(wanted):
                for expr, ok in wanted.items():
                    if expr in seen:
                        continue
                    try:
                        result = query(pport, expr)
                    except OSError:
                        break  # Prometheus not listening yet
                    if result and ok(float(result[0]["value"][1])):
                        seen[expr] = result[0]
                time.sleep(0.5)
            missing = [e for e in wanted if e not in seen]
            log.flush()
            assert not missing, "Prometheus never read these as expected: %s\nlast values: %s\n--- prometheus:\n%s" % (
                missing, {e: query(pport, e) for e in missing}, open(log.name).read()[-3000:])
            # The labels NCCL Inspector's dashboards group by are all there.
            labels = seen['mci_bus_bandwidth_gbs{rank="1",collective="all_reduce",dtype="f32"}']["metric"]
            for name in ("rank", "node", "group", "collective", "dtype"):
                assert name in labels, labels
            print("Prometheus read back %d series, e.g. %s" % (len(seen), json.dumps(labels)))
            code = job.finish()
            assert code == 0, "mcirun exited %s:\n%s" % (code, job.output())
    finally:
        if prom is not None and prom.poll() is None:
            os.killpg(prom.pid, signal.SIGTERM)
            try:
                prom.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(prom.pid, signal.SIGKILL)
                prom.wait()
        shutil.rmtree(work, ignore_errors=True)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
