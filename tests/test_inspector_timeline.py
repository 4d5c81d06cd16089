"""The inspector's time slider in headless Chromium: a memory created after the slider's
time is hidden (not drawn, not in the table or its count, weight 0), and the weight column
prints what mem.table() gives."""

from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.viz.chromium import Chromium, find_chromium

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=40)

pytestmark = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")


def growing():
    """Roots from day 0, then one child a day: the store grows along the slider."""
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(24 * 10), clock=lambda: NOW)
    mem.add("the oldest root", id="old", t=T0, meta={"name": "old root"})
    for d in range(1, 40):
        mem.add(f"note of day {d}", id=f"n{d}", parent="old", t=T0 + timedelta(days=d, hours=12))
    return mem


def set_slider(browser, step):
    return browser.evaluate(
        "(() => { const s = document.getElementById('hm-time'); s.value = String(" + str(step) + "); "
        "s.dispatchEvent(new Event('input')); return [document.getElementById('hm-count').textContent, "
        "hmState().drawn, document.getElementById('hm-time-label').textContent]; })()")


def test_memories_created_after_the_slider_time_are_hidden(tmp_path):
    mem = growing()
    path = tmp_path / "page.html"
    mem.inspect(path)  # 41 slider steps, one a day
    with Chromium(width=1280, height=1100) as browser:
        browser.open(path.as_uri())
        assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
        count, drawn, _ = set_slider(browser, 40)  # now: everything exists
        assert count == "40 of 40 memories" and drawn == 40
        count, drawn, label = set_slider(browser, 0)  # the first step: only the root existed
        assert label.startswith("2025-01-01")
        assert count == "1 of 1 memory (39 more created after the slider's time, hidden)" and drawn == 1
        assert browser.evaluate("hmProbe('n1').drawn") is False and browser.evaluate("hmProbe('old').drawn")
        rows = browser.evaluate("Array.from(document.querySelectorAll('#hm-table tr[data-row]'))"
                                ".filter(t => !t.hidden).map(t => t.dataset.id)")
        assert rows == ["old"]
        count, drawn, _ = set_slider(browser, 20)  # day 20: the root and notes 1..19 (day 19.5)
        assert count.startswith("20 of 20 memories (20 more") and drawn == 20
        # Sorting by weight at that time never brings a future memory in.
        browser.evaluate("document.querySelector('#hm-table th[data-key=weight]').click()")
        ids = browser.evaluate("Array.from(document.querySelectorAll('#hm-table tr[data-row]'))"
                               ".filter(t => !t.hidden).map(t => t.dataset.id)")
        assert ids and all(i == "old" or int(i[1:]) <= 19 for i in ids)
        browser.evaluate("hmFocus('n30', false)")  # the details say why its weight is missing
        details = browser.evaluate("document.getElementById('hm-selected').textContent")
        assert "created after the slider's time" in details
        # At now the printed weights are table()'s to 3 decimals.
        set_slider(browser, 40)
        browser.evaluate("hmFocus(null, false)")
        shown = browser.evaluate("Array.from(document.querySelectorAll('#hm-table tr[data-row]'))"
                                 ".filter(t => !t.hidden).map(t => [t.dataset.id, t.children[6].textContent])")
        want = {r["id"]: f"{r['weight']:.3f}" for r in mem.table()}
        assert shown and all(want[i] == w for i, w in shown)
        summary = browser.evaluate("document.getElementById('hm-summary').textContent")
        assert "40 memories \u00b7 1 root \u00b7" in summary and "now 2025-02-10 00:00:00 UTC" in summary
