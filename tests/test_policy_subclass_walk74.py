"""A subclass of a built-in decay policy is a custom policy (its ``weight`` may differ): it is
recorded as custom, reloads only when passed again, and the banded index does not prune it
as the monotone built-in; the index's bounds hand the policy ``now`` in seconds."""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from unittest import mock

import numpy as np
import pytest
import torch

from hypermem import HalfLife, Memory
from hypermem.embed import CallableEmbedder
from hypermem.temporal import CustomPolicyError, Product, policy_from_spec, policy_spec, uses_access_counts
from hypermem.temporal.bounds import corner_monotone

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
DAY = 86400.0


@dataclass(frozen=True)
class Squared(HalfLife):
    """Ages count double: the half-life's weight squared."""

    def weight(self, now, times, access_counts, valid_from, valid_until):
        return super().weight(now, times, access_counts, valid_from, valid_until) ** 2


@dataclass(frozen=True)
class Evergreen(HalfLife):
    """A half-life, but memories older than 60 days weigh 1: not monotone in age."""

    def weight(self, now, times, access_counts, valid_from, valid_until):
        w = super().weight(now, times, access_counts, valid_from, valid_until)
        n = now.timestamp() if isinstance(now, datetime) else now
        return torch.where((n - times) / DAY > 60, torch.ones_like(w), w)


def test_a_subclass_is_recorded_as_custom_and_reloads_only_when_passed_again(tmp_path):
    assert policy_spec(Squared(hours=24.0)) == {"type": "Squared", "custom": True}
    assert policy_spec(Product(Squared(24.0)))["policies"] == [{"type": "Squared", "custom": True}]
    with pytest.raises(CustomPolicyError):
        policy_from_spec(policy_spec(Squared(24.0)))
    assert policy_spec(HalfLife(24.0)) == {"type": "half_life", "hours": 24.0}

    now = [T0]
    mem = Memory(decay=Squared(hours=24.0), clock=lambda: now[0], time_coef=1.0)
    mem.add("dogs are loyal", id="old")
    now[0] = T0 + timedelta(hours=24)
    mem.add("dogs bark", id="new")
    before = {r.record.id: r.score for r in mem.search("dogs", k=2, touch=False)}
    mem.save(tmp_path / "s.db")
    with pytest.raises(ValueError, match="custom decay policy 'Squared'"):
        Memory.load(tmp_path / "s.db", clock=lambda: now[0])
    again = Memory.load(tmp_path / "s.db", clock=lambda: now[0], decay=Squared(hours=24.0))
    assert {r.record.id: r.score for r in again.search("dogs", k=2, touch=False)} == pytest.approx(before)

    with Memory.open(tmp_path / "d.db", decay=Squared(hours=24.0), clock=lambda: now[0], time_coef=1.0) as db:
        db.add("x")
    with pytest.raises(ValueError, match="custom decay policy 'Squared'"):
        Memory.open(tmp_path / "d.db", clock=lambda: now[0])
    with pytest.raises(ValueError, match="was created with decay=<a custom policy 'Squared'>"):
        Memory.open(tmp_path / "d.db", clock=lambda: now[0], decay=HalfLife(hours=24.0))
    db = Memory.open(tmp_path / "d.db", clock=lambda: now[0], decay=Squared(hours=24.0))
    assert type(db.decay) is Squared
    db.close()


def test_the_bounds_treat_a_subclass_as_custom():
    assert corner_monotone(HalfLife(24.0)) and corner_monotone(Product(HalfLife(24.0)))
    assert not corner_monotone(Evergreen(24.0)) and not corner_monotone(Product(HalfLife(2.0), Evergreen(24.0)))
    assert not uses_access_counts(HalfLife(24.0))
    assert uses_access_counts(Squared(24.0))  # custom: assumed, unless it says otherwise

    @dataclass(frozen=True)
    class Quiet(Squared):
        uses_access_counts = False

    assert not uses_access_counts(Quiet(24.0))


