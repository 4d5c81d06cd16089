"""The mirror-free PostgreSQL client (``Memory.open(url, mirror=False)``) on a real server:
every method against the in-process store, other clients' writes seen at once, RAM that
does not grow with the store, a restarted server."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import re
import tracemalloc
from datetime import timedelta

import pytest
import torch
from storage_parity import T0, TOL, queries, script, settings, stepping_clock

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError
from hypermem.store.backends.server import ServerMemory
from hypermem.temporal import HalfLife

pytestmark = pytest.mark.usefixtures("one_thread")
AT = T0 + timedelta(days=10)


def _same_results(a, b, tol=TOL):
    """Same answers: the same scores at every rank and the same ids, except that memories
    whose scores tie to ``tol`` (equal texts under the hashing embedder, 1e-16 apart after
    the float64 rounding of either side) may come in either order or trade the last places."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert abs(x.score - y.score) <= tol
        if x.id != y.id:
            tied = {z.id for z in a if abs(z.score - x.score) <= tol}
            assert y.id in tied or abs(x.score - a[-1].score) <= tol, (x, y)
            continue
        assert abs(x.distance - y.distance) <= tol
        assert abs(x.time_weight - y.time_weight) <= 1e-12 and abs(x.depth - y.depth) <= tol
        assert x.record.to_dict() == y.record.to_dict()


def assert_same_server(ref: Memory, srv: ServerMemory) -> None:
    """Same ids, records, hierarchy, geometry, stats and search answers."""
    assert srv.ids == ref.ids and len(srv) == len(ref)
    assert [r.to_dict() for r in srv] == [r.to_dict() for r in ref]
    assert srv.roots() == ref.roots()
    for i in ref.ids:
        assert i in srv and srv.get(i).to_dict() == ref.get(i).to_dict()
        assert srv.parent(i) == ref.parent(i) and srv.children(i) == ref.children(i)
        assert srv.ancestors(i) == ref.ancestors(i) and srv.descendants(i) == ref.descendants(i)
        assert srv.siblings(i) == ref.siblings(i) and srv.level(i) == ref.level(i)
        assert abs(srv.depth(i) - ref.depth(i)) <= TOL
        assert float((srv.point(i) - ref.point(i)).abs().max()) <= TOL
        assert torch.equal(srv.embedding(i), ref.embedding(i))
    sa, sb = ref.stats(T0), srv.stats(T0)
    assert abs(sa.pop("mean_time_weight") - sb.pop("mean_time_weight")) <= 1e-12
    assert sa == sb
    for kw in queries(ref):
        if kw.get("metric") == "hyperbolic" or kw.get("root") is not None and kw["root"] not in ref:
            continue
        kw.setdefault("at_time", AT)
        _same_results(ref.search(touch=False, **kw), srv.search(touch=False, **kw))
    qs = ["dog", "plants", "hound"]
    for a, b in zip(ref.search_batch(qs, k=4, at_time=AT, touch=False), srv.search_batch(qs, k=4, at_time=AT,
                                                                                         touch=False)):
        _same_results(a, b)


@pytest.mark.parametrize("extra", [{}, {"cone_constrained": True, "inherit": 0.05}], ids=["free", "cones"])
def test_every_method_matches_the_in_process_store(pg_url, extra):
    ref = Memory(**settings(**extra))
    with Memory.open(pg_url, mirror=False, **settings(**extra)) as srv:
        assert isinstance(srv, ServerMemory)
        script(ref)
        script(srv)
        assert_same_server(ref, srv)
        # touches: returned records show them; explicit touches; then a structural search
        _same_results(ref.search("dog breed", k=3), srv.search("dog breed", k=3))
        _same_results(ref.search_batch(["dog", "puppy"], k=2)[1], srv.search_batch(["dog", "puppy"], k=2)[1])
        ref.touch(["dog0", "dog0", "plants"])
        srv.touch(["dog0", "dog0", "plants"])
        _same_results(ref.search(None, k=4, mode="subtree", root="animals"),
                      srv.search(None, k=4, mode="subtree", root="animals"))
        assert srv.remove("dog3", cascade=True) == ref.remove("dog3", cascade=True) == ["dog3", "late"]
        with pytest.raises(ValueError, match="children"):
            srv.remove_many(["dog0", "animals"])
        assert srv.remove_many(["dog1", "dog2"]) == ref.remove_many(["dog1", "dog2"]) == ["dog1", "dog2"]
        ref.update("pt", text="a new text for the point", valid_until=None)
        srv.update("pt", text="a new text for the point", valid_until=None)
        assert_same_server(ref, srv)
    again = Memory.open(pg_url, embedder=HashingEmbedder(dim=32), clock=stepping_clock())  # the mirrored client
    assert again.cone_constrained == bool(extra)
    assert again.ids == ref.ids
    for i in ref.ids:
        assert again.get(i).to_dict() == ref.get(i).to_dict()
        assert float((again.point(i) - ref.point(i)).abs().max()) <= TOL
    again.close()


