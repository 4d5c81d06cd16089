"""Extending hypermem with one's own classes (walk 74, the extender's report): an embedder whose
``dim`` is a NumPy integer, ``copy.copy`` of a store, a Memory subclass's repr, the embedder's
output checks, a custom embedder on the command line, and load's decay= (an override, as in the reference)."""

from __future__ import annotations

import copy
import warnings
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import torch

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


# ---------------------------------------------------------------------------- 4. output checks
@pytest.mark.parametrize("out", [lambda t: np.ones((len(t), 8), dtype=complex),
                                 lambda t: torch.ones(len(t), 8, dtype=torch.complex64)])
def test_complex_embeddings_are_refused_not_cast(out):
    mem = Memory(embedder=Emb(8, out=out))
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no ComplexWarning: an error instead
        with pytest.raises(TypeError, match=r"the embedder returned complex values \((torch\.)?complex"):
            mem.add("dogs")
    assert len(mem) == 0


def test_an_embedder_returning_none_says_so():
    with pytest.raises(TypeError, match="the embedder returned None"):
        Memory(embedder=Emb(8, out=lambda t: None)).add("dogs")
    from hypermem.embed import CallableEmbedder

    with pytest.raises(TypeError, match="the embedding function returned None"):
        CallableEmbedder(lambda t: None, dim=8).embed(["dogs"])
    with pytest.raises(TypeError, match="the embedding function returned complex values"):
        CallableEmbedder(lambda t: np.ones((len(t), 8), dtype=complex), dim=8).embed(["dogs"])


def test_a_trained_embedding_with_an_embedder_of_another_dim_names_both_dims():
    from hypermem.train.export import embedding_to_memory

    pts = {"mammal": torch.tensor([0.0, 0.1, 0.0]), "dog": torch.tensor([0.5, 0.3, 0.1])}
    with pytest.raises(ValueError, match=r"embedder's dim \(16\) must equal the trained points' dimension 3"):
        embedding_to_memory(pts, [("mammal", "dog")], embedder=Emb(16))
    mem = embedding_to_memory(pts, [("mammal", "dog")], embedder=Emb(np.int64(3)))
    assert mem.ancestors("dog") == ["mammal"]


# ---------------------------------------------------------------------------- load keeps the saved policy
class Plain:
    """A custom decay policy: every weight 1."""

    def weight(self, now, times, access_counts, valid_from, valid_until):
        return torch.ones_like(times)


def test_load_replaces_the_saved_policy_as_the_reference_does_and_open_refuses(tmp_path):
    m = Memory(decay=Plain())
    m.add("dogs")
    m.save(tmp_path / "p.db")
    with pytest.raises(ValueError, match="decay="):          # a custom policy must be given again
        Memory.load(tmp_path / "p.db")
    assert isinstance(Memory.load(tmp_path / "p.db", decay=Plain()).decay, Plain)
    assert Memory.load(tmp_path / "p.db", decay=HalfLife()).decay == HalfLife()   # poincare-memory's override
    assert Memory.from_json(m.to_json(), decay=HalfLife()).decay == HalfLife()
    h = Memory(decay=HalfLife(hours=24))
    h.add("dogs")
    h.save(tmp_path / "h.db")
    assert Memory.load(tmp_path / "h.db").decay == HalfLife(hours=24)
    assert Memory.load(tmp_path / "h.db", decay=HalfLife(hours=1)).decay == HalfLife(hours=1)
    with pytest.raises(ValueError, match="was created with"):   # open: the file is the store
        Memory.open(tmp_path / "d.db", decay=Plain()).close()
        Memory.open(tmp_path / "d.db", decay=HalfLife())


# ---------------------------------------------------------------------------- 3. --embedder module:Class
EMB_MODULE = '''
import numpy as np

class BagEmb:
    dim = 16
    def embed(self, texts):
        out = np.zeros((len(texts), 16))
        for i, t in enumerate(texts):
            for ch in t:
                out[i, ord(ch) % 16] += 1.0
        return out
'''


def test_the_cli_takes_an_embedder_written_in_python_as_module_colon_class(tmp_path, monkeypatch, capsys):
    import sys

    from hypermem.cli import main

    (tmp_path / "walk74_bagemb.py").write_text(EMB_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "walk74_bagemb", raising=False)
    sys.path.insert(0, str(tmp_path))
    from walk74_bagemb import BagEmb

    with Memory.open(tmp_path / "agent.db", embedder=BagEmb()) as db:
        db.add("dogs are loyal", id="d")
        db.add("cats purr", id="c")
    assert main(["search", "agent.db", "dogs"]) == 1
    assert "pass --embedder module:BagEmb" in capsys.readouterr().err
    assert main(["search", "agent.db", "dogs", "--embedder", "walk74_bagemb:BagEmb", "--json"]) == 0
    assert '"d"' in capsys.readouterr().out
    assert main(["search", "agent.db", "dogs", "--embedder", "walk74_bagemb:Nope"]) == 1
    assert "has no class 'Nope'" in capsys.readouterr().err


def test_callable_embedder_takes_any_integer_dim_and_keeps_a_plain_int():
    from hypermem.embed import CallableEmbedder

    e = CallableEmbedder(lambda texts: [[1.0, 2.0]] * len(texts), np.int64(2))
    assert type(e.dim) is int and e.dim == 2 and tuple(e.embed(["a"]).shape) == (1, 2)
    for bad in (2.0, True, "2", 0, np.float64(2)):
        with pytest.raises(ValueError, match="dim must be a positive integer"):
            CallableEmbedder(lambda texts: texts, bad)
