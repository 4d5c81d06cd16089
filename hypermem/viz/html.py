r"""The inspector: one self-contained, offline HTML page for a memory.

The page holds a compact snapshot (:func:`~hypermem.viz.payload.pack`: typed arrays in
base64, quantised angles, decay weights precomputed in Python on a grid of times) and
draws with plain JavaScript (``hypermem/viz/assets/*.js``), no network and no libraries:

* the Poincaré disk on a ``<canvas>`` as a **hyperbolic browser** (Lamping, Rao & Pirolli
  1995, "A focus+context technique based on hyperbolic geometry"): clicking (or dragging)
  a memory moves it to the centre by a Möbius transformation of the whole disk,
  ``z -> (z - a) / (1 - conj(a) z)``, an isometry, so depths, distances and geodesics stay
  exact; the region in focus grows and the rest shrinks towards the rim.  Parent links
  are geodesics (arcs orthogonal to the boundary); a point's size shrinks like
  ``1 - |z|^2`` (the Euclidean size of a fixed hyperbolic disk) and grows with its time
  weight.  Keys (on the focused disk, or with nothing focused): ``Home``/``o`` the origin, ``↑`` the
  parent, ``↓`` the first child, ``←``/``→`` the siblings; a focused control keeps its keys, and every
  control is in the Tab order (tree labels, sort headers and rows are buttons for Enter and Space).  Large memories are drawn with level of detail (shallow memories
  first, one per 3 x 3 pixel cell);
* short labels (``inspect(label=callable)``, else the meta keys ``label``, ``name``,
  ``lemma``, ``title``, else the first words of the text) in the tree and on the disk for
  the largest nodes that have room (no overlaps); the full text on hover and in the
  details panel;
* a time slider from the oldest memory to now (``future=`` extends it), hidden for
  ``NoDecay``; the decay in words in the header;
* a virtualised sortable table over all rows, a tree built as it opens, a filter (text,
  label, id, metadata) and a search box that focuses the memory it finds.  The address
  keeps the focus and may preset the rest: ``page.html#focus=<id>&filter=dog&select=<id>``.
  A later change of the address (typed, a link, back or forward) focuses the memory it names;
  an address without ``focus=`` goes home.

**Escaping.**  Memory text, ids, labels, metadata and the title only ever reach the page
as text: the data sits in a ``<script type="application/json">`` block with ``<``, ``>``
and ``&`` written as ``\u003c`` / ``\u003e`` / ``\u0026`` (and everything non-ASCII,
U+2028 and U+2029 included, as ``\uXXXX``), so no string can close the block; the title is
HTML-escaped; the script inserts text with ``textContent`` only.  On top of that a
Content-Security-Policy allows only the page's own two scripts (by SHA-256 hash) and no
network at all.  A memory whose text is ``<script>alert(1)</script>`` shows as that text.  Bidi
controls (U+202A-E, U+2066-9, U+200E/F, U+061C) and C0/C1 controls other than tab and newline show
as visible escapes (``\u202e``, in a distinct style), and each stored string is a bidi isolate,
so ``"rtl \u202e gnp.exe"`` cannot pass for ``"rtl exe.png"`` nor reorder the text beside it.

**Checks.**  The page records what it drew (``data-points-drawn`` and
``data-labels-drawn`` on the canvas; ``data-drawn``, ``data-selected``,
``data-highlighted``, ``data-focus`` and ``data-timings`` (milliseconds measured with
``performance.now()``) on ``<body>``) and every script error or policy violation
(``data-errors`` on ``<html>``, the text in ``#hm-errors``); ``window.hmProbe(id)`` tells
where a memory is drawn, ``hmState()`` the focus, selection, labels and timings, and
``hmFocus(id, animate)`` focuses a memory.  So a headless browser (e.g.
:class:`hypermem.viz.chromium.Chromium`) can tell whether it worked.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any

from .payload import pack

__all__ = ["render_html", "iframe_html", "notebook_html", "NOTEBOOK_MAX_INLINE", "script_json", "TIMELINE_STEPS",
           "page_assets", "PAGE_HEAD"]

TIMELINE_STEPS = 41
"""Default number of slider positions, from the oldest memory to now."""

NOTEBOOK_MAX_INLINE = 5000
"""Above this many memories Jupyter shows a short summary instead of the inline page (the page,
about 250 bytes a memory, is written into the notebook file: 34 MB at 100,000)."""

_MAIN_PARTS = ("core.js", "disk.js", "panels.js", "boot.js")


def _asset(name: str) -> str:
    return resources.files("hypermem.viz").joinpath("assets", name).read_text(encoding="utf-8")


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii") + "'"


@lru_cache(maxsize=1)
def page_assets() -> dict[str, str]:
    """The page's style, its two scripts (the error reporter and the inspector, whose
    parts run inside one strict-mode function) and the Content-Security-Policy that allows
    exactly those scripts by hash."""
    errors = _asset("errors.js")
    main = "(function () {\n\"use strict\";\n" + "\n".join(_asset(p) for p in _MAIN_PARTS) + "\n})();\n"
    for name, text in (("errors.js", errors), ("inspector", main)):
        if "</script" in text.lower() or "<!--" in text:
            raise RuntimeError(f"the page asset {name} may not contain '</script' or '<!--'")
    csp = (f"default-src 'none'; script-src {_sha256(errors)} {_sha256(main)}; "
           "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'")
    return {"style": _asset("inspector.css"), "errors": errors, "main": main, "csp": csp}


def script_json(obj: Any) -> str:
    r"""JSON that is safe inside an HTML ``<script>`` element: ASCII only, and ``<``, ``>``,
    ``&`` escaped as ``\u003c`` ``\u003e`` ``\u0026`` (U+2028/9 are ``\u2028``/``\u2029``
    through the ASCII escaping), so no string in it can end the element or open a comment.

    >>> script_json({"text": "</script><!--"})
    '{"text": "\\u003c/script\\u003e\\u003c!--"}'
    """
    text = json.dumps(obj, ensure_ascii=True, allow_nan=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


_BODY = """<body data-drawn="0">
<header><h1>{title}</h1><p id="hm-summary"></p></header>
<main>
<section id="hm-left">
<canvas id="hm-disk" width="600" height="600" data-points-drawn="0" tabindex="0"
 aria-label="the memories in the Poincaré disk"></canvas>
