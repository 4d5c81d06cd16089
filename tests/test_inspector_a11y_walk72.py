"""The inspector as walker 72 met it with a keyboard, a screen reader, a phone and right-to-left text:
Tab leaves the page with nothing selected, the disk's keys act on the disk (and the page) only, tree
labels, "… more" items, sort headers and table rows are buttons in the Tab order (Enter and Space press
them), the slider reads out its date and the virtualised table its row numbers, stored text takes its own
direction (Arabic reads right to left), reduced motion turns the Möbius animation off,
and at a phone's width the page does not overflow while a tap on the shrunken disk still picks the
memory under it."""

from __future__ import annotations

import pytest
from test_inspector_chromium import NOW, T0, open_page

from hypermem import HashingEmbedder, Memory
from hypermem.viz.chromium import Chromium, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")

ARABIC = "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 2024"  # "hello world 2024"


def store():
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW)
    mem.add("animals of every kind", id="animals", t=T0, meta={"name": "animals"})
    for kid in ["dog", "cat", "owl"]:
        mem.add(f"the {kid}", id=kid, parent="animals", t=T0, meta={"name": kid})
    mem.add(ARABIC, id="ar", parent="owl", t=T0)
    return mem


def press(b, key, code):
    for kind in ("rawKeyDown", "keyUp"):
        b.call("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code,
                                          "nativeVirtualKeyCode": code})


def test_the_keyboard_reaches_every_control_and_the_disk_keys_stay_on_the_disk(tmp_path):
    with Chromium(width=1280, height=900) as b:
        open_page(b, tmp_path, store())
        sel = "document.body.getAttribute('data-selected')"
        # Nothing selected: Tab moves the focus off <body> (it was swallowed), to the first control.
        b.evaluate("window.__prevented = []; addEventListener('keydown', e => __prevented.push(e.key + ':' + e.defaultPrevented))")
        press(b, "Tab", 9)
        assert b.evaluate("document.activeElement.tagName") != "BODY"
        assert b.evaluate("__prevented") == ["Tab:false"]
        # A leaf label of the tree is a button in the Tab order; Enter on it selects its memory.
        b.evaluate("document.querySelector('#hm-tree .hm-label[data-row=\"2\"]').focus()")
        assert b.evaluate("document.activeElement.getAttribute('role') + document.activeElement.tabIndex") == "button0"
        b.key("Enter")
        assert b.evaluate(sel) == "cat"
        # An arrow key on the focused label is the label's (the page scrolls), not the disk's.
        b.key("ArrowUp")
        assert b.evaluate(sel) == "cat" and b.evaluate("__prevented").count("ArrowUp:false") == 1
        # Space on a label inside a <summary> selects that memory; Enter on a sort header sorts.
        b.evaluate("document.querySelector('#hm-tree summary .hm-label').focus()")
        b.key(" ")
        assert b.evaluate(sel) == "animals"
        b.evaluate("document.querySelector('th[data-key=\"label\"]').focus()")
        b.key("Enter")
        assert b.evaluate("document.querySelector('th[data-key=\"label\"]').getAttribute('aria-sort')") == "ascending"
        # The table's rows are focusable, numbered for a screen reader, and Enter picks one.
        rows = b.evaluate("""Array.from(document.querySelectorAll('#hm-table tbody tr[data-row]'))
                              .map(r => [r.tabIndex, r.getAttribute('aria-rowindex'), r.getAttribute('data-id')])""")
        assert [r[:2] for r in rows] == [[0, str(k + 2)] for k in range(5)]
        assert b.evaluate("document.getElementById('hm-table').getAttribute('aria-rowcount')") == "6"
        b.evaluate("document.querySelector('#hm-table tbody tr[data-id=\"owl\"]').focus()")
        b.key("Enter")
        assert b.evaluate(sel) == "owl"
        assert "selected: owl" in b.evaluate("document.getElementById('hm-status').textContent")
        # The slider reads out its date; the disk's keys still work on the focused disk.
        assert b.evaluate("document.getElementById('hm-time').getAttribute('aria-valuetext')").startswith("20")
        b.evaluate("document.getElementById('hm-disk').focus()")
        b.key("ArrowDown")
        b.wait_for("!hmState().animating && hmState().focus === 'ar'", timeout=10)


def test_rtl_text_reduced_motion_and_a_phone_width(tmp_path):
    with Chromium(width=390, height=844) as b:
        b.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-reduced-motion", "value": "reduce"}]})
        open_page(b, tmp_path, store(), "#focus=owl")
        # Stored text takes the direction of its first strong character (dir="auto"'s rule).
        lab = "document.querySelector('#hm-tree .hm-label[data-row=\"4\"]')"
        assert b.evaluate(f"getComputedStyle({lab}).unicodeBidi") == "plaintext"
        assert b.evaluate("getComputedStyle(document.querySelector('#hm-table td')).unicodeBidi") == "plaintext"
        # Reduced motion: a focus moves at once, without the animation.
        b.evaluate("hmFocus('dog')")
        assert b.evaluate("hmState().animating") is False and b.evaluate("hmState().focus") == "dog"
        # At 390 px nothing is wider than the window, and a tap on the shrunken disk picks the memory drawn there.
        assert b.evaluate("document.documentElement.scrollWidth") <= 390
        r = b.evaluate("document.getElementById('hm-disk').getBoundingClientRect().toJSON()")
        assert r["width"] < 400 and abs(r["width"] - r["height"]) < 1
        p = b.evaluate("hmProbe('cat')")
        b.click(r["x"] + p["px"] * r["width"] / 600, r["y"] + p["py"] * r["height"] / 600)
        assert b.evaluate("document.body.getAttribute('data-selected')") == "cat"
