"""Shared checks of durable stores against the in-process store (SQLite and PostgreSQL tests)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone

import torch

from hypermem import HashingEmbedder, Memory
from hypermem.temporal import Ebbinghaus

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TOL = 1e-9


def stepping_clock(start: datetime = T0, step: timedelta = timedelta(minutes=7)):
    """A clock that moves ``step`` forward at every call (the same sequence for two stores)."""
    ticks = itertools.count()
    return lambda: start + next(ticks) * step


def settings(**extra):
    """Store settings with every score term switched on (time decay with access counts, depth bias)."""
    return dict(embedder=HashingEmbedder(dim=32), decay=Ebbinghaus(stability_hours=5.0), depth_bias=0.3,
                time_coef=0.7, clock=stepping_clock(), **extra)


def script(mem: Memory) -> None:
    """Every mutating method, in an order that exercises links, explicit points and removal."""
    mem.add("animals", id="animals", meta={"kind": "root"})
    mem.add("plants", id="plants", t=T0 - timedelta(days=2), valid_until=T0 + timedelta(days=30))
    mem.add_many([{"text": f"dog breed number {i}", "parent": "animals", "id": f"dog{i}",
                   "meta": {"kind": "dog", "i": i}} for i in range(6)])
    mem.add_many([{"text": "puppy", "parent": "dog0", "id": "puppy"},
                  {"text": "explicit point", "id": "pt", "point": torch.full((mem.dim,), 0.05, dtype=torch.float64)},
                  {"text": "under the point", "id": "kid", "parent": "pt"}])
    mem.search("dog", k=3)
    mem.search_batch(["plants", "animals"], k=2)
    mem.update("dog1", text="a loyal hound", meta={"kind": "hound"})
    mem.update("plants", valid_from=T0 - timedelta(days=1), t=T0 + timedelta(hours=1))
    mem.link("dog2", "plants")
    mem.link("pt", "animals")
    mem.link("dog3", None)
    mem.remove("dog4")
    mem.add("a late memory", parent="dog3", id="late", valid_from=T0 + timedelta(days=3))
    mem.search("hound", k=4, mode="subtree", root="animals")


def queries(mem: Memory):
    """Search calls (kwargs) covering the six modes, filters, at_time and both metrics."""
    yield dict(query="dog", k=5)
    yield dict(query="loyal hound", k=3, metric="hyperbolic")
    yield dict(query="dog", k=10, mode="subtree", root="animals")
    yield dict(query="puppy", k=4, mode="children", root="animals")
    yield dict(query="animals", k=4, mode="ancestors", root="puppy")
    yield dict(query="breed", k=4, mode="siblings", root="dog1")
    yield dict(query="breed", k=4, filters={"kind": "dog"})
    yield dict(query="breed", k=4, at_time=T0 + timedelta(hours=1))
    yield dict(query="late", k=4, valid_only=True, at_time=T0 + timedelta(days=4))
    yield dict(query=None, k=3, mode="subtree", root="animals")


def assert_same(a: Memory, b: Memory, tol: float = TOL) -> None:
    """Same ids, records, hierarchy, geometry and search answers (scores to ``tol``)."""
    assert a.ids == b.ids
    for i in a.ids:
        ra, rb = a.get(i), b.get(i)
        assert ra.to_dict() == rb.to_dict(), i
        assert a.children(i) == b.children(i) and a.level(i) == b.level(i)
        assert a.ancestors(i) == b.ancestors(i) and a.siblings(i) == b.siblings(i)
    assert a.roots() == b.roots()
    if len(a):
        assert float((a.points - b.points).abs().max()) <= tol
        assert float((a.embeddings - b.embeddings).abs().max()) <= tol
    sa, sb = a.stats(T0), b.stats(T0)
    for key in ("count", "roots", "levels", "max_level", "accesses"):
        assert sa[key] == sb[key], key
    for kw in queries(a):
        if kw.get("root") is not None and kw["root"] not in a:
            continue
        kw.setdefault("at_time", T0 + timedelta(days=10))  # both stores' clocks need not agree
        ra, rb = a.search(touch=False, **kw), b.search(touch=False, **kw)
        assert [r.id for r in ra] == [r.id for r in rb], kw
        for x, y in zip(ra, rb):
            assert abs(x.score - y.score) <= tol and abs(x.distance - y.distance) <= tol, kw


def check_script_and_reopen(target) -> tuple[Memory, Memory]:
    """Run :func:`script` on an in-process store and on a durable one at ``target``; both
    must agree live and after reopening.  Returns (in-process, reopened)."""
    ref = Memory(**settings())
    with Memory.open(target, **settings()) as mem:
        script(ref)
        script(mem)
        assert_same(ref, mem)
    again = Memory.open(target, embedder=HashingEmbedder(dim=32), clock=stepping_clock())
    assert_same(ref, again)
    assert again.stats()["decay"] == ref.stats()["decay"]
    return ref, again
