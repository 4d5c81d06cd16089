"""The inspector in dark mode (walker 73): with the system set to dark (``prefers-color-scheme: dark``,
emulated over the DevTools protocol) the page is light text on a dark background and the disk's canvas
is drawn dark too, every text on its background keeps WCAG AA contrast (4.5:1) in both themes, the
light theme keeps its colours, a change of the system setting after load redraws the disk, and
printing stays light."""

from __future__ import annotations

import re

import pytest
from test_inspector_chromium import NOW, T0, open_page

from hypermem import HashingEmbedder, Memory
from hypermem.viz.chromium import Chromium, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")


def store():
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW)
    mem.add("animals of every kind", id="animals", t=T0, meta={"name": "animals"})
    for kid in ["dog", "cat", "owl"]:
        mem.add(f"the {kid}", id=kid, parent="animals", t=T0, meta={"name": kid})
    mem.add("rtl \u202e gnp.exe", id="trick", parent="owl", t=T0)  # shows a control-character escape
    return mem


def rgba(css):
    """``rgb(r, g, b)`` / ``rgba(r, g, b, a)`` as a tuple of four numbers."""
    v = [float(x) for x in re.findall(r"[\d.]+", css)]
    return (v + [1.0])[:4]


def luminance(c):
    """WCAG 2 relative luminance of an sRGB colour (0-255 channels)."""
    def lin(x):
        x /= 255
        return x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4
    return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])


def contrast(a, b):
    hi, lo = sorted([luminance(a), luminance(b)], reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# Each text's colour and the first opaque background behind it (null: none, the browser's canvas shows).
PAIRS_JS = """(() => {
  function bg(el) {
    for (; el; el = el.parentElement) {
      const c = getComputedStyle(el).backgroundColor;
      if (c !== 'transparent' && !/rgba\\(.*,\\s*0\\)$/.test(c)) { return c; }
    }
    return null;
  }
  const out = {};
  for (const [name, sel] of Object.entries(%s)) {
    const el = document.querySelector(sel);
    out[name] = el ? [getComputedStyle(el).color, bg(el)] : null;
  }
  return out;
})()"""
ELEMENTS = {"body": "body", "summary": "#hm-summary", "header": "#hm-table th", "cell": "#hm-table td",
            "legend": ".legend", "ancestor": "#hm-tree .hm-label.hm-ancestor", "count": "#hm-tree .hm-n",
            "escape": ".hm-ctl", "selected-term": "#hm-selected dt"}

# The most frequent colour of the canvas inside the disk (its background: the points, links and
# labels cover little of it), and the --hm-disk-bg it was drawn from.
DISK_BG_JS = """(() => {
  const c = document.getElementById('hm-disk'), w = c.width, h = c.height;
  const d = c.getContext('2d').getImageData(0, 0, w, h).data, counts = new Map();
  const r = (w / 2 - 14 * w / 600) * 0.95;
  for (let y = 0; y < h; y += 2) {
    for (let x = 0; x < w; x += 2) {
      if ((x - w / 2) ** 2 + (y - h / 2) ** 2 > r * r) { continue; }
      const k = (y * w + x) * 4, key = d[k] + ',' + d[k + 1] + ',' + d[k + 2] + ',' + d[k + 3];
      counts.set(key, (counts.get(key) || 0) + 1);
    }
  }
  let best = null, n = 0;
  counts.forEach((v, k) => { if (v > n) { n = v; best = k; } });
  return best.split(',').map(Number);
})()"""


# For each label box on the disk, its pixel of extreme (Math.max or Math.min) R+G+B: the text's ink.
LABEL_INK_JS = """hmState().labelBoxes.map(([x0, y0, x1, y1]) => {
  const d = document.getElementById('hm-disk').getContext('2d').getImageData(x0, y0, x1 - x0, y1 - y0).data;
  let best = null;
  for (let k = 0; k < d.length; k += 4) {
    const s = d[k] + d[k + 1] + d[k + 2];
    if (best === null || %s(s, best[3]) === s) { best = [d[k], d[k + 1], d[k + 2], s]; }
  }
  return best.slice(0, 3);
})"""


def scheme(b, value, media=""):
    b.call("Emulation.setEmulatedMedia", {"media": media, "features": [{"name": "prefers-color-scheme", "value": value}]})


def check_pairs(b, dark):
    pairs = b.evaluate(PAIRS_JS % repr(ELEMENTS).replace("'", '"'))
    missing = [k for k, v in pairs.items() if v is None]
    assert not missing, missing
    for name, (fg, bg) in pairs.items():
        if bg is None:
            assert not dark, f"{name}: no background of its own in the dark theme"
            bg = "rgb(255, 255, 255)"  # the light canvas
        ratio = contrast(rgba(fg), rgba(bg))
        assert ratio >= 4.5, f"{name}: {fg} on {bg} is {ratio:.2f}:1"
    return pairs


def test_dark_mode_follows_the_system_setting_and_keeps_aa_contrast(tmp_path):
    with Chromium(width=1280, height=900) as b:
        # Light (the system default): the colours as before dark mode came.
        scheme(b, "light")
        open_page(b, tmp_path, store(), "#select=dog")
        light = check_pairs(b, dark=False)
        assert light["body"] == ["rgb(34, 34, 34)", None]
        assert light["summary"][0] == "rgb(85, 85, 85)" and light["ancestor"][0] == "rgb(163, 76, 0)"
        assert light["escape"] == ["rgb(170, 0, 0)", "rgb(253, 232, 232)"]
        assert b.evaluate(DISK_BG_JS) == [247, 247, 251, 255]

        # Dark: light text on a dark page, and a dark disk drawn from the page's own colours.
        scheme(b, "dark")
        open_page(b, tmp_path, store(), "#select=dog")
        dark = check_pairs(b, dark=True)
        assert luminance(rgba(dark["body"][1])) < 0.03 and luminance(rgba(dark["body"][0])) > 0.6
        assert b.evaluate("getComputedStyle(document.documentElement).colorScheme") == "light dark"
        disk = b.evaluate(DISK_BG_JS)
        assert luminance(disk) < 0.03 and disk[3] == 255
        assert b.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--hm-disk-bg').trim()")
        # The disk's labels are light text: the brightest pixel of each label box (text on its halo).
        assert len(b.evaluate("hmState().labels")) >= 4
        assert all(contrast(px, disk) >= 3 for px in b.evaluate(LABEL_INK_JS % "Math.max"))

        # The system setting changes while the page is open: the disk is redrawn light, then dark again.
        scheme(b, "light")
        b.wait_for(f"JSON.stringify({DISK_BG_JS}) === '[247,247,251,255]'", timeout=10)
        assert all(contrast(px, (247, 247, 251)) >= 3 for px in b.evaluate(LABEL_INK_JS % "Math.min"))
        scheme(b, "dark")
        b.wait_for(f"{DISK_BG_JS}[0] < 60", timeout=10)

        # Printing stays light (paper), the disk too, even with the system set to dark.
        scheme(b, "dark", media="print")
        assert b.evaluate("getComputedStyle(document.body).color") == "rgb(34, 34, 34)"
        assert b.evaluate(DISK_BG_JS) == [247, 247, 251, 255]