def test_errors_match_the_in_process_store(pg_url, tmp_path):
    ref = Memory(**settings())
    srv = Memory.open(pg_url, mirror=False, **settings())
    for mem in (ref, srv):
        mem.add("animals", id="a")
        mem.add("dogs", id="d", parent="a")
    calls = [lambda m: m.get("nope"), lambda m: m.children("nope"), lambda m: m.ancestors("nope"),
             lambda m: m.add("x", parent="nope"), lambda m: m.add("x", id="a"), lambda m: m.remove("a"),
             lambda m: m.link("a", "d"), lambda m: m.link("a", "a"), lambda m: m.update("nope", meta={}),
             lambda m: m.update("d", valid_from=T0, valid_until=T0 - timedelta(days=1)),
             lambda m: m.search("x", mode="subtree", root="nope"), lambda m: m.search(None),
             lambda m: m.touch(["a", "nope"]), lambda m: m.search("x", k=0), lambda m: m.search_batch("x")]
    for call in calls:
        with pytest.raises(Exception) as want:
            call(ref)
        with pytest.raises(type(want.value), match=re.escape(str(want.value.args[0])[:30])):
            call(srv)
    assert srv.ids == ref.ids == ["a", "d"] and srv.get("a").access_count == 0
    for kw, what in [({"mode": "cone", "root": "a"}, "cone"), ({"metric": "hyperbolic"}, "hyperbolic"),
                     ({"filters": lambda r: True}, "callable"), ({"use_index": True}, "ann=True")]:
        with pytest.raises(ValueError, match=what) as err:
            srv.search("x", **kw)
        assert "ann=True" in str(err.value) or "Memory.open(url)" in str(err.value)
    with pytest.raises(ValueError, match="postgresql://"):
        Memory.open(tmp_path / "x.db", mirror=False)
    srv.close()


def test_reopen_settings_and_read_only(pg_url):
    Memory.open(pg_url, mirror=False, **settings()).close()
    srv = Memory.open(pg_url, mirror=False, embedder=HashingEmbedder(dim=32))
    assert srv.depth_bias == 0.3 and srv.time_coef == 0.7 and srv.stats()["decay"]["type"] == "ebbinghaus"
    srv.add("x", id="x")
    with pytest.raises(ValueError, match="depth_bias"):
        Memory.open(pg_url, mirror=False, depth_bias=1.0, embedder=HashingEmbedder(dim=32))
    reader = Memory.open(pg_url, mirror=False, read_only=True, embedder=HashingEmbedder(dim=32))
    assert [r.id for r in reader.search("x", k=1)] == ["x"] and reader.get("x").access_count == 0
    with pytest.raises(StorageError, match="read_only"):
        reader.add("y")
    srv.close()
    reader.close()


def test_other_clients_writes_are_seen_at_once(pg_url):
    a = Memory.open(pg_url, mirror=False, embedder=HashingEmbedder(dim=16))
    b = Memory.open(pg_url, mirror=False, embedder=HashingEmbedder(dim=16))
    mirrored = Memory.open(pg_url, embedder=HashingEmbedder(dim=16))
    a.add("shared root", id="root")
    assert "root" in b and b.children("root") == []
    b.add("a note from b", id="nb", parent="root")
    assert a.children("root") == ["nb"] and a.level("nb") == 1
    mirrored.add("a note from the mirrored client", id="nm", parent="nb")
    assert a.descendants("root") == ["nb", "nm"] and len(b) == 3
    assert [r.id for r in b.search("a note from the mirrored client", k=1)] == ["nm"]
    assert a.get("nm").access_count == 1  # b's touch, at once
    a.link("nm", None)
    assert mirrored.search("a note from the mirrored client", k=1, touch=False)[0].record.parent_id is None
    assert mirrored.get("nm").access_count == 1
    assert sorted(b.remove("root", cascade=True)) == ["nb", "root"]
    assert mirrored.refresh() and mirrored.ids == ["nm"]
    for m in (a, b, mirrored):
        m.close()


