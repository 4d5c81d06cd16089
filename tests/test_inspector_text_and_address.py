"""The inspector page in headless Chromium: stored text with bidi overrides or control characters
shows them as visible escapes and cannot reorder its neighbours; the address (#focus=ID) is
followed after load (a new hash, back and forward)."""

import re

import pytest
from test_inspector_chromium import NOW, T0, open_page

from hypermem import HashingEmbedder, Memory
from hypermem.viz.chromium import Chromium, find_chromium

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")

DISGUISED = "rtl \u202e gnp.exe"
CONTROLS = "esc\x1b[31m bell\x07 nul\x00 cr\r end"
CHILD = "kid\x1b\x07"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

# The x centre of character k of `needle` in the first text node under `root` that holds it.
CHAR_X = """(root, needle, k) => {
  const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    const at = n.data.indexOf(needle);
    if (at < 0) { continue; }
    const r = document.createRange(); r.setStart(n, at + k); r.setEnd(n, at + k + 1);
    const b = r.getBoundingClientRect(); return b.left + b.width / 2;
  }
  return null;
}"""


@pytest.fixture(scope="module")
def browser():
    with Chromium(width=1280, height=1100) as b:
        yield b


def test_bidi_overrides_and_controls_show_as_visible_escapes(browser, tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW)
    mem.add(DISGUISED, id="p", t=T0)
    mem.add(CONTROLS, id=CHILD, parent="p", t=T0)
    open_page(browser, tmp_path, mem)
    browser.evaluate("hmFocus('p', false)")
    seen = browser.evaluate(f"""(() => {{
      const charX = {CHAR_X}, full = document.querySelector('#hm-selected .hm-fulltext');
      return {{panel: document.getElementById('hm-selected').textContent,
               ctl: document.querySelectorAll('#hm-selected .hm-ctl').length,
               g: charX(full, 'gnp.exe', 0), e: charX(full, 'gnp.exe', 6),
               tree: Array.from(document.querySelectorAll('#hm-tree .hm-label')).map(e => e.textContent + e.title),
               rows: Array.from(document.querySelectorAll('#hm-table tbody tr[data-id]'))
                 .map(t => t.textContent + t.children[2].title)}};
    }})()""")
    assert "rtl \\u202e gnp.exe" in seen["panel"] and seen["ctl"] >= 2  # in the text and the title
    assert seen["g"] < seen["e"], "the text after U+202E is drawn reversed"
    for text in [seen["panel"], *seen["tree"], *seen["rows"]]:
        assert not RAW.search(text), repr(text)
    assert any("\\u202e" in t for t in seen["tree"]) and any("\\u001b[31m bell\\u0007" in t for t in seen["rows"])

    # The child: its own controls escaped; its parent's label cannot reorder the id beside it.
    browser.evaluate(f"hmFocus({CHILD!r}, false)")
    kid = browser.evaluate(f"""(() => {{
      const charX = {CHAR_X}, dd = Array.from(document.querySelectorAll('#hm-selected dt'))
        .find(d => d.textContent === 'parent').nextElementSibling;
      return {{panel: document.getElementById('hm-selected').textContent, parent: dd.textContent,
               exe: charX(dd, 'gnp.exe', 6), bracket: charX(dd, '[', 0)}};
    }})()""")
    for esc in ("\\u001b", "\\u0007", "\\u0000", "\\u000d"):
        assert esc in kid["panel"]
    assert not RAW.search(kid["panel"]) and kid["parent"] == "rtl \\u202e gnp.exe  [p]"
    assert kid["exe"] < kid["bracket"], "the parent's id is drawn before its label"

    # The disk's labels.
    browser.evaluate("hmFocus('p', false)")
    drawn = browser.evaluate("""(() => {
      const seen = [], fill = CanvasRenderingContext2D.prototype.fillText;
      CanvasRenderingContext2D.prototype.fillText = function (t, x, y) { seen.push(String(t)); return fill.call(this, t, x, y); };
      try { hmDraw(); } finally { CanvasRenderingContext2D.prototype.fillText = fill; }
      return seen;
    })()""")
    labels = [t for t in drawn if not t.startswith("r=")]
    assert any("\\u202e" in t for t in labels) and not any(RAW.search(t) for t in labels), labels


