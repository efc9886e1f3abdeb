"""The monitor's page in a real browser (headless Chromium): while rank 1
of a job stalls, the page marks it as the one everyone waits for; after a
rank is lost under --on-rank-loss=continue, the page shows it lost and the
event. Each check reloads the page in a fresh Chromium that runs its
script (--virtual-time-budget) and dumps the DOM, until the mark shows or
the limit passes. With --screenshot PATH, the stalled page is also saved
as a PNG (docs/images/monitor.png is one).

usage: monitor_browser.py MCIRUN PROGRAM [--screenshot PATH]
Exit 77 (skipped) when no chromium is installed."""
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from monitor_job import MonitoredJob  # noqa: E402


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(browser, url, extra):
    profile = tempfile.mkdtemp(prefix="mci-chromium-")
    try:
        r = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--user-data-dir=" + profile, "--virtual-time-budget=4000"] + extra + [url],
                           capture_output=True, text=True, timeout=60)
        return r.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def dom_until(browser, url, pattern, limit, what):
    end = time.monotonic() + limit
    dom = ""
    while time.monotonic() < end:
        dom = browse(browser, url, ["--dump-dom"])
        if re.search(pattern, dom):
            return dom
        time.sleep(0.2)
    raise AssertionError("the page did not show %s within %.0f s; its DOM:\n%s" % (what, limit, dom[:4000]))


def main():
    mcirun, program = sys.argv[1], sys.argv[2]
    shot = sys.argv[sys.argv.index("--screenshot") + 1] if "--screenshot" in sys.argv else None
    browser = chromium()
    if browser is None:
        print("skipped: no chromium (Debian's chromium package)")
        return 77

    # The program's words are shown as the page's title: markup in them
    # must stay text.
    markup = "<img src=x onerror=alert(1)>"
    with MonitoredJob(mcirun, program, 3, {"STALL": "1"}, args=[markup]) as job:
        job.until(lambda j: len(j["ranks"]) == 3, what="three ranks")
        start = time.monotonic()
        dom = dom_until(browser, job.url, r'<tr data-rank="1" data-state="[a-z ]+" class="waited-for">', 30,
                        "rank 1 marked as the one everyone waits for")
        print("rank 1 marked as waited for after %.1f s of polling" % (time.monotonic() - start))
        assert re.search(r'id="verdict" class="v-stalled"[^>]*>stalled: waiting [0-9.]+ s of [0-9]+ s in '
                         r'all_reduce #20 for rank 1, which is running its own code', dom), dom[:3000]
        assert 'everyone waits for it' in dom
        assert "&lt;img src=x onerror=alert(1)&gt;" in dom and "<img" not in dom, dom[:2000]
        for other in (0, 2):
            assert re.search(r'<tr data-rank="%d" data-state="waiting">' % other, dom), dom[:3000]
        code = job.finish()
        assert code == 0, "mcirun exited %s:\n%s" % (code, job.output())

    with MonitoredJob(mcirun, program, 3, {"LOSE": "2"}, ["--on-rank-loss=continue"]) as job:
        dom = dom_until(browser, job.url, r'<tr data-rank="2" data-state="lost" class="lost">', 30, "rank 2 lost")
        assert re.search(r'lost \(exit code 3\)', dom), dom[:3000]
        assert re.search(r'<li>[0-9.]+ s · rank_lost · rank 2 \(pid [0-9]+ on [^)]+\) was lost: exit code 3</li>',
                         dom), dom[:3000]
        code = job.finish()
        assert code == 0, "mcirun exited %s:\n%s" % (code, job.output())
    if shot:
        # A job with some history for the picture: rank 2 a straggler for
        # 150 steps, then rank 1 stalls.
        env = {"STALL": "1", "STALL_AT": "150", "SLOW": "2", "SLOW_MS": "12"}
        with MonitoredJob(mcirun, program, 4, env) as job:
            dom_until(browser, job.url, r'<tr data-rank="1" data-state="[a-z ]+" class="waited-for">', 60,
                      "rank 1 marked as the one everyone waits for")
            browse(browser, job.url, ["--hide-scrollbars", "--window-size=1280,820", "--screenshot=" + shot])
            print("screenshot:", shot)
            code = job.finish()
            assert code == 0, "mcirun exited %s:\n%s" % (code, job.output())
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
