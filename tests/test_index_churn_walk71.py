"""Walk 71: the index on the search path after writes.

An exact index (``build_index()``'s default) is never searched (the exact scan gives its
answer), so a write must not make the next search rebuild it; a faiss index follows removals
and moved points with tombstones instead of rebuilding its graphs at every such search.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest
import torch

from hypermem import HalfLife, Memory
from hypermem.embed import HashingEmbedder
from hypermem.index import MIPSIndex
from hypermem.store import ann_search

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
DIM = 16


def store(n=600):
    mem = Memory(embedder=HashingEmbedder(dim=DIM), decay=HalfLife(hours=72), clock=lambda: NOW)
    g = torch.Generator().manual_seed(0)
    mem.add_many({"text": f"note {i} about topic {i % 13}", "id": f"m{i}", "t": NOW - timedelta(hours=i % 500),
                  "embedding": torch.randn(DIM, generator=g, dtype=torch.float64)} for i in range(n))
    return mem


def ids(results):
    return [[r.record.id for r in res] for res in results]


def count_calls(monkeypatch, cls, name):
    calls, original = [], getattr(cls, name)

    def counted(self, *args, **kwargs):
        calls.append(len(args[0]) if args else None)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(cls, name, counted)
    return calls


def test_searches_after_writes_do_not_rebuild_an_exact_index(monkeypatch):
    mem = store()
    index = mem.build_index()
    assert index.exact and len(index) == 600
    builds = count_calls(monkeypatch, MIPSIndex, "build")
    qs = list(mem.points[:4] * 0.9)
    for i in range(3):
        mem.add(f"another note about topic {i}")
        mem.remove(f"m{i}")
        mem.update(f"m{i + 10}", text=f"new words {i}")
        mem.search("topic 5", k=10, touch=False)                        # hybrid text query
        mem.search(qs[0], k=10, touch=False)                            # use_index=None: the index is on
        got = mem.search_batch(qs, k=10, touch=False, use_index=True)
        assert ids(got) == ids(mem.search_batch(qs, k=10, touch=False, use_index=False))
    assert builds == []                                                 # never rebuilt by a search
    assert ids(mem.search_batch(qs, k=10, touch=False, use_index=True)) == \
        ids(mem.search_batch(qs, k=10, touch=False, use_index=False))
    assert builds == []
    assert mem.searcher.index is index and len(index) == mem.state.n == 600  # brought up to date when read
    assert builds == [600]
    assert mem.searcher.index is index and builds == [600]             # read again: not rebuilt


def test_search_with_use_index_before_build_index_keeps_the_default_exact_index(monkeypatch):
    mem = store(n=200)
    builds = count_calls(monkeypatch, MIPSIndex, "build")
    q = mem.points[3] * 0.9
    hit = mem.search(q, k=3, touch=False, use_index=True)
    assert builds == [] and hit[0].record.id == "m3"
    index = mem.searcher.index                                          # the default one, built when read
    assert isinstance(index, MIPSIndex) and index.exact and len(index) == 200 and builds == [200]


def test_removals_and_moved_points_leave_tombstones_not_rebuilds(monkeypatch):
    pytest.importorskip("faiss")
    from hypermem.index.bands import BandedDirectionIndex

    mem = store()
    index = mem.build_index("faiss", ef_search=4096, bands=3)           # exact graphs: the answer is exact
    builds = count_calls(monkeypatch, BandedDirectionIndex, "build")
    qs = list(mem.points[:8] * 0.9)
    for i in range(20):
        mem.remove(f"m{i}")
        mem.update(f"m{100 + i}", text=f"moved note {i}")
        mem.add(f"fresh note {i}")
        exact = mem.search_batch(qs, k=10, touch=False, use_index=False)
        approx = mem.search_batch(qs, k=10, touch=False, use_index=True)
        assert ids(approx) == ids(exact)
    assert builds == [] and mem.searcher.index is index
    assert len(index) == mem.state.n and index.labels == mem.state.ids[: mem.state.n]
    assert sum(index.band_size(b) for b in range(index.n_bands)) == mem.state.n
    assert 0.0 < index.tombstone_share <= ann_search.MAX_TOMBSTONE_SHARE
    q = mem.point("m100") * 0.99                                        # a moved point is found where it is now
    assert "m100" in ids([mem.search(q, k=5, touch=False, use_index=True)])[0]
    twin = copy.deepcopy(mem)                                           # tombstones travel with a copy
    assert ids(twin.search_batch(qs, k=10, touch=False, use_index=True)) == ids(exact)


def test_the_graphs_are_rebuilt_once_the_tombstones_pass_their_share(monkeypatch):
    pytest.importorskip("faiss")
    from hypermem.index.bands import BandedDirectionIndex

    mem = store(n=400)
    index = mem.build_index("faiss", ef_search=4096)
    builds = count_calls(monkeypatch, BandedDirectionIndex, "build")
    q = mem.points[399] * 0.9
    for i in range(0, 140, 2):                                          # 70 removals: 70 / 400 tombstones
        mem.remove(f"m{i}")
        mem.search(q, k=5, touch=False, use_index=True)
    assert builds == [] and index.tombstone_share == pytest.approx(70 / 400)
    for i in range(1, 61, 2):                                           # 100 of 400: a quarter, kept
        mem.remove(f"m{i}")
        mem.search(q, k=5, touch=False, use_index=True)
    assert builds == [] and index.tombstone_share == 0.25
    mem.remove("m61")                                                   # 101: past a quarter
    mem.search(q, k=5, touch=False, use_index=True)
    assert builds == [299] and index.tombstone_share == 0.0 and len(index) == 299  # rebuilt once
    assert ids([mem.search(q, k=10, touch=False, use_index=True)]) == \
        ids([mem.search(q, k=10, touch=False, use_index=False)])
