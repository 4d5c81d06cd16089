"""The inspector as walker 70 met it: ``Memory.inspect(path)`` keeps the command line's overwrite
rule (the store's own file and any file that is no inspector page are refused without ``force``),
a store without decay shows a memory dated after now (its slider is hidden), ``inspect --at`` on
such a store warns, and a suggested parent's link focuses that memory."""

from __future__ import annotations

import base64
from datetime import timedelta

import numpy as np
import pytest
from test_cli_walk_outputs import run
from test_inspector_chromium import NOW, T0, open_page, settle

from hypermem import HalfLife, HashingEmbedder, Memory, NoDecay
from hypermem.viz.chromium import Chromium, find_chromium
from hypermem.viz.html import PAGE_HEAD
from hypermem.viz.payload import pack

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed")


def small(decay=None):
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=decay, clock=lambda: NOW)
    mem.add("kickoff notes", id="past", t=NOW - timedelta(days=1))
    mem.add("meeting agenda for tomorrow", id="later", t=NOW + timedelta(days=1))
    return mem


# ---------------------------------------------------------------- 1. inspect(path) overwrites nothing it should not
def test_inspect_refuses_the_snapshot_it_was_loaded_from(tmp_path):
    path = tmp_path / "notes.db"
    small().save(path)
    before = path.read_bytes()
    mem = Memory.load(path)
    with pytest.raises(FileExistsError, match="notes.db.*not an inspector page.*force=True"):
        mem.inspect(path)
    assert path.read_bytes() == before and len(Memory.load(path)) == 2


def test_inspect_refuses_its_own_durable_store_even_with_force(tmp_path):
    path = tmp_path / "agent.db"
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add("important fact", id="f1")
    for force in (False, True):
        with pytest.raises(FileExistsError, match="agent.db.*own durable store"):
            mem.inspect(path, force=force)
    mem.add("second fact", id="f2")  # the store still works and reopens with both
    mem.close()
    with Memory.open(path, embedder=HashingEmbedder(dim=16)) as again:
        assert sorted(again.ids) == ["f1", "f2"]


def test_inspect_replaces_its_own_pages_and_other_files_only_with_force(tmp_path):
    mem = small()
    page = tmp_path / "page.html"
    mem.inspect(page)
    assert page.read_bytes().startswith(PAGE_HEAD)
    mem.inspect(page)  # a page hypermem wrote is regenerated
    empty = tmp_path / "empty.html"
    empty.write_text("")
    mem.inspect(empty)  # an empty file holds nothing to lose (tempfile.mkstemp)
    assert empty.read_bytes().startswith(PAGE_HEAD)
    notes = tmp_path / "notes.html"
    notes.write_text("<!DOCTYPE html>\n<p>my own notes</p>")
    with pytest.raises(FileExistsError, match="notes.html"):
        mem.inspect(notes)
    assert notes.read_text().endswith("my own notes</p>")
    mem.inspect(notes, force=True)
    assert notes.read_bytes().startswith(PAGE_HEAD)


def test_demo_force_still_replaces_a_file_that_is_no_page(tmp_path, capsys):
    page = tmp_path / "events.html"
    page.write_text("<p>my notes</p>")
    code, _, err = run(capsys, "demo", "--dataset", "events", "--out", tmp_path)
    assert code == 1 and "--force" in err and page.read_text() == "<p>my notes</p>"
    assert run(capsys, "demo", "--dataset", "events", "--out", tmp_path, "--force")[0] == 0
    assert page.read_bytes().startswith(PAGE_HEAD)


# ---------------------------------------------------------------- 2. no decay: nothing is hidden by time
def test_no_decay_page_hides_no_memory_by_its_time():
    born = pack(small(NoDecay()))["born"]
    assert np.frombuffer(base64.b64decode(born), dtype="<u2").tolist() == [0, 0]
    with_decay = pack(small(HalfLife(24)))["born"]  # with decay the future memory still waits for its time
    assert np.frombuffer(base64.b64decode(with_decay), dtype="<u2").tolist()[1] > 0


def test_inspect_at_on_a_store_without_decay_warns(tmp_path, capsys):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("a note", t=T0)
    path = tmp_path / "m.db"
    mem.save(path)
    code, _, err = run(capsys, "inspect", path, "-o", tmp_path / "p.html", "--at", "2020-01-01")
    assert code == 0 and "warning: --at changes nothing here: this store has no decay" in err
    Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(24)).save(tmp_path / "d.db")
    code, _, err = run(capsys, "inspect", tmp_path / "d.db", "-o", tmp_path / "d.html", "--at", "2020-01-01")
    assert code == 0 and "warning" not in err


@pytest.fixture(scope="module")
def browser():
    if find_chromium() is None:
        pytest.skip("Chromium is not installed")
    with Chromium(width=1280, height=1100) as b:
        yield b


@needs_chromium
def test_no_decay_page_shows_a_memory_dated_after_now(browser, tmp_path):
    open_page(browser, tmp_path, small(NoDecay()))
    assert browser.evaluate("document.getElementById('hm-count').textContent") == "2 of 2 memories"
    assert browser.evaluate("hmState().drawn") == 2 and browser.evaluate("hmProbe('later').drawn")


# ---------------------------------------------------------------- 3. a suggested parent's link focuses it
@needs_chromium
def test_a_suggested_parent_link_focuses_that_memory(browser, tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=256), clock=lambda: NOW)
    mem.add_many([{"id": f"k{j}", "text": f"kitchen appliance {w}", "t": T0} for j, w in enumerate(["oven", "fridge", "kettle"])])
    mem.add_many([{"id": f"n{j}", "text": f"kitchen appliance {w} note {j} cleaning schedule", "parent": f"k{j % 3}",
                   "t": T0} for j, w in enumerate(["oven", "fridge", "kettle"] * 10)])
    new = mem.add("zebra migrations cross savannah rivers yearly", parent="auto", t=T0)
    open_page(browser, tmp_path, mem)
    browser.evaluate(f"hmFocus({new!r}, false)")
    settle(browser, new)
    target = browser.evaluate("document.querySelector('.hm-suggested a').getAttribute('data-row')")
    target_id = mem.ids[int(target)]
    browser.evaluate("document.querySelector('.hm-suggested a').click()")
    settle(browser, target_id)
    assert browser.evaluate("hmState().selected") == target_id
    assert browser.evaluate("location.hash") == "#focus=" + target_id
