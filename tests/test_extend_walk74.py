"""Extending hypermem with one's own classes (walk 74, the extender's report): an embedder whose
``dim`` is a NumPy integer, ``copy.copy`` of a store, a Memory subclass's repr, the embedder's
output checks, a custom embedder on the command line, and a file's custom decay policy on load."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from hypermem import HalfLife, Memory


class Emb:
    """A small deterministic embedder (bag of characters)."""

    def __init__(self, dim=8, out=None):
        self.dim, self.out = dim, out

    def embed(self, texts):
        if self.out is not None:
            return self.out(texts)
        x = np.zeros((len(texts), int(self.dim)))
        for i, t in enumerate(texts):
            for ch in t:
                x[i, ord(ch) % int(self.dim)] += 1.0
        return x


# ---------------------------------------------------------------------------- 1. dim
def test_a_numpy_integer_dim_is_accepted_and_a_float_dim_is_named():
    mem = Memory(embedder=Emb(np.int64(8)))
    mem.add("dogs")
    assert mem.dim == 8 and type(mem.dim) is int and mem.search("dogs", k=1)[0].record.text == "dogs"
    with pytest.raises(ValueError, match=r"dim must be an integer, got 8\.0 \(int\(8\.0\)"):
        Memory(embedder=Emb(8.0))
    with pytest.raises(ValueError, match="dim must be an integer, got '8'"):
        Memory(embedder=Emb("8"))
    with pytest.raises(ValueError, match="dim must be an integer, got True"):
        Memory(embedder=Emb(True))
    with pytest.raises(ValueError, match=r"dimension >= 2, got dim=np.int32\(1\)"):
        Memory(embedder=Emb(np.int32(1)))


def test_langchain_embeddings_take_a_numpy_integer_dim():
    lc = pytest.importorskip("hypermem.integrations.langchain")
    from langchain_core.embeddings import Embeddings

    class E(Embeddings):
        def embed_documents(self, texts):
            return Emb(8).embed(texts).tolist()

        def embed_query(self, text):
            return self.embed_documents([text])[0]

    assert lc.LangChainEmbedder(E(), dim=np.int64(8)).dim == 8
    with pytest.raises(ValueError, match="dim must be an integer, got 8.0"):
        lc.LangChainEmbedder(E(), dim=8.0)


# ---------------------------------------------------------------------------- 2. copy.copy
def test_copy_copy_is_an_independent_store_that_shares_the_embedder_and_clock():
    t = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    m = Memory(clock=lambda: t[0], time_coef=1.0)
    m.add("dogs", id="old")
    t[0] += timedelta(hours=10)
    m.add("dogs", id="new")
    c = copy.copy(m)
    assert c.embedder is m.embedder and c.clock is m.clock and c.state is not m.state
    c.decay = HalfLife(hours=1)   # the copy ranks with its own policy ...
    assert [r.record.id for r in c.search("dogs", k=2)] == ["new", "old"]
    assert c.search("dogs", k=2)[1].score < -1
    assert {r.score for r in m.search("dogs", k=2)} == {0.0}   # ... the original with its own
    c.add("cats purr", id="cat")
    assert len(c) == 3 and len(m) == 2 and "cat" not in m and m.search("cats", k=3)[0].record.id != "cat"


def test_copy_copy_of_a_durable_store_is_refused(tmp_path):
    with Memory.open(tmp_path / "a.db") as db:
        db.add("dogs")
        with pytest.raises(TypeError, match="second handle writing the same storage.*Memory.load"):
            copy.copy(db)


# ---------------------------------------------------------------------------- repr
def test_repr_of_a_subclass_names_it(tmp_path):
    class CompanyMemory(Memory):
        pass

    assert repr(CompanyMemory()).startswith("CompanyMemory(n=0,")
    with Memory.open(tmp_path / "a.db") as db:
        assert repr(db).startswith("Memory(n=0,")
    with CompanyMemory.open(tmp_path / "b.db") as db:
        assert repr(db).startswith("CompanyMemory(n=0,")
