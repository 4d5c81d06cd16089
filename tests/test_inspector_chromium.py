"""The inspector page driven in headless Chromium over the DevTools protocol: a click
moves a memory to the centre by a Möbius translation (its parent then sits at the exact
hyperbolic distance), keys and drags move the focus, labels, search, the address, the
time slider and the virtualised table."""

import math
from datetime import datetime, timedelta, timezone

import pytest
import torch

from hypermem import HalfLife, HashingEmbedder, Memory, NoDecay
from hypermem.viz import structural_coordinates
from hypermem.viz.chromium import Chromium, find_chromium

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=20)

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")


def zoo(decay=None):
    """A small named hierarchy, five levels deep (deep nodes sit near the rim)."""
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=decay or HalfLife(72), clock=lambda: NOW)
    mem.add("any warm-blooded vertebrate having the skin more or less covered with hair", id="mammal",
            t=T0, meta={"name": "mammal.n.01"})
    tree = {"mammal": ["carnivore", "rodent", "ungulate"], "carnivore": ["canine", "feline"],
            "canine": ["dog", "wolf", "fox"], "dog": ["puppy", "hound"], "feline": ["cat", "lion"],
            "rodent": ["mouse", "rat"], "ungulate": ["horse"]}
    k = 0
    for parent, kids in tree.items():
        for kid in kids:
            k += 1
            mem.add(f"the {kid}, a kind of {parent}; a long gloss follows here", id=kid, parent=parent,
                    t=T0 + timedelta(days=k), meta={"name": f"{kid}.n.01"})
    mem.add("some words without any name in the metadata at all", id="anon", parent="horse", t=T0)
    return mem


@pytest.fixture(scope="module")
def browser():
    with Chromium(width=1280, height=1100) as b:
        yield b


def open_page(browser, tmp_path, mem, fragment="", **kw):
    path = tmp_path / "page.html"
    mem.inspect(path, **kw)
    browser.open(path.as_uri() + fragment)
    assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0", \
        browser.evaluate("document.getElementById('hm-errors').textContent")
    return browser


def settle(browser, focus):
    browser.wait_for(f"!hmState().animating && hmState().focus === {focus!r}", timeout=10)


def canvas_origin(browser):
    r = browser.evaluate("document.getElementById('hm-disk').getBoundingClientRect().toJSON()")
    return r["x"], r["y"]


def hyperbolic(u, v):
    """Distance in the curvature -1 unit disk: 2 artanh(|u - v| / |1 - conj(u) v|)."""
    u, v = complex(*u), complex(*v)
    return 2 * math.atanh(abs(u - v) / abs(1 - u.conjugate() * v))


def layout_xy(mem):
    xy = structural_coordinates(mem).tolist()
    return {i: xy[r] for r, i in enumerate(mem.ids)}


def test_click_moves_the_node_to_the_centre_by_an_isometry(browser, tmp_path):
    mem = zoo()
    open_page(browser, tmp_path, mem)
    xy = layout_xy(mem)
    before = browser.evaluate("hmProbe('puppy')")
    assert abs(before["x"] - xy["puppy"][0]) < 1e-7 and abs(before["y"] - xy["puppy"][1]) < 1e-7
    ox, oy = canvas_origin(browser)
    browser.click(ox + before["px"], oy + before["py"])
    settle(browser, "puppy")
    got = browser.evaluate("hmProbe('puppy')")
    assert math.hypot(got["x"], got["y"]) < 1e-9
    assert abs(got["px"] - 300) < 1e-6 and abs(got["py"] - 300) < 1e-6
    # Every other memory keeps its hyperbolic distance to puppy: d = 2 artanh(|z|) after the move.
    for other in ("dog", "canine", "mammal", "hound", "lion", "anon"):
        p = browser.evaluate(f"hmProbe({other!r})")
        d_page = 2 * math.atanh(math.hypot(p["x"], p["y"]))
        assert abs(d_page - hyperbolic(xy["puppy"], xy[other])) < 1e-5, other
    assert browser.evaluate("location.hash") == "#focus=puppy"
    assert browser.evaluate("document.body.getAttribute('data-selected')") == "puppy"
    # Pairwise distances stay too (an isometry, not just distances to the centre).
    a, b = browser.evaluate("hmProbe('lion')"), browser.evaluate("hmProbe('mouse')")
    assert abs(hyperbolic((a["x"], a["y"]), (b["x"], b["y"])) - hyperbolic(xy["lion"], xy["mouse"])) < 1e-5
    # The details panel has the full text; the tree and the disk show labels.
    panel = browser.evaluate("document.getElementById('hm-selected').textContent")
    assert "a long gloss follows here" in panel and "puppy.n.01" in panel


