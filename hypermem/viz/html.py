r"""The inspector: one self-contained, offline HTML page for a memory.

The page holds a snapshot (:func:`~hypermem.viz.export.to_dict`) and the decay weights on
a grid of times (:func:`~hypermem.viz.export.weight_timeline`), and draws with plain
JavaScript, no network and no libraries:

* the Poincaré disk on a ``<canvas>``: every memory at its exact depth (Euclidean radius
  ``tanh(sqrt(c) r / 2)`` in the unit disk), parent links as hyperbolic geodesics (arcs of
  circles orthogonal to the boundary), point size and opacity from the time weight;
* a time slider: the weights were **precomputed in Python** on a grid of times by the
  memory's own decay policy (so custom policies work and the page never re-implements a
  formula); moving the slider re-weights the drawing and the table;
* a sortable table, a collapsible tree, a text filter (text, id and metadata), and a
  click on a memory (disk, table or tree) that highlights its ancestors and descendants;
  the address may preset both: ``page.html#filter=dog&select=<id>`` (URI-encoded).

**Escaping.**  Memory text, ids, metadata and the title only ever reach the page as
text: the data sits in a ``<script type="application/json">`` block with ``<``, ``>`` and
``&`` written as ``\u003c`` / ``\u003e`` / ``\u0026`` (and everything non-ASCII, U+2028
and U+2029 included, as ``\uXXXX``), so no string can close the block; the title is
HTML-escaped; the script inserts text with ``textContent`` only.  On top of that a
Content-Security-Policy allows only the page's own two scripts (by SHA-256 hash) and no
network at all.  A memory whose text is ``<script>alert(1)</script>`` shows as that text.

**Checks.**  The page records what it drew (``data-points-drawn`` on the canvas,
``data-drawn``, ``data-selected`` and ``data-highlighted`` (the selected memory with its
ancestors and descendants) on ``<body>``) and every script error or policy violation
(``data-errors`` on ``<html>``, the text in ``#hm-errors``), so a headless browser's DOM
dump tells whether it worked.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from datetime import datetime
from typing import Any

from .export import to_dict, weight_timeline

__all__ = ["render_html", "iframe_html", "script_json", "TIMELINE_STEPS"]

TIMELINE_STEPS = 61
"""Default number of slider positions (plus "now")."""

_ERRORS_JS = r"""
(function () {
  "use strict";
  var pending = [];
  function report(msg) {
    var root = document.documentElement;
    root.setAttribute("data-errors", String(Number(root.getAttribute("data-errors") || "0") + 1));
    var el = document.getElementById("hm-errors");
    if (el) { el.hidden = false; el.textContent += String(msg) + "\n"; } else { pending.push(String(msg)); }
  }
  window.hmReport = report;
  window.hmPendingErrors = pending;
  window.addEventListener("error", function (e) {
    report("error: " + (e.message || e.type) + (e.lineno ? " (line " + e.lineno + ")" : ""));
  }, true);
  window.addEventListener("unhandledrejection", function (e) { report("unhandled rejection: " + e.reason); });
  document.addEventListener("securitypolicyviolation", function (e) {
    report("blocked by the content security policy: " + e.violatedDirective);
  });
})();
"""

_MAIN_JS = r"""
(function () {
  "use strict";
  var errEl = document.getElementById("hm-errors");
  window.hmPendingErrors.forEach(function (m) { errEl.hidden = false; errEl.textContent += m + "\n"; });
  var D = JSON.parse(document.getElementById("hm-data").textContent);
  var S = D.snapshot, T = D.timeline, nodes = S.nodes, N = nodes.length;
  var byId = new Map();
  nodes.forEach(function (n, i) {
    n.row = i;
    n.hay = (n.id + "\n" + n.text + "\n" + JSON.stringify(n.meta)).toLowerCase();
    byId.set(n.id, n);
  });
  var state = { t: T.index, selected: null, related: null, filter: "", sortKey: "row", sortDir: 1 };
  var COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];
  var ANCESTOR = "#ff7f0e", DESCENDANT = "#d62728", SELF = "#000000";

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }
  function weight(i) { return T.weights[state.t][i]; }
  function matches(n) { return !state.filter || n.hay.indexOf(state.filter) >= 0; }
  function fmt(x, d) { return (typeof x === "number") ? x.toFixed(d) : ""; }

  // ------------------------------------------------------------------ summary
  var st = S.stats;
  document.getElementById("hm-summary").textContent = N + " memories \u00b7 " + st.roots + " roots \u00b7 " +
    "max level " + st.max_level + " \u00b7 dim " + st.dim + " \u00b7 curvature " + st.curvature +
    " \u00b7 layout " + S.layout + " \u00b7 decay " + JSON.stringify(S.config.decay) + " \u00b7 now " + S.now;

  // ------------------------------------------------------------------ disk
  var canvas = document.getElementById("hm-disk");
  var ctx = canvas.getContext("2d");
  var CSS = 600, dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(CSS * dpr); canvas.height = Math.round(CSS * dpr);
  canvas.style.width = CSS + "px"; canvas.style.height = CSS + "px";
  var R = CSS / 2 - 14, C0 = CSS / 2;
  function px(n) { return [C0 + n.x * R, C0 - n.y * R]; }

  function geodesic(a, b) {
    // The geodesic through unit-disk points a, b is an arc of the circle orthogonal to the
    // boundary: its centre c solves 2 c.a = |a|^2 + 1 and 2 c.b = |b|^2 + 1.
    var det = a.x * b.y - a.y * b.x;
    var pa = px(a), pb = px(b);
    ctx.beginPath();
    if (Math.abs(det) < 1e-9) { ctx.moveTo(pa[0], pa[1]); ctx.lineTo(pb[0], pb[1]); ctx.stroke(); return; }
    var ka = (a.x * a.x + a.y * a.y + 1) / 2, kb = (b.x * b.x + b.y * b.y + 1) / 2;
    var cx = (ka * b.y - kb * a.y) / det, cy = (a.x * kb - b.x * ka) / det;
    var r = Math.sqrt(Math.max(cx * cx + cy * cy - 1, 0));
    if (!isFinite(r) || r > 1e4) { ctx.moveTo(pa[0], pa[1]); ctx.lineTo(pb[0], pb[1]); ctx.stroke(); return; }
    var pcx = C0 + cx * R, pcy = C0 - cy * R;
    var t0 = Math.atan2(pa[1] - pcy, pa[0] - pcx), t1 = Math.atan2(pb[1] - pcy, pb[0] - pcx);
    var d = t1 - t0;
    while (d > Math.PI) { d -= 2 * Math.PI; }
    while (d < -Math.PI) { d += 2 * Math.PI; }
    ctx.arc(pcx, pcy, r * R, t0, t0 + d, d < 0);
    ctx.stroke();
  }

  function roleOf(n) { return state.related ? (state.related.get(n.id) || "other") : null; }

  function draw() {
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, CSS, CSS);
    ctx.fillStyle = "#f7f7fb"; ctx.strokeStyle = "#444"; ctx.lineWidth = 1.5;
    ctx.beginPath(); ctx.arc(C0, C0, R, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
    ctx.setLineDash([3, 4]); ctx.strokeStyle = "#ccc"; ctx.lineWidth = 1;
    ctx.fillStyle = "#999"; ctx.font = "10px sans-serif";
    var sc = Math.sqrt(S.config.curvature);
    var lastLabel = -1;
    for (var depth = 1; depth <= 12; depth++) {
      var rho = Math.tanh(sc * depth / 2);
      if (rho > 0.99) { break; }
      ctx.beginPath(); ctx.arc(C0, C0, rho * R, 0, 2 * Math.PI); ctx.stroke();
      if (lastLabel < 0 || (rho - lastLabel) * R > 14) { ctx.fillText("r=" + depth, C0 + 3, C0 - rho * R + 11); lastLabel = rho; }
    }
    ctx.setLineDash([]);
    nodes.forEach(function (n) {
      if (n.parent === null) { return; }
      var p = byId.get(n.parent);
      var rp = roleOf(p), rn = roleOf(n);
      var on = rp && rn && rp !== "other" && rn !== "other";
      var visible = matches(n) || matches(p);
      ctx.strokeStyle = on ? (rn === "descendant" ? DESCENDANT : ANCESTOR) : (visible ? "rgba(90,90,110,0.35)" : "rgba(90,90,110,0.07)");
      ctx.lineWidth = on ? 2 : 1;
      geodesic(p, n);
    });
    var drawn = 0;
    nodes.forEach(function (n, i) {
      var w = weight(i), p = px(n), role = roleOf(n);
      var alpha = matches(n) ? 0.35 + 0.65 * w : 0.06;
      if (role === "other") { alpha = Math.min(alpha, 0.15); } else if (role) { alpha = Math.max(alpha, 0.9); }
      ctx.globalAlpha = alpha;
      ctx.fillStyle = role === "self" ? SELF : role === "ancestor" ? ANCESTOR : role === "descendant" ? DESCENDANT :
        COLORS[n.level % COLORS.length];
      ctx.beginPath(); ctx.arc(p[0], p[1], (role && role !== "other" ? 4 : 3) + 4.5 * Math.sqrt(w), 0, 2 * Math.PI); ctx.fill();
      drawn += 1;
    });
    ctx.globalAlpha = 1;
    if (state.selected !== null) {
      var s = byId.get(state.selected), q = px(s);
      ctx.strokeStyle = SELF; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.arc(q[0], q[1], 10, 0, 2 * Math.PI); ctx.stroke();
    }
    canvas.setAttribute("data-points-drawn", String(drawn));
    document.body.setAttribute("data-drawn", String(drawn));
    document.body.setAttribute("data-selected", state.selected === null ? "" : state.selected);
    document.body.setAttribute("data-highlighted", state.related ? String(state.related.size) : "0");
  }

  function nearest(ev) {
    var rect = canvas.getBoundingClientRect();
    var mx = ev.clientX - rect.left, my = ev.clientY - rect.top, best = null, bd = 12 * 12;
    nodes.forEach(function (n) {
      if (!matches(n)) { return; }
      var p = px(n), d = (p[0] - mx) * (p[0] - mx) + (p[1] - my) * (p[1] - my);
      if (d < bd) { bd = d; best = n; }
    });
    return best;
  }
  canvas.addEventListener("click", function (ev) { var n = nearest(ev); select(n ? n.id : null); });
  canvas.addEventListener("mousemove", function (ev) {
    var n = nearest(ev);
    canvas.title = n ? n.text + "  [" + n.id + "]" : "";
    canvas.style.cursor = n ? "pointer" : "default";
  });

  // ------------------------------------------------------------------ selection
  function select(id) {
    state.selected = id;
    state.related = null;
    var panel = document.getElementById("hm-selected");
    panel.textContent = "";
    if (id !== null) {
      var rel = new Map([[id, "self"]]), n = byId.get(id), cur = n.parent, ancestors = [];
      while (cur !== null) { rel.set(cur, "ancestor"); ancestors.push(cur); cur = byId.get(cur).parent; }
      var frontier = n.children.slice(), count = 0;
      while (frontier.length) {
        var next = [];
        frontier.forEach(function (k) { rel.set(k, "descendant"); count += 1; next.push.apply(next, byId.get(k).children); });
        frontier = next;
      }
      state.related = rel;
      panel.appendChild(el("h3", n.text));
      var dl = el("dl");
      [["id", n.id], ["parent", n.parent === null ? "(root)" : n.parent], ["level", n.level],
       ["depth", fmt(n.depth, 4)], ["time", n.t], ["weight", fmt(weight(n.row), 4)],
       ["accesses", n.access_count], ["valid", (n.valid_from || "\u2212\u221e") + " \u2026 " + (n.valid_until || "+\u221e")],
       ["ancestors", ancestors.map(function (a) { return byId.get(a).text; }).join(" \u2190 ") || "none"],
       ["descendants", String(count)], ["meta", JSON.stringify(n.meta)]].forEach(function (kv) {
        dl.appendChild(el("dt", kv[0])); dl.appendChild(el("dd", kv[1]));
      });
      panel.appendChild(dl);
    }
    markRows(); markTree(); draw();
  }

  // ------------------------------------------------------------------ slider
  var slider = document.getElementById("hm-time"), label = document.getElementById("hm-time-label");
  slider.min = "0"; slider.max = String(T.seconds.length - 1); slider.value = String(T.index);
  function showTime() {
    label.textContent = T.labels[state.t] + (state.t === T.index ? " (now)" : "");
  }
  slider.addEventListener("input", function () {
    state.t = Number(slider.value); showTime(); renderTable(); draw();
  });

  // ------------------------------------------------------------------ table
  var COLUMNS = [["id", "id"], ["text", "text"], ["level", "level"], ["depth", "depth"], ["time", "time"],
                 ["weight", "weight"], ["access_count", "accesses"], ["meta", "meta"]];
  var MAX_ROWS = 2000;
  var thead = document.querySelector("#hm-table thead tr"), tbody = document.querySelector("#hm-table tbody");
  COLUMNS.forEach(function (c) {
    var th = el("th", c[1]);
    th.setAttribute("data-key", c[0]);
    th.addEventListener("click", function () {
      state.sortDir = state.sortKey === c[0] ? -state.sortDir : 1;
      state.sortKey = c[0];
      thead.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", state.sortDir > 0 ? "ascending" : "descending");
      renderTable();
    });
    thead.appendChild(th);
  });
  function key(n, k) {
    if (k === "weight") { return weight(n.row); }
    if (k === "meta") { return JSON.stringify(n.meta); }
    if (k === "time") { return n.time; }
    return n[k];
  }
  function renderTable() {
    var rows = nodes.filter(matches);
    var k = state.sortKey, dir = state.sortDir;
    rows.sort(function (a, b) {
      var x = key(a, k), y = key(b, k);
      if (x === y) { return a.row - b.row; }
      return (x < y ? -1 : 1) * dir;
    });
    document.getElementById("hm-count").textContent = rows.length + " of " + N + " memories" +
      (rows.length > MAX_ROWS ? " (first " + MAX_ROWS + " shown)" : "");
    var frag = document.createDocumentFragment();
    rows.slice(0, MAX_ROWS).forEach(function (n) {
      var tr = el("tr");
      tr.setAttribute("data-id", n.id);
      [n.id, n.text, n.level, fmt(n.depth, 3), n.t, fmt(weight(n.row), 4), n.access_count,
       JSON.stringify(n.meta)].forEach(function (v) { tr.appendChild(el("td", v)); });
      tr.addEventListener("click", function () { select(state.selected === n.id ? null : n.id); });
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    markRows();
  }
  function markRows() {
    tbody.querySelectorAll("tr").forEach(function (tr) {
      var role = state.related ? state.related.get(tr.getAttribute("data-id")) : undefined;
      tr.className = role ? "hm-" + role : "";
    });
  }

  // ------------------------------------------------------------------ tree
  var treeRoot = document.getElementById("hm-tree"), treeItems = new Map();
  function buildTree() {
    var top = el("ul", null, "hm-tree");
    var stack = nodes.filter(function (n) { return n.parent === null; }).reverse().map(function (n) { return [n, top]; });
    while (stack.length) {
      var item = stack.pop(), n = item[0], li = el("li");
      var lab = el("span", n.text, "hm-label");
      lab.title = n.id;
      lab.addEventListener("click", function (id) { return function (ev) { ev.preventDefault(); select(state.selected === id ? null : id); }; }(n.id));
      if (n.children.length) {
        var det = el("details"), sum = el("summary");
        det.open = n.level < 2;
        sum.appendChild(lab);
        sum.appendChild(el("span", " (" + n.children.length + ")", "hm-n"));
        det.appendChild(sum);
        var ul = el("ul");
        det.appendChild(ul);
        li.appendChild(det);
        for (var j = n.children.length - 1; j >= 0; j--) { stack.push([byId.get(n.children[j]), ul]); }
      } else {
        li.appendChild(lab);
      }
      item[1].appendChild(li);
      treeItems.set(n.id, { li: li, label: lab, det: li.firstChild.tagName === "DETAILS" ? li.firstChild : null });
    }
    treeRoot.appendChild(top);
  }
  function filterTree() {
    var keep = null;
    if (state.filter) {
      keep = new Set();
      nodes.forEach(function (n) {
        if (!matches(n)) { return; }
        var cur = n.id;
        while (cur !== null && !keep.has(cur)) { keep.add(cur); cur = byId.get(cur).parent; }
      });
    }
    treeItems.forEach(function (t, id) {
      t.li.hidden = keep !== null && !keep.has(id);
      if (keep !== null && keep.has(id) && t.det) { t.det.open = true; }
    });
  }
  function markTree() {
    treeItems.forEach(function (t, id) {
      var role = state.related ? state.related.get(id) : undefined;
      t.label.className = "hm-label" + (role ? " hm-" + role : "");
    });
  }

  // ------------------------------------------------------------------ filter
  document.getElementById("hm-filter").addEventListener("input", function (ev) {
    state.filter = ev.target.value.trim().toLowerCase();
    renderTable(); filterTree(); draw();
  });

  buildTree();
  showTime();
  renderTable();
  // Start-up state from the address: #filter=TEXT&select=ID (both optional, URI-encoded).
  var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  if (params.get("filter")) {
    var box = document.getElementById("hm-filter");
    box.value = params.get("filter");
    box.dispatchEvent(new Event("input"));
  }
  var pre = params.get("select");
  if (pre !== null && byId.has(pre)) { select(pre); } else { draw(); }
  document.body.setAttribute("data-ready", "1");
})();
"""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 12px 0 6px; }
#hm-summary { color: #555; margin: 0 0 12px; }
main { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
#hm-left { flex: 0 0 auto; } #hm-right { flex: 1 1 320px; min-width: 280px; }
.hm-row { display: flex; gap: 8px; align-items: center; width: 600px; }
#hm-time { flex: 1; } #hm-time-label { font-variant-numeric: tabular-nums; min-width: 190px; }
#hm-filter { width: 100%; padding: 4px 6px; box-sizing: border-box; }
#hm-tree { max-height: 460px; overflow: auto; border: 1px solid #ddd; padding: 4px 8px; }
ul.hm-tree, #hm-tree ul { list-style: none; padding-left: 16px; margin: 0; }
ul.hm-tree { padding-left: 0; }
.hm-label { cursor: pointer; } .hm-n { color: #888; }
.hm-self { font-weight: bold; background: #eee; } .hm-ancestor { color: #c25e00; }
.hm-descendant { color: #b01c1c; }
#hm-selected dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 0; }
#hm-selected dt { color: #666; } #hm-selected dd { margin: 0; overflow-wrap: anywhere; }
#hm-selected h3 { margin: 8px 0 4px; font-size: 15px; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 3px 6px; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; max-width: 420px; }
th { cursor: pointer; user-select: none; background: #fafafa; position: sticky; top: 0; }
th[aria-sort=ascending]::after { content: " \\25B2"; } th[aria-sort=descending]::after { content: " \\25BC"; }
tr:hover td { background: #f4f7ff; } tbody tr { cursor: pointer; }
#hm-errors { color: #b00; white-space: pre-wrap; }
.legend { color: #666; font-size: 12px; width: 600px; }
"""


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"


