"""The monitor on a GPU (scripts/gpu-check.sh): a job of nccl all_reduces
under `mcirun --monitor`; its page's JSON must show their durations taken
with CUDA events ("clock": "cuda") and /metrics their time per call.
Usage: gpu_monitor_check.py MCIRUN MCI_PERF"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from monitor_job import MonitoredJob  # noqa: E402


def main():
    mcirun, perf = sys.argv[1], sys.argv[2]
    command = [perf, "all_reduce", "--backend", "nccl", "-b", "1M", "-e", "1M", "-n", "5000000", "-w", "1", "-c", "0"]
    with MonitoredJob(mcirun, None, 1, {}, command=command) as job:
        def cuda_timed(j):
            return [r for row in j.get("ranks", []) for r in row.get("recent", []) if r.get("clock") == "cuda"]

        j = job.until(lambda j: cuda_timed(j), limit=90, what="an nccl all_reduce timed with CUDA events")
        op = cuda_timed(j)[-1]
        print(f"ok: the page shows all_reduce #{op['seq']} timed on the GPU: {op['dur_us']:.1f} us, clock cuda",
              flush=True)
        status, metrics = job.get("metrics")
        lines = [ln for ln in metrics.splitlines() if ln.startswith("mci_collective_exec_time_microseconds{")]
        if status != 200 or not lines:
            print(f"FAILED: /metrics has no mci_collective_exec_time_microseconds (status {status})")
            return 1
        print("ok: /metrics: " + lines[0], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