def chain(n=10):
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW)
    for k in range(n):
        mem.add(f"memory number {k}", id=f"n{k}", parent=f"n{k - 1}" if k else None, t=T0)
    return mem


def wait_focus(browser, focus):
    browser.wait_for(f"!hmState().animating && hmState().focus === {'null' if focus is None else repr(focus)}",
                     timeout=10)


def test_the_page_follows_the_address_after_load(browser, tmp_path):
    open_page(browser, tmp_path, chain(), fragment="#focus=n5")
    wait_focus(browser, "n5")
    length = browser.evaluate("history.length")
    browser.evaluate("location.hash = '#focus=n7'")
    wait_focus(browser, "n7")
    assert browser.evaluate("hmState().selected") == "n7"
    assert browser.evaluate("document.querySelector('#hm-selected h3').textContent").startswith("memory number 7")
    assert browser.evaluate("history.length") == length + 1  # the hash's own entry, none added by the page
    browser.evaluate("history.back()")
    wait_focus(browser, "n5")
    browser.evaluate("history.forward()")
    wait_focus(browser, "n7")
    browser.evaluate("location.hash = '#focus=nobody'")  # not a memory: the focus stays
    browser.evaluate("new Promise(r => setTimeout(r, 100))")
    wait_focus(browser, "n7")
    browser.evaluate("location.hash = ''")
    wait_focus(browser, None)
    assert browser.evaluate("hmState().selected") is None

    # A focus set by the page (a click, a search) writes the address without a new entry or an echo.
    browser.evaluate("hmFocus('n3')")
    wait_focus(browser, "n3")
    browser.evaluate("new Promise(r => setTimeout(r, 200))")
    assert browser.evaluate("location.hash") == "#focus=n3"
    assert browser.evaluate("[hmState().focus, hmState().animating, history.length]") == ["n3", False, length + 3]


def test_times_show_as_times_in_the_table_and_the_panel(browser, tmp_path):
    """The time column and the panel's time row read "2026-... hh:mm", not an element's name (a
    second function named like the time formatter once replaced it)."""
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW)
    mem.add("the parent", id="p", t=T0)
    mem.add("the child", id="c", parent="p", t=T0)
    open_page(browser, tmp_path, mem)
    browser.evaluate("hmFocus('c', false)")
    seen = browser.evaluate("""(() => ({page: document.body.textContent,
      rows: Array.from(document.querySelectorAll('#hm-table tbody tr[data-id]')).map(t => t.textContent)}))()""")
    assert "[object" not in seen["page"]
    stamp = T0.strftime("%Y-%m-%d %H:%M")
    assert len(seen["rows"]) == 2 and all(stamp in r for r in seen["rows"]) and stamp in seen["page"]


def test_a_memory_the_floor_left_a_root_shows_why(browser, tmp_path):
    """An auto-placed memory below the store's nearest-neighbour floor lists the candidates it
    would have had and says none was taken (hypermem.store.nearest_floor)."""
    mem = Memory(embedder=HashingEmbedder(dim=256), clock=lambda: NOW)
    mem.add_many([{"id": f"k{j}", "text": f"kitchen appliance {w}", "t": T0} for j, w in enumerate(["oven", "fridge", "kettle"])])
    mem.add_many([{"id": f"n{j}", "text": f"kitchen appliance {w} note {j} cleaning schedule", "parent": f"k{j % 3}",
                   "t": T0} for j, w in enumerate(["oven", "fridge", "kettle"] * 10)])
    far = mem.add("zebra migrations cross savannah rivers yearly", parent="auto", t=T0)
    assert mem.parent(far) is None
    open_page(browser, tmp_path, mem)
    browser.evaluate(f"hmFocus({far!r}, false)")
    panel = browser.evaluate("document.getElementById('hm-selected').textContent")
    assert "suggested parents" in panel and "none taken: nearest filed memory" in panel and "< floor" in panel
