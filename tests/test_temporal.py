import math
from datetime import datetime, timedelta, timezone

import pytest
import torch

from hypermem.retrieval import combine
from hypermem.retrieval.scoring import MIN_WEIGHT as SCORING_MIN_WEIGHT
from hypermem.temporal import (
    MIN_WEIGHT,
    CustomPolicyError,
    Ebbinghaus,
    HalfLife,
    NoDecay,
    PolicySpecError,
    Product,
    ValidityWindow,
    generative_agents_recency,
    policy_from_spec,
    policy_spec,
    policy_weights,
)

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)


def secs(dts):
    return torch.tensor([d.timestamp() for d in dts], dtype=torch.float64)


def test_half_life_and_generative_agents():
    times = [NOW - timedelta(hours=h) for h in (0, 24, 48, -5)]
    w = HalfLife(24).weight(NOW, times, [0] * 4, [None] * 4, [None] * 4)
    torch.testing.assert_close(w, torch.tensor([1.0, 0.5, 0.25, 1.0], dtype=torch.float64))
    ga = generative_agents_recency()
    w = ga.weight(NOW, secs([NOW - timedelta(hours=10)]), [0], [None], [None])
    assert abs(float(w[0]) - 0.995 ** 10) < 1e-12
    very_old = HalfLife(1).weight(NOW, [NOW - timedelta(days=100)], [0], [None], [None])
    assert float(very_old[0]) == MIN_WEIGHT


def test_ebbinghaus_accesses_slow_forgetting():
    t = secs([NOW - timedelta(hours=48)] * 2)
    w = Ebbinghaus(stability_hours=24, boost_per_access=1.0).weight(NOW.timestamp(), t, torch.tensor([0.0, 3.0]),
                                                                       None, None)
    torch.testing.assert_close(w, torch.tensor([math.exp(-2), math.exp(-0.5)], dtype=torch.float64))


def test_validity_window_and_product():
    lo = secs([NOW - timedelta(hours=1), NOW + timedelta(hours=1), NOW - timedelta(hours=3)])
    hi = torch.tensor([math.inf, math.inf, (NOW - timedelta(hours=2)).timestamp()], dtype=torch.float64)
    t = secs([NOW - timedelta(hours=24)] * 3)
    w = ValidityWindow().weight(NOW, t, torch.zeros(3), lo, hi)
    torch.testing.assert_close(w, torch.tensor([1.0, MIN_WEIGHT, MIN_WEIGHT], dtype=torch.float64))
    w2 = Product(HalfLife(24), ValidityWindow(outside_weight=0.5)).weight(NOW, t, torch.zeros(3), lo, hi)
    torch.testing.assert_close(w2, torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64))
    # lists with None bounds work too
    w3 = ValidityWindow().weight(NOW, [NOW], [0], [None], [NOW - timedelta(seconds=1)])
    assert float(w3[0]) == MIN_WEIGHT


def test_vectorised_over_many_records():
    t = torch.linspace(NOW.timestamp() - 1e7, NOW.timestamp(), 100_000, dtype=torch.float64)
    w = HalfLife(100).weight(NOW, t, torch.zeros_like(t), None, None)
    assert w.shape == (100_000,) and torch.all(w[1:] >= w[:-1])


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "24", None])
def test_bad_time_constants(bad):
    with pytest.raises(ValueError):
        HalfLife(bad)
    with pytest.raises(ValueError):
        Ebbinghaus(stability_hours=bad)
    with pytest.raises(ValueError):
        ValidityWindow(outside_weight=bad if bad != 0 else -1)


def test_specs_round_trip():
    for p in [NoDecay(), HalfLife(12.5), Ebbinghaus(10, 0.3), ValidityWindow(0.2),
              Product(HalfLife(3), ValidityWindow())]:
        assert policy_from_spec(policy_spec(p)) == p

    class Custom:
        def weight(self, *a):
            return torch.ones(1)

    spec = policy_spec(Custom())
    with pytest.raises(ValueError, match="not built in"):
        policy_from_spec(spec)


@pytest.mark.parametrize("spec", [
    ["half_life"], "none", 3, {"type": 3}, {"hours": 1}, {"type": "half_life"}, {"type": "half_life", "hours": -1},
    {"type": "half_life", "hours": True}, {"type": "half_life", "hours": 1, "x": 0}, {"type": "none", "hours": 1},
    {"type": "ebbinghaus", "stability_hours": 1}, {"type": "validity", "outside_weight": "0.1"},
    {"type": "product", "policies": []}, {"type": "product", "policies": "half_life"},
    {"type": "product", "policies": [{"type": "half_life", "hours": 0}]},
])
def test_malformed_specs_are_policy_spec_errors(spec):
    with pytest.raises(PolicySpecError):
        policy_from_spec(spec)