def test_batched_touches_and_the_hnsw_search(pg_url):
    """A batch's touches land once per hit on shared records (as in process); ``ann=True``
    re-scores the HNSW candidates exactly; ``stats`` counts the rows read."""
    kw = dict(embedder=HashingEmbedder(dim=32), decay=HalfLife(hours=24 * 365), depth_bias=0.3,
              clock=stepping_clock())
    ref, srv = Memory(**kw), Memory.open(pg_url, mirror=False, **{**kw, "clock": stepping_clock()})
    for mem in (ref, srv):
        roots = mem.add_many([{"text": f"topic {i}" + " more" * i, "id": f"r{i}"}  # no two roots tie
                              for i in range(10)])
        mem.add_many([{"text": f"note {j} with word{j % 23}", "id": f"n{j}", "parent": roots[j % 10]}
                      for j in range(400)])
    qs = ["word3 note", "word3", "topic 2"]
    for a, b in zip(ref.search_batch(qs, k=5), srv.search_batch(qs, k=5)):
        _same_results(a, b)
    assert [r.to_dict() for r in srv] == [r.to_dict() for r in ref]
    srv.storage.build_ann_index()
    truth = {r.id: r.score for r in ref.search("word7 note", k=410, touch=False, at_time=AT)}
    read: dict = {}
    got = srv.search("word7 note", k=10, ann=True, touch=False, at_time=AT, stats=read)
    assert len(got) == 10 and read["rows_read"] >= 10
    assert all(abs(r.score - truth[r.id]) <= TOL for r in got)
    srv.close()


def _ingest(mem, start: int, n: int, dim: int):
    emb = HashingEmbedder(dim=dim)
    for b0 in range(start, start + n, 1000):
        texts = [f"note {i} about topic {i % 31}" for i in range(b0, b0 + 1000)]
        vecs = emb.embed(texts)
        mem.add_many([{"text": t, "id": f"m{b0 + j}", "embedding": vecs[j],
                       **({"parent": f"m{(b0 + j) % 40}"} if b0 + j >= 40 else {})} for j, t in enumerate(texts)])


def _rss() -> int:
    """Resident memory now, after handing freed heap pages back (glibc keeps them otherwise)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
def test_ram_does_not_grow_with_the_store(pg_url):
    """2,000 then 20,000 memories at dim 256 (a mirror holds about 4 KB each): the client's
    RSS stays flat (allocator noise aside), and it keeps no Python object per memory."""
    mem = Memory.open(pg_url, mirror=False, embedder=HashingEmbedder(dim=256))
    _ingest(mem, 0, 2000, 256)
    mem.search("note 5 about topic 5", k=10)
    gc.collect()
    rss0 = _rss()
    _ingest(mem, 2000, 18000, 256)
    assert len(mem) == 20000 and mem.search("note 5 about topic 5", k=10)[0].id == "m5"
    gc.collect()
    grown = _rss() - rss0
    assert grown < 18000 * 1024, grown  # a quarter of what a mirror takes
    tracemalloc.start()
    py0, _ = tracemalloc.get_traced_memory()
    _ingest(mem, 20000, 2000, 256)
    mem.search("note 5 about topic 5", k=10)
    gc.collect()
    py1, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert py1 - py0 < 200_000, py1 - py0  # Python objects: nothing kept per memory
    mem.close()


def test_a_restarted_server_is_reconnected_by_the_next_call(pg_server, pg_url):
    """Writes, reads, searches and touches after a restart each reconnect at their first
    statement and run (nothing of them had run), once each."""
    mem = Memory.open(pg_url, mirror=False, embedder=HashingEmbedder(dim=16))
    mem.add("before the restart", id="a")
    calls = [lambda: mem.add_many([{"text": "during", "id": "b", "parent": "a"}]), lambda: mem.children("a"),
             lambda: mem.search_batch(["before"], k=1), lambda: mem.touch(["b"]), lambda: len(mem)]
    got = []
    for call in calls:
        pg_server.restart()
        got.append(call())
    assert got[1] == ["b"] and [[r.id for r in rs] for rs in got[2]] == [["a"]] and got[4] == 2
    assert sorted(r.id for r in mem) == ["a", "b"] and mem.get("b").access_count == 1
    mem.close()
