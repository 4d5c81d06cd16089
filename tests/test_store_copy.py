"""copy.deepcopy and pickle of a store: an in-process Memory copies (its own lock, its own
rows, the same answers, a built faiss index carried along); a durable one refuses with a
message that says what to do instead."""

from __future__ import annotations

import copy
import pickle
from datetime import datetime, timedelta, timezone

import pytest
import torch

from hypermem.embed import HashingEmbedder
from hypermem.index.mips import faiss_available
from hypermem.store import Memory

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def later() -> datetime:
    """A module-level clock (a lambda would not pickle: that is Python's rule, not ours)."""
    return T0 + timedelta(days=3)


def small(**kw) -> Memory:
    m = Memory(embedder=HashingEmbedder(dim=32), clock=later, **kw)
    m.add("animal", id="a", t=T0)
    m.add("dog barks", id="d", parent="a", meta={"legs": 4}, t=T0 + timedelta(days=1))
    m.add("cat purrs", id="c", parent="a", t=T0 + timedelta(days=2))
    return m


def answers(m: Memory, query: str = "dog", **kw):
    return [(r.id, round(r.score, 12)) for r in m.search(query, k=3, **kw)]


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_copy_is_an_independent_store_with_the_same_answers(how):
    m = small()
    c = copy.deepcopy(m) if how == "deepcopy" else pickle.loads(pickle.dumps(m))
    assert answers(c) == answers(m)
    assert c.get("d").meta == {"legs": 4} and c.children("a") == m.children("a")
    assert torch.equal(c.points, m.points)
    assert c.state.lock is not m.state.lock
    with c.state.lock:  # a working re-entrant lock of its own
        with c.state.lock:
            c.add("wolf howls", id="w", parent="a")
    assert len(c) == 4 and len(m) == 3 and "w" not in m
    c.remove("d")
    assert "d" in m and answers(m)[0][0] == "d"


@pytest.mark.skipif(not faiss_available(), reason="the ann extra (faiss) is not installed")
def test_a_built_faiss_index_travels_with_the_copy():
    m = small()
    m.build_index("faiss")
    before = answers(m, use_index=True)
    c = pickle.loads(pickle.dumps(m))
    assert c.searcher.index is not None and c.searcher.index.backend == "faiss"
    assert answers(c, use_index=True) == before
    c.add("puppy", id="p", parent="d")  # the copy's index is rebuilt for its own rows only
    assert "p" in [r.id for r in c.search("puppy", k=4, use_index=True)]
    assert "p" not in [r.id for r in m.search("puppy", k=4, use_index=True)]


def test_a_durable_store_refuses_to_be_copied(tmp_path):
    m = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))
    m.add("animal", id="a")
    for attempt in (copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match=r"database connection.*Memory\.open"):
            attempt(m)
    assert len(m) == 1 and (tmp_path / "m.db").exists()
    m.close()
