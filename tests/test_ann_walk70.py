"""Walk 70: a band whose graph stops at MAX_CANDIDATES before its bias bound is met is
finished exactly, so fresh memories under a strong time term are never cut from the answer."""

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import torch

from hypermem import HalfLife, Memory
from hypermem.embed import HashingEmbedder
from hypermem.store import ann_search
from hypermem.store import search as search_module

pytest.importorskip("faiss")

NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
N, DIM, FRESH = 20_000, 32, 5


def clock():
    return NOW


def ids(results):
    return [[r.record.id for r in res] for res in results]


def fresh_store():
    """History 60..30 days old in two bands, then FRESH memories added now: the exact search
    puts every fresh memory in every top-10 (weight 1 against about 2**-10)."""
    g = np.random.default_rng(7)
    X = g.standard_normal((N + FRESH, DIM)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    mem = Memory(embedder=HashingEmbedder(dim=DIM), decay=HalfLife(hours=72), clock=clock, time_coef=1.0)
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "embedding": X[i],
                   "t": NOW - timedelta(days=60 - 30 * i / N)} for i in range(N)])
    mem.build_index("faiss", bands=2)
    mem.add_many([{"text": f"fresh{j}", "id": f"fresh{j}", "embedding": X[N + j]} for j in range(FRESH)])
    Q = X[g.integers(0, N, 12)] + g.standard_normal((12, DIM)).astype(np.float32) / np.sqrt(DIM)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return mem, [torch.from_numpy(0.5 * q).double() for q in Q]


def test_capped_band_is_finished_exactly(monkeypatch):
    monkeypatch.setattr(ann_search, "MAX_CANDIDATES", 64)
    mem, qs = fresh_store()
    exact = mem.search_batch(qs, k=10, use_index=False, touch=False)
    assert all(sum(x.startswith("fresh") for x in row) == FRESH for row in ids(exact))
    approx = mem.search_batch(qs, k=10, use_index=True, touch=False, oversample=1)
    assert ids(approx) == ids(exact)
    assert [r.score for a in approx for r in a] == pytest.approx([r.score for e in exact for r in e], abs=1e-9)
    one = mem.search(qs[0], k=10, use_index=True, touch=False, oversample=1)
    assert ids([one]) == ids(exact[:1])
    assert mem.index_recall(queries=qs, k=10) == 1.0


def test_search_batch_is_exact_unless_use_index_is_asked(monkeypatch):
    """With a faiss index built, search_batch runs the exact batch (one graph search per query
    is slower); use_index=True still goes through the graphs, and single search() too."""
    mem, qs = fresh_store()
    calls = []
    real = search_module.rank_approx

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(search_module, "rank_approx", counted)
    exact = mem.search_batch(qs, k=10, use_index=False, touch=False)
    assert ids(mem.search_batch(qs, k=10, touch=False)) == ids(exact) and not calls
    assert ids(mem.search_batch(qs, k=10, touch=False, use_index=None)) == ids(exact) and not calls
    mem.search_batch(qs, k=10, touch=False, use_index=True)
    assert len(calls) == 1
    mem.search(qs[0], k=10, touch=False)
    assert len(calls) == 2
