"""The embedding column is float32 while every stored embedding is exactly a float32 (what
most text embedders produce) and widens to float64, keeping every value, on the first that
is not: the same points, searches and files as a float64 column, half the bytes."""

from __future__ import annotations

import torch

from hypermem import HashingEmbedder, Memory


def _vectors(n, dim=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=g).to(torch.float32).to(torch.float64)  # exact float32 values


def _items(vecs):
    return [{"text": f"note {i}", "id": f"m{i}", "embedding": v, **({"parent": f"m{i // 3}"} if i else {})}
            for i, v in enumerate(vecs)]


def _pair():
    narrow = Memory(embedder=HashingEmbedder(dim=16))
    wide = Memory(embedder=HashingEmbedder(dim=16))
    wide.state.narrow_embeddings = False
    wide.state.alloc(0)
    return narrow, wide


def test_exact_float32_embeddings_keep_a_float32_column_with_the_same_answers():
    narrow, wide = _pair()
    items = _items(_vectors(200))
    narrow.add_many(items)
    wide.add_many(items)
    assert narrow.state.embedding.dtype == torch.float32 and wide.state.embedding.dtype == torch.float64
    assert torch.equal(narrow.embeddings, wide.embeddings) and narrow.embeddings.dtype == torch.float64
    assert torch.equal(narrow.points, wide.points)
    narrow.link("m7", "m1")
    wide.link("m7", "m1")
    assert torch.equal(narrow.points, wide.points)
    q = ["note 3", "note 17", "something else"]
    for a, b in zip(narrow.search_batch(q, k=5, touch=False), wide.search_batch(q, k=5, touch=False)):
        assert [(r.id, r.score) for r in a] == [(r.id, r.score) for r in b]


def test_a_value_float32_cannot_hold_widens_the_column_and_keeps_the_rest():
    mem, _ = _pair()
    vecs = _vectors(50)
    mem.add_many(_items(vecs))
    before = mem.embeddings.clone()
    odd = vecs[0].clone()
    odd[0] += 1e-12  # not a float32
    mem.add_many([{"text": "odd one", "id": "odd", "embedding": odd}])
    assert mem.state.embedding.dtype == torch.float64
    assert torch.equal(mem.embeddings[:50], before) and torch.equal(mem.embedding("odd"), odd)
    mem2, _ = _pair()
    mem2.add_many(_items(vecs))
    mem2.update("m3", text="hashed text: float64 values")  # the hashing embedder's output is not float32
    assert mem2.state.embedding.dtype == torch.float64
    assert torch.equal(mem2.embedding("m3"), HashingEmbedder(dim=16).embed(["hashed text: float64 values"])[0])


def test_files_and_durable_stores_round_trip_the_exact_values(tmp_path):
    vecs = _vectors(120)
    mem, _ = _pair()
    mem.add_many(_items(vecs))
    mem.save(tmp_path / "m.hmem")
    back = Memory.load(tmp_path / "m.hmem", embedder=HashingEmbedder(dim=16))
    assert back.state.embedding.dtype == torch.float32 and torch.equal(back.embeddings, mem.embeddings)
    assert torch.equal(back.points, mem.points)
    db = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=16))
    db.add_many(_items(vecs))
    again = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=16))
    assert again.state.embedding is None  # the file holds them: a bound store reads them when needed
    assert torch.equal(again.embeddings, mem.embeddings) and torch.equal(again.points, mem.points)
    assert again.state.embedding_column().dtype == torch.float32  # brought back whole (and kept), narrow
    db.add_many([{"text": "from the other client", "id": "late", "embedding": vecs[0] + 1e-12}])  # widens
    again.refresh()
    assert again.state.embedding.dtype == torch.float64 and torch.equal(again.embedding("late"), vecs[0] + 1e-12)