def test_keys_go_to_the_parent_a_child_and_back_to_the_origin(browser, tmp_path):
    mem = zoo()
    open_page(browser, tmp_path, mem, "#focus=dog")
    assert browser.evaluate("hmState().focus") == "dog"
    assert math.hypot(*[browser.evaluate("hmProbe('dog')")[k] for k in "xy"]) < 1e-9
    browser.key("ArrowUp")
    settle(browser, "canine")
    p = browser.evaluate("hmProbe('canine')")
    assert math.hypot(p["x"], p["y"]) < 1e-9
    browser.key("ArrowDown")
    settle(browser, "dog")
    browser.key("ArrowRight")
    settle(browser, "wolf")
    browser.key("Home")
    browser.wait_for("!hmState().animating && hmState().focus === null")
    assert browser.evaluate("hmState().view") == [1, 0, 0, 0]
    xy = layout_xy(mem)
    p = browser.evaluate("hmProbe('fox')")
    assert abs(p["x"] - xy["fox"][0]) < 1e-7 and abs(p["y"] - xy["fox"][1]) < 1e-7
    assert "focus" not in browser.evaluate("location.hash")


def test_a_drag_carries_the_point_under_the_pointer(browser, tmp_path):
    mem = zoo()
    open_page(browser, tmp_path, mem)
    ox, oy = canvas_origin(browser)
    p = browser.evaluate("hmProbe('carnivore')")
    browser.drag(ox + p["px"], oy + p["py"], ox + 300, oy + 300, steps=10)
    q = browser.evaluate("hmProbe('carnivore')")
    assert abs(q["px"] - 300) < 1.0 and abs(q["py"] - 300) < 1.0
    xy = layout_xy(mem)
    a = browser.evaluate("hmProbe('mammal')")
    assert abs(hyperbolic((a["x"], a["y"]), (q["x"], q["y"])) - hyperbolic(xy["mammal"], xy["carnivore"])) < 1e-5


def test_labels_in_the_tree_and_on_the_disk(browser, tmp_path):
    mem = zoo()
    open_page(browser, tmp_path, mem)
    tree = browser.evaluate("Array.from(document.querySelectorAll('#hm-tree .hm-label')).map(e => e.textContent)")
    assert "mammal.n.01" in tree and "carnivore.n.01" in tree
    assert not any("warm-blooded" in t for t in tree)
    state = browser.evaluate("hmState()")
    assert "mammal" in state["labels"] and len(state["labels"]) >= 5
    boxes = state["labelBoxes"]
    for i, a in enumerate(boxes):  # no two labels overlap
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
    hover = browser.evaluate("document.querySelector('#hm-tree .hm-label').title")
    assert "warm-blooded vertebrate having the skin" in hover
    # A label callable wins; without meta names, the first words of the text.
    open_page(browser, tmp_path, mem, "#select=anon", label=lambda r: r.id.upper())
    tree = browser.evaluate("Array.from(document.querySelectorAll('#hm-tree .hm-label')).map(e => e.textContent)")
    assert "MAMMAL" in tree and "ANON" in tree
    open_page(browser, tmp_path, mem, "#select=anon")
    assert browser.evaluate("document.querySelector('#hm-selected h3').textContent") == "some words without any name…"


def test_search_focuses_the_memory_it_finds(browser, tmp_path):
    mem = zoo()
    open_page(browser, tmp_path, mem)
    browser.evaluate("(() => { const s = document.getElementById('hm-search'); s.focus(); s.value = 'hound'; "
                     "s.dispatchEvent(new Event('input')); })()")
    found = browser.evaluate("Array.from(document.querySelectorAll('#hm-results button')).map(b => b.textContent)")
    assert found[0] == "hound.n.01"
    browser.key("Enter")
    settle(browser, "hound")
    p = browser.evaluate("hmProbe('hound')")
    assert math.hypot(p["x"], p["y"]) < 1e-9
    # By text too: "gloss" is in every text but the root's and anon's.
    browser.evaluate("(() => { const s = document.getElementById('hm-search'); s.value = 'warm-blooded'; "
                     "s.dispatchEvent(new Event('input')); })()")
    assert browser.evaluate("document.querySelector('#hm-results button').textContent") == "mammal.n.01"