def test_nested_products_have_a_depth_limit_and_custom_types_their_own_error():
    spec = {"type": "none"}
    for _ in range(8):
        spec = {"type": "product", "policies": [spec]}
    assert policy_from_spec(spec) is not None
    with pytest.raises(PolicySpecError, match="nested deeper"):
        policy_from_spec({"type": "product", "policies": [spec]})
    with pytest.raises(CustomPolicyError, match="not built in"):
        policy_from_spec({"type": "MyPolicy", "custom": True})
    assert not issubclass(CustomPolicyError, PolicySpecError) and issubclass(PolicySpecError, ValueError)


def test_combine():
    assert SCORING_MIN_WEIGHT == MIN_WEIGHT
    s = combine([1.0, 2.0], time_weights=[1.0, 0.5], depths=[1.0, 3.0], time_coef=2.0, depth_bias=0.1)
    torch.testing.assert_close(s, torch.tensor([-1.0 + 0.1, -2.0 + 2 * math.log(0.5) + 0.3], dtype=torch.float64))
    assert torch.isfinite(combine([0.0], time_weights=[0.0])).all()


def test_policy_weights_fills_missing_columns_and_checks_the_shape():
    times = secs([NOW - timedelta(hours=24), NOW - timedelta(hours=48), NOW + timedelta(hours=1)])
    w = policy_weights(HalfLife(24.0), NOW, times)
    assert w.dtype == torch.float64 and w.shape == (3,)
    torch.testing.assert_close(w, torch.tensor([0.5, 0.25, 1.0], dtype=torch.float64))
    acc = torch.tensor([0.0, 2.0, 0.0], dtype=torch.float64)
    e = Ebbinghaus(24.0, 0.5)
    torch.testing.assert_close(policy_weights(e, NOW.timestamp(), times, acc),
                               e.weight(NOW, times, acc, [None] * 3, [None] * 3))
    inside = policy_weights(ValidityWindow(0.1), NOW, times, None, None, times + 3600.0)
    torch.testing.assert_close(inside, torch.tensor([0.1, 0.1, 1.0], dtype=torch.float64))

    class Scalar:
        def weight(self, now, times, access_counts, valid_from, valid_until):
            return torch.tensor(1.0)

    with pytest.raises(ValueError, match=r"the decay policy returned shape \(\), expected \(3,\)"):
        policy_weights(Scalar(), NOW, times)


def test_search_computes_the_time_term_in_place_only_for_fresh_weights():
    # The exact search turns the built-in policies' weights into the score's time term in
    # their own buffer; a custom policy may hand out a tensor it keeps, which must survive.
    from hypermem import HashingEmbedder, Memory
    from hypermem.retrieval import score_bias
    from hypermem.temporal import fresh_weights

    class Kept:
        def __init__(self):
            self.kept = {}  # one tensor per length, handed out again and again

        def weight(self, now, times, access_counts, valid_from, valid_until):
            key = tuple(times.tolist())
            return self.kept.setdefault(key, torch.exp2((times - float(now)) / (50 * 3600.0)))

    assert fresh_weights(HalfLife(24.0)) and not fresh_weights(Kept())
    kept = Kept()
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    mem = Memory(embedder=HashingEmbedder(dim=32), decay=kept, time_coef=1.0, clock=lambda: start)
    mem.add_many([{"text": f"note {i} about the garden", "t": start - timedelta(hours=i)} for i in range(40)])
    first = mem.search("garden note", k=5, touch=False)
    full = max(kept.kept, key=len)
    assert len(full) == 40 and torch.equal(kept.kept[full], torch.exp2((torch.tensor(full, dtype=torch.float64) - start.timestamp()) / 180000.0))  # the policy's own tensor is untouched
    assert [r.record.id for r in first] == [r.record.id for r in mem.search("garden note", k=5, touch=False)]
    by_id = dict(zip(mem.ids, mem.time_weights().tolist()))
    assert all(r.time_weight == by_id[r.record.id] for r in first)

    half = Memory(embedder=HashingEmbedder(dim=32), decay=HalfLife(10.0), time_coef=1.0, clock=lambda: start)
    half.add_many([{"text": f"note {i} about the garden", "t": start - timedelta(hours=i)} for i in range(40)])
    res = half.search("garden note", k=40, touch=False)
    w = half.time_weights()
    expected = score_bias(w, half.depths, 1.0, half.depth_bias)
    assert torch.equal(w, half.time_weights())  # score_bias without overwrite leaves its input
    for r in res:
        row = half.ids.index(r.record.id)
        assert r.time_weight == float(w[row])
        assert math.isclose(r.score, -r.distance + float(expected[row]), rel_tol=0, abs_tol=1e-12)
    overwritten = w.clone()
    torch.testing.assert_close(score_bias(overwritten, half.depths, 1.0, half.depth_bias, overwrite=True), expected,
                               rtol=0, atol=0)
    assert not torch.equal(overwritten, w)  # its buffer held the time term
