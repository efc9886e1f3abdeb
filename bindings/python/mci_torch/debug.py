"""mci's live view on torch's debug server.

torch 2.15's ``torch.distributed.debug.start_debug_server`` serves stacks and
flight-recorder events from every rank on rank 0's page. Its handlers are a
list the caller may give; ``debug_handlers()`` is torch's defaults plus one
more page, "mci", which shows what ``mcirun --monitor`` knows of the job:
the verdict (who everyone waits for, or who arrives last), each rank's
operation now and its last collectives with their arrival order::

    import torch.distributed.debug as debug
    import mci_torch.debug
    debug.start_debug_server(handlers=mci_torch.debug.debug_handlers())

The page reads the monitor's JSON from node 0's launcher, whose address
``mcirun --monitor`` gives node 0's ranks in ``MCI_MONITOR_URL`` (rank 0,
where torch's page runs, is one of them). Like torch's own page, it is meant
for trusted networks. Needs what the debug server needs (aiohttp, Jinja2,
tabulate)."""

import json
import os
import urllib.request

from torch.distributed.debug._frontend import DebugHandler, NavLink, Route

__all__ = ["MciHandler", "debug_handlers", "monitor_url"]

# torch's page renders templates without autoescaping: every value below
# goes through |e.
_TEMPLATE = """
{% extends "base.html" %}
{% block header %}
    <h1>{% block title %}mci{% endblock %}</h1>
{% endblock %}
{% block content %}
  {% if error %}
    <p>{{ error | e }}</p>
  {% else %}
    <p><b>{{ verdict.state | e }}</b>: {{ verdict.text | e }}</p>
    <table border="1" cellpadding="4">
      <tr><th>rank</th><th>host</th><th>pid</th><th>state</th><th>operation now</th><th>time in it</th>
          <th>last collectives (duration, busbw, arrival)</th><th>last to arrive</th></tr>
      {% for r in ranks %}
      <tr{% if r.waited_for %} style="background:#fde2e0;font-weight:bold"{% endif %}>
        <td>{{ r.rank | e }}</td><td>{{ r.host | e }}</td><td>{{ r.pid | e }}</td>
        <td>{{ r.state | e }}{% if r.waited_for %} (everyone waits for it){% endif %}</td>
        <td>{{ r.op_text | e }}</td><td>{{ r.time_text | e }}</td><td>{{ r.recent_text | e }}</td>
        <td>{{ r.last_arrivals | e }}</td>
      </tr>
      {% endfor %}
    </table>
    <p>The live page with charts and events: <a href="{{ url | e }}">{{ url | e }}</a></p>
  {% endif %}
{% endblock %}
"""


def monitor_url():
    """Where node 0's ``mcirun --monitor`` serves the job, or None."""
    return os.environ.get("MCI_MONITOR_URL") or None


def _fetch(url, timeout=5.0):
    req = urllib.request.Request(url.rstrip("/") + "/api/v1/job")
    token = os.environ.get("MCI_JOB_TOKEN")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())


def _us(v):
    if v < 1e3:
        return "%.0f us" % v
    if v < 1e6:
        return "%.1f ms" % (v / 1e3)
    return "%.2f s" % (v / 1e6)


def _rows(job):
    rows = []
    for r in job.get("ranks", []):
        op = r.get("op")
        if op:
            op_text = "%s #%s %s %s B [%s]" % (op["kind"], op["seq"], op["dtype"], op["bytes"], r.get("group", ""))
            time_text = _us(op["for_ms"] * 1e3)
        else:
            op_text = "its own code" if r.get("state") == "running" else ""
            time_text = "idle %.1f s" % r.get("idle_s", 0) if r.get("state") == "running" else ""
        recent = []
        for o in reversed(r.get("recent", [])):
            text = "%s #%s %s" % (o["kind"], o["seq"], _us(o["dur_us"]))
            if "busbw_gbs" in o:
                text += " %.2f GB/s" % o["busbw_gbs"]
            if "arrival" in o:
                text += " arr. %d" % o["arrival"]
            recent.append(text)
        rows.append(dict(r, op_text=op_text, time_text=time_text, recent_text=" | ".join(recent)))
    return rows


class MciHandler(DebugHandler):
    """The "mci" page of torch's debug server."""

    def routes(self):
        return [Route("/mci", self._handle)]

    def nav_links(self):
        return [NavLink("/mci", "mci")]

    def templates(self):
        return {"mci.html": _TEMPLATE}

    def _context(self):
        url = monitor_url()
        if url is None:
            return {"error": "This job does not run under mcirun --monitor (MCI_MONITOR_URL is not set): start it "
                             "with mcirun --monitor to see mci's live view here."}
        try:
            job = _fetch(url)
        except (OSError, ValueError) as e:
            return {"error": "cannot read mcirun's monitor at %s: %s (the job may be ending)" % (url, e)}
        return {"error": None, "verdict": job.get("verdict", {}), "ranks": _rows(job), "url": url}

    def _handle(self, req):
        return req.frontend.render_template("mci.html", **self._context())

    def dump(self):
        url = monitor_url()
        if url is None:
            return None
        try:
            return json.dumps(_fetch(url), indent=1)
        except (OSError, ValueError) as e:
            return "cannot read mcirun's monitor at %s: %s" % (url, e)

    def dump_filename(self):
        return "mci_monitor"


def debug_handlers():
    """torch's default handlers plus mci's page."""
    from torch.distributed.debug._debug_handlers import default_handlers

    return default_handlers() + [MciHandler()]
