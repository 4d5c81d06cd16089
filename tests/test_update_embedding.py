"""``update(id, embedding=...)``: a precomputed vector re-places a memory and its subtree, as
``add_many``'s ``embedding`` places a new one, in the in-process store, a SQLite-bound store and the
mirror-free PostgreSQL client."""
import math

import pytest
import torch

from hypermem import Memory
from hypermem.embed import HashingEmbedder

DIM = 16


def _vec(seed: int) -> list[float]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(DIM, generator=g, dtype=torch.float64).tolist()


def _filled(mem) -> None:
    mem.add_many([{"id": "a", "text": "animals", "embedding": _vec(1)},
                  {"id": "b", "text": "dogs", "parent": "a", "embedding": _vec(2)}])


def _direction(mem, id: str) -> torch.Tensor:
    p = torch.as_tensor(mem.point(id), dtype=torch.float64)
    return p / p.norm()


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    if request.param == "memory":
        mem = Memory(embedder=HashingEmbedder(dim=DIM))
    else:
        mem = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=DIM))
    _filled(mem)
    yield mem
    if request.param == "sqlite":
        mem.close()


def test_embedding_alone_moves_the_memory_and_its_subtree_and_keeps_the_text(store):
    child_before = _direction(store, "b")
    store.update("a", embedding=_vec(7))
    assert store.get("a").text == "animals"
    want = torch.tensor(_vec(7), dtype=torch.float64)
    assert torch.allclose(_direction(store, "a"), want / want.norm(), atol=1e-6)
    assert torch.allclose(torch.as_tensor(store.embedding("a"), dtype=torch.float64), want, atol=1e-5)
    # the child inherits part of its parent's direction, so it moves with it
    assert not torch.allclose(_direction(store, "b"), child_before, atol=1e-6)


def test_text_and_embedding_together_take_the_given_vector(store):
    store.update("b", text="wolves", embedding=_vec(9))
    assert store.get("b").text == "wolves"
    want = torch.tensor(_vec(9), dtype=torch.float64)
    assert torch.allclose(torch.as_tensor(store.embedding("b"), dtype=torch.float64), want, atol=1e-5)


@pytest.mark.parametrize("bad, error, match", [
    ([1.0] * (DIM - 1), ValueError, r"embedding must have shape \(16,\)"),
    ([math.nan] + [1.0] * (DIM - 1), ValueError, "non-finite"),
    ([0.0] * DIM, ValueError, "all zeros"),
    ("not a vector", TypeError, "embedding must be a vector of 16 numbers"),
])
def test_a_bad_embedding_is_refused_and_nothing_changes(store, bad, error, match):
    before = torch.as_tensor(store.point("a"), dtype=torch.float64).clone()
    with pytest.raises(error, match=match):
        store.update("a", text="changed", embedding=bad)
    assert store.get("a").text == "animals"
    assert torch.equal(torch.as_tensor(store.point("a"), dtype=torch.float64), before)


def test_add_many_names_a_bad_embedding_as_before():
    mem = Memory(embedder=HashingEmbedder(dim=DIM))
    with pytest.raises(ValueError, match=r"item #1: embedding must have shape \(16,\), got \(3,\)"):
        mem.add_many([{"text": "x"}, {"text": "y", "embedding": [1.0, 2.0, 3.0]}])
    assert len(mem) == 0


def test_a_sqlite_store_keeps_the_new_embedding_after_reopening(tmp_path):
    path = tmp_path / "m.db"
    with Memory.open(path, embedder=HashingEmbedder(dim=DIM)) as mem:
        _filled(mem)
        mem.update("a", embedding=_vec(5))
        point_a, point_b = mem.point("a"), mem.point("b")
    with Memory.open(path, embedder=HashingEmbedder(dim=DIM)) as back:
        assert back.get("a").text == "animals"
        assert torch.allclose(torch.as_tensor(back.point("a")), torch.as_tensor(point_a), atol=1e-6)
        assert torch.allclose(torch.as_tensor(back.point("b")), torch.as_tensor(point_b), atol=1e-6)


def test_the_mirror_free_client_takes_an_embedding_as_the_store_does(pg_url, tmp_path):
    lean = Memory.open(pg_url, embedder=HashingEmbedder(dim=DIM), mirror=False)
    local = Memory(embedder=HashingEmbedder(dim=DIM))
    try:
        for mem in (lean, local):
            _filled(mem)
            mem.update("a", embedding=_vec(11))
        assert lean.get("a").text == "animals"
        for id in ("a", "b"):
            assert torch.allclose(torch.as_tensor(lean.point(id), dtype=torch.float64),
                                  torch.as_tensor(local.point(id), dtype=torch.float64), atol=1e-5)
        with pytest.raises(ValueError, match="non-finite"):
            lean.update("b", embedding=[math.inf] * DIM)
    finally:
        lean.close()


def test_a_zero_embedding_alone_names_no_text_it_was_not_given():
    mem = Memory(embedder=HashingEmbedder(dim=DIM))
    mem.add("dogs are loyal", id="a")
    with pytest.raises(ValueError, match=r"^update\('a'\): its embedding is all zeros") as err:
        mem.update("a", embedding=[0.0] * DIM)
    assert "text ''" not in str(err.value)
