"""Labels in the inspector (headless Chromium): the shallowest memories keep their disk labels
however old (decayed) they are, a label that collides on one side goes to the other, and long
labels are cut with an ellipsis in the search results and the tree (full text on hover)."""

from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.viz.chromium import Chromium, find_chromium

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=365)

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    with Chromium(width=1400, height=1000) as b:
        yield b


def open_page(browser, tmp_path, mem):
    path = tmp_path / "page.html"
    mem.inspect(path)
    browser.open(path.as_uri())
    assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0"


def test_old_roots_keep_their_labels_against_fresh_leaves(browser, tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(24 * 30), clock=lambda: NOW)
    roots = [f"root{d}" for d in range(10)]
    for d, r in enumerate(roots):
        mem.add(f"domain {d}", id=r, t=T0, meta={"label": f"Domain {d}"})  # a year old: weight ~0
        for k in range(30):
            mem.add(f"a fresh note {k} filed under domain {d} with a long text", id=f"{r}n{k}", parent=r,
                    t=NOW - timedelta(hours=k + 1))
    open_page(browser, tmp_path, mem)
    labels = browser.evaluate("hmState().labels")
    assert set(roots) <= set(labels), labels


def test_a_child_next_to_its_parent_is_labelled_on_the_other_side(browser, tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW, base_depth=0.1, depth_step=0.1)
    mem.add("the root", id="mammal", t=T0, meta={"name": "mammal"})
    mem.add("the only big child", id="placental", parent="mammal", t=T0, meta={"name": "placental"})
    open_page(browser, tmp_path, mem)
    a, b = browser.evaluate("hmProbe('mammal')"), browser.evaluate("hmProbe('placental')")
    assert abs(a["px"] - b["px"]) < 40 and abs(a["py"] - b["py"]) < 8  # their labels would collide
    assert a["labeled"] and b["labeled"]
    boxes = browser.evaluate("hmState().labelBoxes")
    assert len(boxes) == 2
    (l0, t0, r0, b0), (l1, t1, r1, b1) = boxes
    assert not (l0 < r1 and l1 < r0 and t0 < b1 and t1 < b0)


def test_long_labels_end_in_an_ellipsis_and_show_whole_on_hover(browser, tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW)
    long = "X" * 400
    mem.add("the root with a long label", id="r", t=T0, meta={"label": long})
    mem.add("child " + "word " * 300, id="c", parent="r", t=T0, meta={"title": "long title " + "Y" * 300})
    open_page(browser, tmp_path, mem)
    browser.evaluate("(() => { const s = document.getElementById('hm-search'); s.value = 'xxxx'; "
                     "s.dispatchEvent(new Event('input')); })()")
    fit = browser.evaluate("""(() => {
      const col = document.getElementById('hm-right').getBoundingClientRect();
      const b = document.querySelector('#hm-results button'), lab = document.querySelector('#hm-tree .hm-label');
      const tree = document.getElementById('hm-tree');
      const sum = document.querySelector('#hm-tree summary');
      return {button: b.getBoundingClientRect().right, col: col.right, cut: getComputedStyle(b).textOverflow,
              labelCut: getComputedStyle(lab).textOverflow, treeScroll: tree.scrollWidth - tree.clientWidth,
              summaryHeight: sum.getBoundingClientRect().height, title: b.title, labTitle: lab.title};
    })()""")
    assert fit["button"] <= fit["col"] + 1 and fit["cut"] == "ellipsis" and fit["labelCut"] == "ellipsis"
    assert fit["treeScroll"] <= 1 and fit["summaryHeight"] < 30  # no scrollbar, the ▼ beside its label
    assert long in fit["title"] and long in fit["labTitle"]
    browser.evaluate("hmFocus('r', false)")
    h3 = browser.evaluate("(() => { const h = document.querySelector('#hm-selected h3'); "
                          "return [h.getBoundingClientRect().height, h.title]; })()")
    assert h3[0] < 50 and h3[1] == long  # two lines at most


def test_every_grid_circle_is_numbered_and_the_search_box_says_what_it_matches(browser, tmp_path):
    counts = {}
    for c in (1.0, 1 / 32):
        mem = Memory(embedder=HashingEmbedder(dim=16), clock=lambda: NOW, curvature=c)
        mem.add("a root", id="r", t=T0)
        open_page(browser, tmp_path, mem)
        counts[c] = int(browser.evaluate("document.getElementById('hm-disk').getAttribute('data-grid-circles')"))
    # Curvature 1: r = 1..4 (r = 5 would sit 6 px from r = 4); 1/32: flatter, so more circles, each numbered.
    assert counts[1.0] == 4 and 4 < counts[1 / 32] <= 16
    placeholder = browser.evaluate("document.getElementById('hm-search').placeholder")
    assert "label" in placeholder and "text" in placeholder and "id" in placeholder and "metadata" in placeholder