<div class="hm-row" id="hm-time-row"><label for="hm-time">time</label><input type="range" id="hm-time">
<output id="hm-time-label"></output></div><p id="hm-time-note"></p>
<p class="legend">Radius = exact hyperbolic depth (grey circles: r = 1, 2, … around the origin); lines are
geodesics from parent to child; size shrinks towards the rim and grows with the time weight at the
slider's time. Click or drag a memory to bring it to the centre (a Möbius translation of the disk);
<kbd>Home</kbd> the origin, <kbd>↑</kbd> parent, <kbd>↓</kbd> child, <kbd>←</kbd> <kbd>→</kbd> siblings.
Selected: <span class="hm-ancestor">ancestors</span>, <span class="hm-descendant">descendants</span>.</p>
<p id="hm-status" class="hm-sr" role="status" aria-live="polite"></p><div id="hm-selected"></div>
</section>
<section id="hm-right">
<input id="hm-search" type="search" placeholder="search a memory by label, text, id or metadata (Enter: focus)"
 aria-label="search"><ol id="hm-results" aria-live="polite"></ol>
<input id="hm-filter" type="search" placeholder="filter by text, label, id or metadata" aria-label="filter">
<h2>Tree</h2><div id="hm-tree"></div>
</section>
</main>
<section><h2>Memories</h2><p id="hm-count" aria-live="polite"></p>
<p class="hm-print-note">Printed: only the table's rows on screen (it is virtualised); filter or scroll it first, or
export them all as a CSV table (<code>hypermem export</code>).</p>
<div id="hm-table-wrap"><table id="hm-table"><thead><tr></tr></thead><tbody></tbody></table></div></section>
<pre id="hm-errors" hidden></pre>
"""


PAGE_HEAD = b'<!DOCTYPE html>\n<html lang="en" data-errors='
"""How every inspector page that hypermem writes begins: ``inspect`` replaces a file that begins so, and
refuses any other existing file without ``force`` (:mod:`hypermem.store.page_file`)."""


def render_html(memory, title: str | None = None, at_time: datetime | None = None, layout: str = "auto",
                timeline_steps: int = TIMELINE_STEPS, label: Callable[[Any], str] | None = None,
                future: timedelta | None = None) -> str:
    """The inspector page of ``memory`` as one self-contained HTML string (see the module
    docstring).  ``layout``: ``"structural"`` (radial tree with exact depths; the default
    when parents exist), ``"projection"`` (semantic directions) or ``"auto"``; ``label``:
    a callable from a :class:`~hypermem.store.MemoryRecord` to its short label;
    ``future``: how far the time slider reaches past now (default: not at all).

    >>> from hypermem import Memory
    >>> mem = Memory(); _ = mem.add("<script>alert(1)</script>")
    >>> page = render_html(mem, title="<b>mine</b>")
    >>> "<script>alert(1)" in page, "&lt;b&gt;mine&lt;/b&gt;" in page
    (False, True)
    """
    if title is None:
        title = f"hypermem: {len(memory)} {'memory' if len(memory) == 1 else 'memories'}"
    if not isinstance(title, str):
        raise TypeError(f"title must be a string, got {type(title).__name__}")
    if callable(label):
        label = _str_label(label)
    data = pack(memory, at_time=at_time, layout=layout, label=label, timeline_steps=timeline_steps, future=future)
    data["title"] = title
    a = page_assets()
    t = html.escape(title, quote=True)
    return (
        PAGE_HEAD.decode() + "\"0\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{a['csp']}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{t}</title>\n<style>{a['style']}</style>\n<script>{a['errors']}</script>\n</head>\n"
        + _BODY.format(title=t)
        + f"<script type=\"application/json\" id=\"hm-data\">{script_json(data)}</script>\n"
        f"<script>{a['main']}</script>\n</body></html>\n"
    )


def _str_label(label: Callable[[Any], Any]) -> Callable[[Any], str]:
    """``label``, with a one-line :class:`TypeError` when it returns anything but a str."""
    def checked(record: Any) -> str:
        v = label(record)
        if not isinstance(v, str):
            raise TypeError(f"label must return a str (it is called with a MemoryRecord), got "
                            f"{type(v).__name__} for memory {record.id!r}")
        return v
    return checked


def iframe_html(page: str, height: int = 720) -> str:
    """``page`` inside a sandboxed ``<iframe srcdoc>`` (scripts allowed, nothing else), for
    Jupyter: the page keeps its own ids, styles and security policy."""
    return (f"<iframe srcdoc=\"{html.escape(page, quote=True)}\" sandbox=\"allow-scripts\" "
            f"style=\"width:100%;height:{int(height)}px;border:1px solid #ddd\"></iframe>")


def notebook_html(memory, max_inline: int | None = None) -> str:
    """What Jupyter shows for ``memory`` (``Memory._repr_html_``): the inspector in a sandboxed
    iframe (:func:`iframe_html`) up to ``max_inline`` memories (default: :data:`NOTEBOOK_MAX_INLINE`
    as it is at the call, so setting the module's value takes effect); above that a short summary with
    a hint to write the page to a file with ``mem.inspect("page.html")``, so that a large
    store does not put tens of megabytes into the ``.ipynb``.  A store whose storage is closed
    (``memory.storage.closed``, after ``with Memory.open(...)``) shows one line saying so.

    >>> from hypermem import Memory
    >>> mem = Memory(); _ = mem.add("animals")
    >>> notebook_html(mem).startswith("<iframe"), "inspect(" in notebook_html(mem, max_inline=0)
    (True, True)
    """
    if max_inline is None:
        max_inline = NOTEBOOK_MAX_INLINE
    if getattr(getattr(memory, "storage", None), "closed", False):  # its records are gone with the connection
        return ("<div class=\"hypermem-summary\" style=\"font:13px/1.5 system-ui,sans-serif;padding:6px 10px;"
                "border:1px solid #ddd\"><b>hypermem Memory</b>: storage closed; reopen it with "
                "<code>Memory.open(...)</code> to show it.</div>")
    n = len(memory)
    if n <= max_inline:
        return iframe_html(render_html(memory))
    roots = len(memory.roots())
    words = (f"{n:,} {'memory' if n == 1 else 'memories'} \u00b7 {roots:,} {'root' if roots == 1 else 'roots'} \u00b7 dim {memory.dim} "
             f"\u00b7 curvature {memory.curvature:.4g}")
    return ("<div class=\"hypermem-summary\" style=\"font:13px/1.5 system-ui,sans-serif;padding:6px 10px;"
            "border:1px solid #ddd\">"
            f"<b>hypermem Memory</b>: {html.escape(words)}<br>"
            f"Too large to show inline (more than {max_inline:,} memories; the page would be stored in the "
            "notebook). Open the inspector in a browser: <code>mem.inspect(\"page.html\")</code> "
            "(or <code>mem.plot()</code> for a picture).</div>")