def test_time_slider_decay_in_words_and_no_decay(browser, tmp_path):
    mem = zoo()
    open_page(browser, tmp_path, mem)
    summary = browser.evaluate("document.getElementById('hm-summary').textContent")
    assert "decay: half-life 72 h" in summary and "{" not in summary
    assert browser.evaluate("getComputedStyle(document.getElementById('hm-time-row')).display") == "flex"
    slider = browser.evaluate("(() => { const s = document.getElementById('hm-time'); "
                              "return [s.max, s.value, document.getElementById('hm-time-label').textContent]; })()")
    assert slider[0] == slider[1] and slider[2].endswith("(now)")
    open_page(browser, tmp_path, mem, future=timedelta(days=3))
    slider = browser.evaluate("(() => { const s = document.getElementById('hm-time'); return [s.max, s.value]; })()")
    assert int(slider[1]) < int(slider[0])
    browser.evaluate("(() => { const s = document.getElementById('hm-time'); s.value = s.max; "
                     "s.dispatchEvent(new Event('input')); })()")
    assert browser.evaluate("document.getElementById('hm-time-label').textContent").endswith("(future)")
    open_page(browser, tmp_path, zoo(decay=NoDecay()))
    assert browser.evaluate("getComputedStyle(document.getElementById('hm-time-row')).display") == "none"
    assert "decay: no decay" in browser.evaluate("document.getElementById('hm-summary').textContent")


def test_the_table_is_virtualised_over_every_row(browser, tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=8), clock=lambda: NOW)
    mem.add_many([{"text": f"row {i:05d}", "id": f"r{i:05d}", "t": T0} for i in range(6000)])
    open_page(browser, tmp_path, mem)
    assert browser.evaluate("document.getElementById('hm-count').textContent") == "6000 of 6000 memories"
    assert browser.evaluate("document.querySelectorAll('#hm-table tr[data-row]').length") <= 45
    browser.evaluate("(() => { const w = document.getElementById('hm-table-wrap'); w.scrollTop = w.scrollHeight; "
                     "w.dispatchEvent(new Event('scroll')); })()")
    rows = browser.evaluate("Array.from(document.querySelectorAll('#hm-table tr[data-row]')).map(t => t.dataset.id)")
    assert rows[-1] == "r05999"
    assert 0 < browser.evaluate("hmState().drawn") <= 6000
    box = browser.evaluate("(() => { const f = document.getElementById('hm-filter'); f.value = 'row 0599'; "
                           "f.dispatchEvent(new Event('input')); return document.getElementById('hm-count').textContent; })()")
    assert box == "10 of 6000 memories"


def test_focus_in_the_address_for_a_deep_node_near_the_rim(browser, tmp_path):
    # Deep chains sit within 1e-4 of the rim; the focus still puts them at the centre exactly.
    mem = Memory(embedder=HashingEmbedder(dim=8), clock=lambda: NOW, depth_step=1.0)
    prev = mem.add("level 0", id="c0")
    for k in range(1, 9):
        prev = mem.add(f"level {k}", id=f"c{k}", parent=prev)
    xy = layout_xy(mem)
    # the layout keeps the exact depth, which puts c8 within 1e-3 of the rim
    rim = math.tanh(math.sqrt(mem.curvature) * float(mem.depth("c8")) / 2)
    assert math.hypot(*xy["c8"]) == pytest.approx(rim, abs=1e-12) and 1 - rim < 1e-3
    open_page(browser, tmp_path, mem, "#focus=c8")
    p, q = browser.evaluate("hmProbe('c8')"), browser.evaluate("hmProbe('c7')")
    assert math.hypot(p["x"], p["y"]) < 1e-9
    d = 2 * math.atanh(math.hypot(q["x"], q["y"]))
    assert abs(d - hyperbolic(xy["c8"], xy["c7"])) < 1e-4
    want = float(mem.depth("c8") - mem.depth("c7")) * math.sqrt(mem.curvature)
    assert abs(d - want) < 1e-4  # same direction in 8-D, so the drawn gap is the depth gap
    assert torch.isfinite(torch.tensor([p["x"], p["y"], q["x"], q["y"]])).all()


def test_empty_single_and_flat_memories_load_without_errors(browser, tmp_path):
    open_page(browser, tmp_path, Memory(clock=lambda: NOW))
    assert browser.evaluate("hmState().drawn") == 0
    browser.key("ArrowDown")
    browser.key("Home")
    one = Memory(clock=lambda: NOW)
    one.add("alone", id="a", t=T0)
    open_page(browser, tmp_path, one, "#focus=a")
    assert browser.evaluate("hmState().focus") == "a" and browser.evaluate("hmState().labels") == ["a"]
    flat = Memory(embedder=HashingEmbedder(dim=8), clock=lambda: NOW)
    flat.add_many([{"text": f"note {i}", "t": T0 + timedelta(hours=i)} for i in range(50)])
    open_page(browser, tmp_path, flat, layout="projection")
    assert browser.evaluate("hmState().drawn") == 50
    assert "layout projection" in browser.evaluate("document.getElementById('hm-summary').textContent")
    assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
