"""Shared by the persistence tests: their epoch ``T0``, a settable clock, a memory that
exercises every piece of state, an exact comparison of two memories, and the temporary
files a save leaves."""

import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import torch

from hypermem import HalfLife, HashingEmbedder, Memory, Product, ValidityWindow

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self, t=T0 + timedelta(days=10)):
        self.t = t

    def __call__(self):
        return self.t


def rich_memory(dtype=torch.float64, device="cpu", dim=64):
    """A memory that exercises every piece of state: hierarchy with a re-parented child
    (sibling order differs from insertion order), updated text, a removed memory,
    validity windows, access counts, nested meta, unicode, an explicit point and a
    precomputed embedding, and a composite decay policy."""
    mem = Memory(embedder=HashingEmbedder(dim=dim, seed=7), decay=Product(HalfLife(48), ValidityWindow(0.01)),
                 curvature=0.7, base_depth=0.8, depth_step=0.6, inherit=0.4, cone_k=0.05, time_coef=0.5,
                 depth_bias=0.1, clock=Clock(), dtype=dtype, device=device)
    mem.add("animals live on earth", id="animal", t=T0, meta={"kind": "topic", "tags": ["a", "b"],
                                                              "nested": {"x": 1.5, "ok": True, "none": None}})
    mem.add("dogs are loyal", parent="animal", id="dog", t=T0 + timedelta(hours=1))
    mem.add("cats are independent", parent="animal", id="cat", t=T0 + timedelta(hours=2),
            valid_from=T0, valid_until=T0 + timedelta(days=3))
    mem.add("wolves hunt in packs", id="wolf", t=T0 + timedelta(hours=3))
    mem.add("puppies play", parent="dog", id="puppy", t=T0 + timedelta(hours=4), meta={"ü": "日本語 ✓"})
    mem.add("temporary note", id="tmp", t=T0 + timedelta(hours=5))
    mem.add_many([{"text": "a fixed point", "id": "fixed", "point": [0.3] + [0.0] * (dim - 1)},
                  {"text": "precomputed", "id": "pre", "parent": "animal",
                   "embedding": torch.linspace(-1, 1, dim, dtype=torch.float64)}])
    mem.link("dog", None)
    mem.link("dog", "animal")  # children of animal: cat, pre, dog (not insertion order)
    mem.update("wolf", text="wolves howl at night", meta={"edited": 1})
    mem.remove("tmp")
    mem.search("loyal dog", k=2)
    mem.search("animals", k=3, mode="subtree", root="animal")
    return mem


def assert_same(a: Memory, b: Memory, exact: bool = True):
    assert a.ids == b.ids
    for x, y in zip(a, b):
        assert x == y
        assert x.to_dict() == y.to_dict()
        assert type(x.t) is type(y.t) and x.t.tzinfo is not None and y.t.tzinfo is not None
    for i in a.ids:
        assert a.children(i) == b.children(i)
        assert a.level(i) == b.level(i)
    assert a.roots() == b.roots()
    assert (a.dim, a.curvature, a.base_depth, a.depth_step, a.inherit, a.cone_constrained, a.cone_k, a.metric,
            a.time_coef, a.depth_bias) == (b.dim, b.curvature, b.base_depth, b.depth_step, b.inherit,
                                           b.cone_constrained, b.cone_k, b.metric, b.time_coef, b.depth_bias)
    assert a.decay == b.decay
    assert a.dtype == b.dtype
    n = len(a)
    if exact:
        assert torch.equal(a.points.cpu(), b.points.cpu())
        assert torch.equal(a.directions.cpu(), b.directions.cpu())
        assert torch.equal(a.depths.cpu(), b.depths.cpu())
    else:
        torch.testing.assert_close(a.points.cpu(), b.points.cpu(), rtol=0, atol=1e-12)
    assert torch.equal(a.embeddings, b.embeddings)
    for name in ("time", "access", "valid_from", "valid_until"):
        assert torch.equal(getattr(a.state, name)[:n].cpu(), getattr(b.state, name)[:n].cpu()), name
    assert a.stats() == b.stats()


def temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def foreign_sqlite(path: Path) -> Path:
    """Another application's SQLite database (one table ``t``) at ``path``."""
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    return path


def note_item(i: int, **extra) -> dict:
    """Item ``i`` of the chunked save/open tests' 300-note store: a parent every third note, a
    validity window every eleventh, typed meta, an hour apart."""
    item = {"text": f"note {i} about topic {i % 7}", "id": f"n{i}", "meta": {"k": i % 5, "tags": ["a", i]},
            "t": T0 - timedelta(hours=i), **extra}
    if i % 3:
        item["parent"] = f"n{i - i % 3}"
    if i % 11 == 0:
        item["valid_from"], item["valid_until"] = T0 - timedelta(days=9), T0 + timedelta(days=i)
    return item