_CSP = (f"default-src 'none'; script-src {_sha256(_ERRORS_JS)} {_sha256(_MAIN_JS)}; "
        "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")


def script_json(obj: Any) -> str:
    r"""JSON that is safe inside an HTML ``<script>`` element: ASCII only, and ``<``, ``>``,
    ``&`` escaped as ``\u003c`` ``\u003e`` ``\u0026`` (U+2028/9 are ``\u2028``/``\u2029``
    through the ASCII escaping), so no string in it can end the element or open a comment.

    >>> script_json({"text": "</script><!--"})
    '{"text": "\\u003c/script\\u003e\\u003c!--"}'
    """
    text = json.dumps(obj, ensure_ascii=True, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def render_html(memory, title: str | None = None, at_time: datetime | None = None, layout: str = "auto",
                timeline_steps: int = TIMELINE_STEPS) -> str:
    """The inspector page of ``memory`` as one self-contained HTML string (see the module
    docstring).  ``layout``: ``"structural"`` (radial tree with exact depths; the default
    when parents exist), ``"projection"`` (semantic directions) or ``"auto"``.

    >>> from hypermem import Memory
    >>> mem = Memory(); _ = mem.add("<script>alert(1)</script>")
    >>> page = render_html(mem, title="<b>mine</b>")
    >>> "<script>alert(1)" in page, "&lt;b&gt;mine&lt;/b&gt;" in page
    (False, True)
    """
    if title is None:
        title = f"hypermem: {len(memory)} memories"
    if not isinstance(title, str):
        raise TypeError(f"title must be a string, got {type(title).__name__}")
    snapshot = to_dict(memory, at_time=at_time, layout=layout)
    timeline = weight_timeline(memory, steps=timeline_steps, at_time=at_time)
    data = script_json({"title": title, "snapshot": snapshot, "timeline": timeline})
    t = html.escape(title, quote=True)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\" data-errors=\"0\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_CSP}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{t}</title>\n<style>{_STYLE}</style>\n<script>{_ERRORS_JS}</script>\n</head>\n"
        "<body data-drawn=\"0\">\n"
        f"<header><h1>{t}</h1><p id=\"hm-summary\"></p></header>\n"
        "<main>\n<section id=\"hm-left\">\n"
        "<canvas id=\"hm-disk\" width=\"600\" height=\"600\" data-points-drawn=\"0\" "
        "aria-label=\"the memories in the Poincaré disk\"></canvas>\n"
        "<div class=\"hm-row\"><label for=\"hm-time\">time</label><input type=\"range\" id=\"hm-time\">"
        "<output id=\"hm-time-label\"></output></div>\n"
        "<p class=\"legend\">Radius = exact hyperbolic depth (dashed circles r = 1, 2, …); lines are geodesics "
        "from parent to child; size and opacity = time weight at the slider's time. Click a memory: "
        "<span class=\"hm-ancestor\">ancestors</span>, <span class=\"hm-descendant\">descendants</span>.</p>\n"
        "<div id=\"hm-selected\"></div>\n</section>\n"
        "<section id=\"hm-right\">\n<input id=\"hm-filter\" type=\"search\" "
        "placeholder=\"filter by text, id or metadata\" aria-label=\"filter\">\n"
        "<h2>Tree</h2><div id=\"hm-tree\"></div>\n</section>\n</main>\n"
        "<section><h2>Memories</h2><p id=\"hm-count\"></p>\n"
        "<table id=\"hm-table\"><thead><tr></tr></thead><tbody></tbody></table></section>\n"
        "<pre id=\"hm-errors\" hidden></pre>\n"
        f"<script type=\"application/json\" id=\"hm-data\">{data}</script>\n"
        f"<script>{_MAIN_JS}</script>\n</body></html>\n"
    )


def iframe_html(page: str, height: int = 720) -> str:
    """``page`` inside a sandboxed ``<iframe srcdoc>`` (scripts allowed, nothing else), for
    Jupyter: the page keeps its own ids, styles and security policy."""
    return (f"<iframe srcdoc=\"{html.escape(page, quote=True)}\" sandbox=\"allow-scripts\" "
            f"style=\"width:100%;height:{int(height)}px;border:1px solid #ddd\"></iframe>")
