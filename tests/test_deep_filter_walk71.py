"""Walk 71, deep chains: filtering the inspector to a memory deep in a parent chain does not nest
its whole ancestor chain (Chromium's layout gives up on ~750 nested lists and the page freezes)."""

from __future__ import annotations

import pytest

from hypermem import Memory
from hypermem.embed import HashingEmbedder
from hypermem.viz.chromium import Chromium, find_chromium

pytestmark = [pytest.mark.filterwarnings("ignore:levels \\d+ and deeper"),
              pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")]

NESTING = """(() => { let most = 0; for (const e of document.querySelectorAll('#hm-tree li')) {
  let d = 0; for (let p = e; p; p = p.parentElement) { if (p.tagName === 'UL') d++; } most = Math.max(most, d); }
  return most; })()"""
SHOWN = ("Array.from(document.querySelectorAll('#hm-tree .hm-label')).filter(e => e.offsetParent)"
         ".map(e => Number(e.textContent.slice(5)))")   # "node 12" -> 12
GAPS = ("Array.from(document.querySelectorAll('#hm-tree .hm-more')).filter(e => e.offsetParent)"
        ".map(e => e.textContent)")


def type_filter(b: Chromium, text: str) -> str:
    """Types ``text`` into the filter box; returns the count line."""
    return b.evaluate(f"(() => {{ const f = document.getElementById('hm-filter'); f.value = {text!r}; "
                      "f.dispatchEvent(new Event('input')); return document.getElementById('hm-count').textContent; })()")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"node {i}", "id": f"n{i}", "parent": f"n{i - 1}" if i else None} for i in range(1000)])
    page = tmp_path_factory.mktemp("deep") / "chain.html"
    mem.inspect(page)
    with Chromium(width=1280, height=1100, timeout=60) as b:
        b.open(page.as_uri())
        yield b


def test_filter_to_the_deepest_memory_of_a_1000_deep_chain(browser):
    assert type_filter(browser, "node 999") == "1 of 1000 memories"
    assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
    assert browser.evaluate(NESTING) <= 201   # not 1,000 nested lists
    shown = browser.evaluate(SHOWN)
    assert shown == list(range(100)) + list(range(900, 1000))   # the first and last 100 levels of its path
    assert browser.evaluate(GAPS) == ["\u2026 800 levels \u2026"]
    assert browser.evaluate("document.querySelector('#hm-tree .hm-label[data-row=\"999\"]').textContent") == "node 999"


def test_filter_with_shallow_and_deep_matches_shares_the_top_levels(browser):
    assert type_filter(browser, "node 99") == "11 of 1000 memories"   # n99 and n990 ... n999
    assert browser.evaluate(NESTING) <= 201
    shown = browser.evaluate(SHOWN)
    assert all(shown.count(i) == 1 for i in range(100))   # the first 100 levels once, shared
    assert all(i in shown for i in [99, 990, 991])   # the first matches visible, each long path cut
    assert browser.evaluate(GAPS) == ["\u2026 791 levels \u2026", "\u2026 792 levels \u2026",
                                      "(the first 3 of 11 matches)"]   # the tree's budget: 240 items


def test_filter_to_a_memory_within_the_cap_nests_its_path_whole(browser):
    assert type_filter(browser, "node 150") == "1 of 1000 memories"
    assert browser.evaluate(SHOWN) == list(range(151))
    assert browser.evaluate(GAPS) == []
    assert browser.evaluate(NESTING) == 151


def test_clearing_the_filter_after_a_deep_one_shows_the_full_tree(browser):
    type_filter(browser, "node 999")
    assert type_filter(browser, "") == "1000 of 1000 memories"
    assert browser.evaluate(GAPS) == []
    assert browser.evaluate("Array.from(document.querySelectorAll('#hm-tree > ul')).filter(u => !u.hidden).length") == 1
    shown = browser.evaluate(SHOWN)   # the full tree as it opens, not the filter's path
    assert shown[0] == 0 and 999 not in shown and len(shown) < 10
