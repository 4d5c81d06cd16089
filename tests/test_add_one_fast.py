"""One ``add()`` takes one-row paths (no generation bookkeeping, no ``np.unique``, a cached
``max_radius``) that give the batch paths' values bit for bit."""

from __future__ import annotations

import warnings
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import torch

from hypermem import HashingEmbedder, Memory
from hypermem.geometry import numerics
from hypermem.store import placement
from hypermem.store.placement import Placer, mix, unit

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
TEXTS = [f"note {i} about topic {i % 7} and thing {i % 5}" for i in range(40)]


def _items(parents: bool = True):
    """Items with parents (stored or earlier; none with ``parents=False``), times, metadata and
    validity windows."""
    out = []
    for i, text in enumerate(TEXTS):
        it = {"text": text, "id": f"m{i}", "t": T0 + timedelta(hours=i)}
        if parents and i >= 2 and i % 3:
            it["parent"] = f"m{(i * 5) % i}"
        if i % 4 == 0:
            it["meta"] = {"k": i}
        if i % 6 == 0:
            it["valid_from"], it["valid_until"] = T0, T0 + timedelta(days=i + 1)
        out.append(it)
    return out


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int64 if t.dtype == torch.float64 else torch.int32)


@pytest.mark.parametrize("settings", [
    {}, {"dtype": torch.float32, "parents": False}, {"cone_constrained": True}, {"cone_constrained": True, "inherit": 0.0, "cone_k": 0.5},
    {"curvature": 0.3, "base_depth": 3.0, "depth_step": 4.0}, {"base_depth": 20.0, "depth_step": 3.0},
])
def test_one_by_one_equals_add_many_bit_for_bit(settings):
    """(A float32 store's children differ: one by one, a parent's direction is read back from
    the float32 column, in a batch it is the float64 value; so its items are roots.)"""
    settings = dict(settings)
    parents = settings.pop("parents", True)
    one, many = (Memory(embedder=HashingEmbedder(dim=32), clock=lambda: T0, **settings) for _ in range(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = [one.add(**it) for it in _items(parents)]
    assert ids == many.add_many(_items(parents))
    for a, b in ((one.state, many.state),):
        n = a.n
        for name in ("direction", "depth", "time", "valid_from", "valid_until", "access"):
            assert torch.equal(_bits(getattr(a, name)[:n]), _bits(getattr(b, name)[:n])), name
        assert torch.equal(_bits(a.embeddings_of()), _bits(b.embeddings_of()))
        assert a.levels == b.levels and a.children == b.children
    assert list(one) == list(many)


def test_a_single_add_skips_the_generation_bookkeeping(monkeypatch):
    """Before: a child's add() went through ``_place_children`` (numpy masks, index tensors)."""
    mem = Memory(embedder=HashingEmbedder(dim=32))
    root = mem.add("animals")
    ref = Memory(embedder=HashingEmbedder(dim=32))
    ref.add_many([{"text": "animals", "id": root}, {"text": "dogs bark", "id": "d", "parent": root}])

    def refuse(*a, **k):
        raise AssertionError("the batch path was taken for one add()")
    monkeypatch.setattr(Placer, "_place_children", refuse)
    mem.add("dogs bark", parent=root, id="d")
    assert torch.equal(_bits(mem.point("d")), _bits(ref.point("d")))


def test_max_radius_is_remembered_and_still_refuses_bad_curvature(monkeypatch):
    """Before: every add() computed ``atanh`` and checked the curvature again."""
    c = 0.123456789
    r = numerics.max_radius(torch.float64, c)
    for bad in (float("nan"), -1.0, 0.0):  # refused each time, never remembered
        for _ in range(2):
            with pytest.raises(ValueError, match="curvature"):
                numerics.max_radius(torch.float64, bad)
    monkeypatch.setattr(numerics.torch, "atanh", lambda *a: pytest.fail("recomputed"))
    assert numerics.max_radius(torch.float64, c) == r


def test_one_text_embeds_without_unique_and_as_in_a_batch(monkeypatch):
    """Before: a single text sorted its token ids with ``np.unique`` in a large vocabulary."""
    texts = ["Dogs bark, dogs run", "naïve café 🙂", "!!!", "a\x00b", "x", "the the the", "\u200b", "ﬁne"]
    batch = HashingEmbedder(dim=16).embed(texts)
    e = HashingEmbedder(dim=16)
    e.embed([" ".join(f"w{i}" for i in range(400))])  # a vocabulary far larger than one text's tokens
    monkeypatch.setattr(np, "unique", lambda *a, **k: pytest.fail("np.unique for one text"))
    for i, t in enumerate(texts):
        assert torch.equal(_bits(e.embed([t])), _bits(batch[i: i + 1])), t


def test_one_row_unit_and_mix_match_the_batch_rows():
    x = torch.tensor([[3.0, 4.0], [1e-200, 0.0], [1e200, 1e200], [0.0, 0.0]], dtype=torch.float64)
    rows = unit(x)
    for i in range(4):
        assert torch.equal(_bits(unit(x[i: i + 1])), _bits(rows[i: i + 1]))
    e = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
    up = torch.tensor([[-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    both = mix(e, up, 0.5)  # row 0 vanishes: the parent's direction
    for i in range(2):
        assert torch.equal(_bits(mix(e[i: i + 1], up[i: i + 1], 0.5)), _bits(both[i: i + 1]))
    assert torch.equal(both[0], up[0])


def test_level_depths_of_one_level_equal_the_tensor_formula():
    mem = Memory(curvature=0.7, base_depth=1.3, depth_step=0.7)
    for lv in (0, 1, 7, 10_000):
        one = placement.level_depths(mem, [lv])
        many = placement.level_depths(mem, [lv, 0])
        assert one.dtype == torch.float64 and torch.equal(_bits(one), _bits(many[:1]))


class _Fixed:
    """An embedder that returns one fixed row for every text."""

    dim = 16

    def __init__(self, value: float):
        self.value = value

    def embed(self, texts):
        return torch.full((len(texts), 16), self.value, dtype=torch.float64)


def test_single_add_errors_are_unchanged():
    with pytest.raises(ValueError, match=r"add\(\) \(text .*the embedder _Fixed gave the zero vector"):
        Memory(embedder=_Fixed(0.0)).add("x")
    with pytest.raises(ValueError, match=r"non-finite values \(NaN or inf\) for text #0"):
        Memory(embedder=_Fixed(float("nan"))).add("x")
    mem = Memory(embedder=HashingEmbedder(dim=16))
    with pytest.raises(KeyError, match="unknown parent id 'nope'"):
        mem.add("z", parent="nope")
    with pytest.raises(ValueError, match="text is blank"):
        mem.add("   ")
    with pytest.raises(ValueError, match="all zeros"):
        mem.add_many([{"text": "y", "embedding": [0.0] * 16}])
    assert len(mem) == 0
