#include "jobview/page.hpp"

namespace mci::jobview {

namespace {

// Kept as one raw string: it is the page, byte for byte.
constexpr const char* kPage = R"PAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mci job</title>
<style>
 body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em; color: #1d1d1f; background: #fafafa; }
 h1 { font-size: 1.3em; margin: 0 0 .3em 0; }
 #meta { color: #555; margin-bottom: .8em; }
 #verdict { padding: .7em 1em; border-radius: 6px; margin-bottom: 1em; font-weight: 600; }
 .v-ok { background: #e3f4e6; border-left: 6px solid #2e9b47; }
 .v-slow { background: #fff3d6; border-left: 6px solid #d99a00; }
 .v-stalled { background: #fde2e0; border-left: 6px solid #c9302c; }
 .v-starting, .v-done { background: #e8ecf3; border-left: 6px solid #6b7a90; }
 table { border-collapse: collapse; width: 100%; background: #fff; margin-bottom: 1.2em; }
 th, td { border-bottom: 1px solid #e3e3e3; padding: .3em .5em; text-align: left; vertical-align: top; }
 th { background: #f0f0f3; font-weight: 600; }
 td.num { text-align: right; font-variant-numeric: tabular-nums; }
 tr.waited-for td { background: #fde2e0; font-weight: 600; }
 tr.lost td { color: #999; text-decoration: line-through; }
 .state-waiting { color: #c9302c; font-weight: 600; }
 .state-lost { color: #c9302c; }
 .state-done { color: #2e9b47; }
 .tag { display: inline-block; background: #c9302c; color: #fff; border-radius: 3px; padding: 0 .4em; font-size: .85em; }
 #charts { display: flex; flex-wrap: wrap; gap: 1em; }
 .chart { background: #fff; border: 1px solid #e3e3e3; padding: .5em; }
 .chart h3 { margin: 0 0 .3em 0; font-size: 1em; }
 #events li { margin: .1em 0; }
 .muted { color: #777; }
 #error { color: #c9302c; }
</style>
</head>
<body>
<h1>mci job <span id="program" class="muted"></span></h1>
<div id="meta"></div>
<div id="verdict" class="v-starting">loading…</div>
<div id="error"></div>
<p><button id="dump" type="button">Dump the flight recorders</button> <span id="dump-result" class="muted"></span></p>
<table id="ranks">
 <thead><tr><th>rank</th><th>host</th><th>pid</th><th>state</th><th>operation now</th><th class="num">time in it</th>
 <th>last collectives (duration, busbw, arrival)</th><th class="num">last to arrive</th></tr></thead>
 <tbody></tbody>
</table>
<div id="charts"></div>
<h2 style="font-size:1.1em">Events</h2>
<ul id="events"></ul>
<p class="muted">Data: <a id="json-link" href="api/v1/job">api/v1/job</a> (JSON) and <a id="metrics-link" href="metrics">metrics</a> (Prometheus).</p>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token");
const suffix = token ? "?token=" + encodeURIComponent(token) : "";
document.getElementById("json-link").href = "api/v1/job" + suffix;
document.getElementById("metrics-link").href = "metrics" + suffix;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function us(v) {
  if (v < 1e3) return v.toFixed(0) + " µs";
  if (v < 1e6) return (v / 1e3).toFixed(1) + " ms";
  return (v / 1e6).toFixed(2) + " s";
}
function bytes(b) {
  if (b >= 1 << 30) return (b / (1 << 30)).toFixed(1) + " GiB";
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB";
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + " KiB";
  return b + " B";
}
function opText(op) {
  if (!op) return "";
  const where = op.seq > 0 ? " #" + op.seq : (op.peer >= 0 ? " (peer " + op.peer + ")" : "");
  return op.kind + where + " " + op.dtype + " " + bytes(op.bytes);
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}
// A chart: duration of the transfer (the last arrival's time) and of the
// first arrival's wait, and busbw on a second axis; the job's events as
// vertical lines on the same time axis.
function chart(kind, pts, events, tmax) {
  const W = 520, H = 190, L = 56, R = 78, T = 12, B = 25;
  const box = el("div", null, "chart");
  box.appendChild(el("h3", kind));
  const s = svg("svg", {width: W, height: H, role: "img"});
  s.setAttribute("data-kind", kind);
  const t0 = Math.max(0, tmax - 300);
  const x = t => L + (W - L - R) * (t - t0) / Math.max(tmax - t0, 1e-3);
  const ymax = Math.max(1, ...pts.map(p => p.max_us));
  const bmax = Math.max(1e-6, ...pts.map(p => p.busbw_gbs));
  const y = v => T + (H - T - B) * (1 - v / ymax);
  const yb = v => T + (H - T - B) * (1 - v / bmax);
  s.appendChild(svg("line", {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999"}));
  s.appendChild(svg("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}));
  const lab = (tx, xx, yy, anchor, color) => {
    const e = svg("text", {x: xx, y: yy, "font-size": 10, "text-anchor": anchor, fill: color || "#555"});
    e.textContent = tx;
    s.appendChild(e);
  };
  lab(us(ymax), L - 4, T + 8, "end");
  lab("0", L - 4, H - B, "end");
  lab(bmax.toFixed(2) + " GB/s", W - R + 4, T + 8, "start", "#2e7bcf");
  lab((t0).toFixed(0) + " s", L, H - 8, "start");
  lab(tmax.toFixed(0) + " s", W - R, H - 8, "end");
  for (const ev of events) {
    if (ev.t < t0) continue;
    const l = svg("line", {x1: x(ev.t), y1: T, x2: x(ev.t), y2: H - B, stroke: "#c9302c", "stroke-dasharray": "3,3"});
    const tip = svg("title", {});
    tip.textContent = ev.kind + ": " + ev.text;
    l.appendChild(tip);
    s.appendChild(l);
  }
  const line = (f, color) => {
    const d = pts.filter(p => p.t >= t0).map(p => x(p.t).toFixed(1) + "," + f(p).toFixed(1)).join(" ");
    if (d) s.appendChild(svg("polyline", {points: d, fill: "none", stroke: color, "stroke-width": 1.5}));
  };
  line(p => y(p.max_us), "#d99a00");
  line(p => y(p.min_us), "#1d1d1f");
  line(p => yb(p.busbw_gbs), "#2e7bcf");
  box.appendChild(s);
  box.appendChild(el("div", "black: transfer (last arrival's time) · amber: first arrival's wait · blue: busbw", "muted"));
  return box;
}

function render(j) {
  document.getElementById("error").textContent = "";
  document.getElementById("program").textContent = j.job.program || "";
  document.getElementById("meta").textContent =
    j.job.world + " rank(s) on " + j.job.nnodes + " node(s) · up " + j.job.uptime_s.toFixed(0) + " s · a rank is marked stalled after " +
    (j.job.stall_after_ms / 1000).toFixed(1) + " s of waiting";
  const v = document.getElementById("verdict");
  v.className = "v-" + j.verdict.state;
  v.textContent = j.verdict.state + ": " + j.verdict.text;
  v.setAttribute("data-state", j.verdict.state);
  v.setAttribute("data-rank", j.verdict.rank);

  const body = document.querySelector("#ranks tbody");
  body.replaceChildren();
  for (const r of j.ranks) {
    const tr = el("tr");
    tr.setAttribute("data-rank", r.rank);
    tr.setAttribute("data-state", r.state);
    if (r.waited_for) tr.className = "waited-for";
    else if (r.state === "lost") tr.className = "lost";
    tr.appendChild(el("td", r.rank));
    tr.appendChild(el("td", r.host));
    tr.appendChild(el("td", r.pid));
    const st = el("td", r.state + (r.exit ? " (" + r.exit + ")" : ""), "state-" + r.state);
    if (r.waited_for) {
      st.appendChild(document.createTextNode(" "));
      st.appendChild(el("span", "everyone waits for it", "tag"));
    }
    tr.appendChild(st);
    tr.appendChild(el("td", r.op ? opText(r.op) + (r.group ? " [" + r.group + "]" : "") : (r.state === "running" ? "its own code" : "")));
    tr.appendChild(el("td", r.op ? us(r.op.for_ms * 1e3) : (r.idle_s ? "idle " + r.idle_s.toFixed(1) + " s" : ""), "num"));
    const last = r.recent.slice().reverse().map(o =>
      o.kind + " #" + o.seq + " " + us(o.dur_us) + (o.busbw_gbs !== undefined ? " " + o.busbw_gbs.toFixed(2) + " GB/s" : "") +
      (o.arrival !== undefined ? " arr. " + o.arrival : "")).join(" · ");
    tr.appendChild(el("td", last));
    tr.appendChild(el("td", r.last_arrivals, "num"));
    body.appendChild(tr);
  }
  const charts = document.getElementById("charts");
  charts.replaceChildren();
  for (const kind of Object.keys(j.series)) charts.appendChild(chart(kind, j.series[kind], j.events, j.job.uptime_s));
  const ev = document.getElementById("events");
  ev.replaceChildren();
  for (const e of j.events.slice().reverse()) ev.appendChild(el("li", e.t.toFixed(1) + " s · " + e.kind + " · " + e.text));
  document.body.setAttribute("data-updated", String(Date.now()));
}

// Every rank writes its flight recorder in torch's format (torchfrtrace
// reads the folder). The header keeps other sites' forms from asking.
document.getElementById("dump").addEventListener("click", async () => {
  const out = document.getElementById("dump-result");
  try {
    const r = await fetch("api/v1/dump" + suffix, {method: "POST", headers: {"X-MCI-Action": "dump"}});
    const j = await r.json();
    out.textContent = "asked " + j.signalled + " rank(s)" + (j.other_nodes ? " here and every other node" : "") +
      " to dump to " + j.dir + (j.cannot_dump.length ? "; cannot dump (no handler yet): ranks " + j.cannot_dump.join(", ") : "");
  } catch (e) {
    out.textContent = "the dump was not asked for: " + e.message;
  }
});

async function poll() {
  try {
    const r = await fetch("api/v1/job" + suffix, {cache: "no-store"});
    if (!r.ok) throw new Error("HTTP " + r.status + ": " + (await r.text()));
    render(await r.json());
  } catch (e) {
    document.getElementById("error").textContent = "cannot read the job: " + e.message + " (the job may have ended)";
  }
  setTimeout(poll, 1000);
}
poll();
</script>
</body>
</html>
)PAGE";

}  // namespace

const std::string& page_html() {
  static const std::string page(kPage);
  return page;
}

}  // namespace mci::jobview
