"""Walk 71, pathological tree shapes: deep parent chains (thousands of levels) stay linear in
memory and time where a tree is shown, placed, inspected or refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hypermem import Memory
from hypermem.cli.main import main
from hypermem.data.dag import ClosureTooLargeError, hypernym_closure
from hypermem.embed import HashingEmbedder
from hypermem.store.placement import generation_groups
from hypermem.store.views import TREE_INDENT_CAP, MemoryViews
from hypermem.viz.chromium import Chromium, find_chromium

pytestmark = pytest.mark.filterwarnings("ignore:levels \\d+ and deeper")


def chain(n: int, prefix: str = "n", parent: str | None = None) -> list[dict]:
    """An ``n``-deep parent chain, ``prefix0`` (under ``parent``) ... ``prefix{n-1}``."""
    return [{"text": f"node {i}", "id": f"{prefix}{i}", "parent": f"{prefix}{i - 1}" if i else parent}
            for i in range(n)]


@pytest.fixture(scope="module")
def deep():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many(chain(300))
    mem.add("a side note", id="side", parent="n2")
    return mem


# ---------------------------------------------------------------- 1. tree(): indentation capped
def test_tree_lines_are_bounded_past_the_indent_cap(deep):
    lines = deep.tree().split("\n")
    assert len(lines) == 301
    longest = max(len(line) for line in lines)
    assert longest <= 4 * TREE_INDENT_CAP + 60, longest   # not 4 characters a level: 1,200 at level 300
    at = {line.split("node ")[1].split()[0]: line for line in lines if "node " in line}
    assert "[level" not in at[str(TREE_INDENT_CAP)] and at[str(TREE_INDENT_CAP)].endswith(f"[n{TREE_INDENT_CAP} d=23.72]")
    assert f"└── [level {TREE_INDENT_CAP + 1}] node {TREE_INDENT_CAP + 1}  [n{TREE_INDENT_CAP + 1} " in at[str(TREE_INDENT_CAP + 1)]
    assert "└── [level 299] node 299  [n299 " in at["299"]
    indent = at[str(TREE_INDENT_CAP)].index("└──")   # past the cap, one fixed indent
    assert at["299"].index("└──") == at[str(TREE_INDENT_CAP + 1)].index("└──") == indent
    assert lines[-1] == "        └── a side note  [side d=2.50]"   # the sibling still under n2


def test_tree_shallow_levels_unchanged(deep):
    lines = deep.tree().split("\n")
    assert lines[:4] == ["node 0  [n0 d=1.00]", "└── node 1  [n1 d=1.50]",
                         "    └── node 2  [n2 d=2.00]", "        ├── node 3  [n3 d=2.50]"]
    assert lines[4] == "        │   └── node 4  [n4 d=3.00]"


def test_tree_lines_iterates_and_joins_to_tree(deep):
    it = deep.views.tree_lines()
    assert next(it) == "node 0  [n0 d=1.00]"   # a generator: the first line without the rest
    assert "\n".join(["node 0  [n0 d=1.00]", *it]) == deep.tree()
    assert list(deep.views.tree_lines(root="n298")) == deep.tree(root="n298").split("\n")
    with pytest.raises(KeyError):
        deep.views.tree_lines(root="nope")   # raised when called, not at the first line


def test_cli_tree_streams_lines_not_one_string(deep, tmp_path, capsys, monkeypatch):
    db = tmp_path / "deep.db"
    deep.save(db)
    want = deep.tree()

    def whole(*_a, **_k):
        raise AssertionError("hypermem tree built the whole text")
    monkeypatch.setattr(MemoryViews, "tree", whole)
    assert main(["tree", str(db)]) == 0
    assert capsys.readouterr().out == want + "\n"
    empty = tmp_path / "empty.db"
    Memory(embedder=HashingEmbedder(dim=16)).save(empty)
    assert main(["tree", str(empty)]) == 0
    assert capsys.readouterr().out == "(empty memory)\n"


# ---------------------------------------------------------------- 2. add_many: generations grouped once
def test_generation_groups_match_one_scan_a_generation():
    rng = np.random.default_rng(0)
    gen = rng.integers(0, 40, size=500)
    keep = rng.random(500) < 0.7
    want = [np.nonzero((gen == g) & keep)[0] for g in range(gen.max() + 1)]
    got = generation_groups(gen, keep)
    assert [a.tolist() for a in got] == [a.tolist() for a in want if a.size]
    chain_gen = np.arange(10_000)   # a chain: one memory a generation, one group each, in order
    assert [a.tolist() for a in generation_groups(chain_gen, chain_gen > 0)] == [[i] for i in range(1, 10_000)]
    assert generation_groups(np.zeros(0, dtype=int), np.zeros(0, dtype=bool)) == []


def three_shapes() -> list[dict]:
    """A 40-deep chain, a 30-leaf star and 20 roots, interleaved (parents first)."""
    items = chain(40, "c") + [{"text": "hub", "id": "hub"}]
    items += [{"text": f"leaf {i}", "id": f"s{i}", "parent": "hub"} for i in range(30)]
    items += [{"text": f"root {i}", "id": f"f{i}"} for i in range(20)]
    items += [{"text": f"under {i}", "id": f"u{i}", "parent": f"c{i}"} for i in range(0, 40, 7)]
    return items


def test_three_shapes_in_one_batch_place_as_generation_by_generation():
    items = three_shapes()
    whole = Memory(embedder=HashingEmbedder(dim=16))
    whole.add_many(items)
    level = {}
    for it in items:
        level[it["id"]] = 0 if it.get("parent") is None else level[it["parent"]] + 1
    steps = Memory(embedder=HashingEmbedder(dim=16))
    for g in range(max(level.values()) + 1):
        steps.add_many([it for it in items if level[it["id"]] == g])
    ids = [it["id"] for it in items]
    assert steps.ids != ids and sorted(steps.ids) == sorted(ids)
    a = whole.points[[whole.ids.index(i) for i in ids]].double()
    b = steps.points[[steps.ids.index(i) for i in ids]].double()
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------- 3. inspector: a deep path is not nested whole
NESTING = """(() => { let most = 0; for (const e of document.querySelectorAll('#hm-tree li')) {
  let d = 0; for (let p = e; p; p = p.parentElement) { if (p.tagName === 'UL') d++; } most = Math.max(most, d); }
  return most; })()"""


@pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_inspector_focuses_the_deepest_memory_of_a_1000_deep_chain(tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many(chain(1000))
    page = tmp_path / "chain.html"
    mem.inspect(page)
    with Chromium(width=1280, height=1100, timeout=60) as b:
        b.open(page.as_uri())
        b.evaluate("location.hash = '#focus=n999'")
        b.wait_for("!hmState().animating && hmState().focus === 'n999'", timeout=30)
        assert b.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
        assert b.evaluate("document.querySelector('#hm-selected h3').textContent") == "node 999"
        shown = b.evaluate("Array.from(document.querySelectorAll('#hm-tree .hm-label')).filter(e => e.offsetParent)"
                           ".map(e => e.getAttribute('data-row'))")
        assert len(shown) == 200   # the first and last 100 levels of the path, n0 ... n99, n900 ... n999
        gap = b.evaluate("Array.from(document.querySelectorAll('#hm-tree .hm-more')).filter(e => e.offsetParent)"
                         ".map(e => e.textContent)")
        assert gap == ["\u2026 800 levels \u2026"]
        assert b.evaluate(NESTING) <= 201   # not 1,000 nested lists
        b.evaluate("location.hash = '#focus=n3'")   # a shallow memory: the full tree again, opened to it
        b.wait_for("!hmState().animating && hmState().focus === 'n3'", timeout=30)
        assert b.evaluate("document.querySelectorAll('#hm-tree .hm-more').length") == 0
        assert b.evaluate("document.querySelector('#hm-tree .hm-label[data-row=\"3\"]').offsetParent !== null")


# ---------------------------------------------------------------- 4. a too-deep closure says what to do
def test_closure_refusal_names_the_layouts_that_need_none():
    with pytest.raises(ClosureTooLargeError, match=r"MAX_CLOSURE\); lay out a deep tree with "
                                                   r"hypermem.hierarchy.sarkar_layout or shadow_layout, which need no "
                                                   r"closure, or train on a shallower subset"):
        hypernym_closure({f"n{i + 1}": [f"n{i}"] for i in range(100)}, limit=1000)
