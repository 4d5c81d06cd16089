"""The store's warnings name the caller's line, and a store opened with another embedder says so."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from hypermem import CallableEmbedder, HashingEmbedder, Memory


def test_warnings_point_at_the_callers_line_however_deep_they_are_raised():
    mem = Memory()
    a = mem.add("animals")
    mem.add("dogs", parent=a)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        mem.search("dogs", mode="cone", root=a)          # raised in the searcher, behind Memory's delegation
        mem.search("dogs", filters={"no_such_key": 1})   # one more frame down
    assert [w.filename for w in got] == [__file__, __file__], [(w.filename, w.lineno) for w in got]


def test_opening_a_store_with_another_kind_of_embedder_warns(tmp_path):
    path = tmp_path / "m.db"
    mem = Memory()
    mem.add("a note")
    mem.save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Memory.load(path)                                    # the stored hashing embedder, rebuilt
        Memory.load(path, embedder=HashingEmbedder(dim=256))   # the same settings
    with pytest.warns(UserWarning, match="'hashing' .*seed=0.*embedder passed is 'hashing' .*seed=3") as rec:
        Memory.load(path, embedder=HashingEmbedder(dim=256, seed=3))
    assert rec[0].filename == __file__
    other = CallableEmbedder(lambda texts: np.ones((len(texts), 256)), 256)
    with pytest.warns(UserWarning, match="embedder passed is 'CallableEmbedder'.*pass the embedder it was made with"):
        mem2 = Memory.load(path, embedder=other)
    assert mem2.get(mem.ids[0]).text == "a note"            # a warning, not a refusal: the store opens
    with Memory.open(tmp_path / "d.db") as db:                # a durable store: the same check on open
        db.add("a note")
    with pytest.warns(UserWarning, match="embedder passed is 'CallableEmbedder'"):
        Memory.open(tmp_path / "d.db", embedder=other).close()


def test_an_indexed_search_after_an_edit_says_it_rebuilds_the_graphs(monkeypatch):
    pytest.importorskip("faiss")
    from hypermem.store import ann_search

    monkeypatch.setattr(ann_search, "REBUILD_NOTE_ROWS", 100)
    monkeypatch.setattr(ann_search, "MAX_TOMBSTONE_SHARE", 0.0)  # any tombstone rebuilds the graphs
    mem = Memory(embedder=HashingEmbedder(dim=16))
    ids = mem.add_many([{"text": f"note number {i} about topic {i % 7}"} for i in range(150)])
    mem.build_index("faiss")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem.search("topic 3", use_index=True)
        mem.add("one more note about topic 3")            # appended: the graphs grow, no rebuild
        mem.search("topic 3", use_index=True)
    mem.update(ids[5], text="a new text for an old note")
    with pytest.warns(ann_search.IndexRebuildWarning, match="rebuilds the graphs over 151 memories") as rec:
        hits = mem.search("a new text for an old note", use_index=True)
    assert rec[0].filename == __file__ and hits[0].id == ids[5]