def _store(decay, n=800, dim=16):
    rng = np.random.default_rng(0)
    table = dict(zip([f"doc {i}" for i in range(n)], rng.standard_normal((n, dim))))

    def embed(texts):
        return np.stack([table[t] if t in table else np.random.default_rng(len(t)).standard_normal(dim)
                         for t in texts])

    now = T0 + timedelta(days=200)
    mem = Memory(embedder=CallableEmbedder(embed, dim), decay=decay, clock=lambda: now, time_coef=1.0, hybrid=0)
    mem.add_many([{"text": f"doc {i}", "t": T0 + timedelta(days=200 * i / n)} for i in range(n)])
    mem.build_index("faiss", bands=4, ef_search=4096)
    return mem


def _exact_and_index(mem, queries):
    exact = [[r.record.id for r in mem.search(q, k=10, use_index=False, touch=False)] for q in queries]
    index = [[r.record.id for r in mem.search(q, k=10, use_index=True, touch=False)] for q in queries]
    return exact, index


def test_the_index_does_not_prune_a_subclass_as_the_monotone_built_in():
    pytest.importorskip("faiss")
    mem = _store(Evergreen(hours=24.0))
    exact, index = _exact_and_index(mem, [f"query {j}" for j in range(6)])
    assert index == exact
    assert any(mem.ids.index(i) < 0.7 * len(mem) for ids in exact for i in ids)  # evergreen rows do rank


def test_the_index_bounds_hand_the_policy_now_in_seconds():
    pytest.importorskip("faiss")
    mem = _store(HalfLife(hours=24.0))
    seen = []
    weight = HalfLife.weight

    def spy(self, now, *args):
        seen.append(type(now))
        return weight(self, now, *args)

    with mock.patch.object(HalfLife, "weight", spy):
        exact, index = _exact_and_index(mem, ["query 1"])
    assert index == exact and seen and set(seen) == {float}


class Boost:
    """Weight 50 (above the protocol's 1) for memories older than 60 days: a custom policy's bug."""

    def __init__(self):
        self.half = HalfLife(hours=24.0)

    def weight(self, now, times, access_counts, valid_from, valid_until):
        w = self.half.weight(now, times, access_counts, valid_from, valid_until)
        return torch.where((now - times) / DAY > 60, torch.full_like(w, 50.0), w)


def test_weights_above_one_are_clamped_with_a_warning():
    from hypermem.temporal import policy_weights

    now = T0.timestamp() + 100 * DAY
    times = torch.tensor([now - 90 * DAY, now - DAY, now], dtype=torch.float64)
    kept = torch.tensor([50.0, 0.5, 1.0], dtype=torch.float64)

    class Kept:
        def weight(self, *args):
            return kept

    with pytest.warns(UserWarning, match=r"decay policy Kept returned weights above 1 \(largest 50\)"):
        w = policy_weights(Kept(), now, times)
    assert w.tolist() == [1.0, 0.5, 1.0] and kept.tolist() == [50.0, 0.5, 1.0]  # the policy's tensor is left
    with pytest.warns(UserWarning, match="a Product with the custom decay policy Boost returned weights above 1"):
        w = policy_weights(Product(HalfLife(24.0 * 365), Boost()), now, times)
    assert float(w[0]) == 1.0
    with mock.patch.object(torch.compiler, "is_compiling", return_value=True):  # traced: clamped, no host read
        assert policy_weights(Kept(), now, times).tolist() == [1.0, 0.5, 1.0]


def test_exact_search_and_the_index_agree_on_weights_above_one():
    pytest.importorskip("faiss")
    with pytest.warns(UserWarning, match="returned weights above 1"):
        mem = _store(Boost())
        exact, index = _exact_and_index(mem, [f"query {j}" for j in range(6)])
        assert max(mem.time_weights().tolist()) == 1.0
    assert index == exact
    assert any(mem.ids.index(i) < 0.7 * len(mem) for ids in exact for i in ids)  # the boosted (old) rows rank
