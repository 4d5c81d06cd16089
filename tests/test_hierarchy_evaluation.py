"""Reconstruction MAP / mean rank against a slow computation; link-prediction thresholds."""

import itertools
import random

import numpy as np
import pytest
import torch

from hypermem.geometry import PoincareBall
from hypermem.hierarchy import Relations, best_threshold, link_prediction, reconstruction
from hypermem.hierarchy.evaluation import f1_at


def slow_reconstruction(X, pairs, dist):
    """Nickel & Kiela's protocol, one query at a time, from the definitions."""
    n = X.shape[0]
    related = {}
    for u, v in pairs:
        related.setdefault(u, set()).add(v)
    aps, ranks = [], []
    for u, rel in related.items():
        d = [float(dist(X[u], X[w])) for w in range(n)]
        others = sorted((w for w in range(n) if w != u), key=lambda w: (d[w], w not in rel))
        hits, precisions = 0, []
        for pos, w in enumerate(others, start=1):
            if w in rel:
                hits += 1
                precisions.append(hits / pos)
        aps.append(sum(precisions) / len(precisions))
        for v in rel:
            ranks.append(1 + sum(1 for w in others if w not in rel and d[w] < d[v]))
    return sum(aps) / len(aps), sum(ranks) / len(ranks)


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_slow_reference(seed, device):
    rng = random.Random(seed)
    n = 40
    pairs = sorted({(rng.randrange(n), rng.randrange(n)) for _ in range(150)} - {(i, i) for i in range(n)})
    ball = PoincareBall()
    X = ball.random_points(n, 3, 2.0, seed=seed)
    want_map, want_rank = slow_reconstruction(X, pairs, ball.distance)
    rel = Relations(pairs, nodes=list(range(n)))
    got = reconstruction(X.to(device), rel, ball, chunk_size=7)
    assert got.map == pytest.approx(want_map, abs=1e-12)
    assert got.mean_rank == pytest.approx(want_rank, abs=1e-12)
    assert got.n_pairs == len(pairs)
    # the same through a mapping of labelled points and a broadcasting callable
    pts = {i: X[i] for i in range(n)}
    again = reconstruction(pts, [(u, v) for u, v in pairs], ball.distance, per_query=True)
    assert again.map == pytest.approx(want_map, abs=1e-12)
    assert again.per_query["ap"].shape[0] == again.n_queries


def test_perfect_and_euclidean():
    X = torch.tensor([[0.0, 0.0], [0.1, 0.0], [0.0, 0.9]], dtype=torch.float64)
    r = reconstruction(X, Relations([(0, 1)], nodes=[0, 1, 2]), "euclidean")
    assert r.map == 1.0 and r.mean_rank == 1.0
    r = reconstruction(X, Relations([(0, 2)], nodes=[0, 1, 2]), "euclidean")
    assert r.map == 0.5 and r.mean_rank == 2.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="NaN"):
        reconstruction(torch.tensor([[float("nan"), 0.0], [0.1, 0.1]]), Relations([(0, 1)]))
    with pytest.raises(ValueError, match="not in nodes"):
        reconstruction({0: [0.0, 0.0]}, [(0, 1)])


def test_best_threshold_is_optimal():
    g = torch.Generator().manual_seed(0)
    scores = torch.rand(60, generator=g, dtype=torch.float64)
    labels = (scores + 0.3 * torch.rand(60, generator=g, dtype=torch.float64)) < 0.6
    t, f = best_threshold(scores, labels)
    brute = max(f1_at(scores, labels, float(s))[0] for s in scores)
    assert f == pytest.approx(brute) and f1_at(scores, labels, t)[0] == pytest.approx(brute)
    res = link_prediction(scores, labels, scores, labels)
    assert res.f1 == pytest.approx(brute) and res.threshold == pytest.approx(t)


def test_tied_scores_share_a_threshold():
    t, f = best_threshold([0.5, 0.5, 0.9], [True, False, False])
    assert f == pytest.approx(2 / 3) and 0.5 <= t < 0.9
    assert list(itertools.islice([t], 1))


def test_reconstruction_refuses_input_it_cannot_score():
    pts = {"a": np.array([0.1, 0.0]), "b": np.array([0.5, 0.1]), "c": np.array([0.1, 0.6])}
    closure = [("b", "a"), ("c", "a")]
    assert reconstruction(pts, closure).map == 1.0
    with pytest.raises(ValueError, match="no pairs"):
        reconstruction(pts, [])
    with pytest.raises(ValueError, match="no pairs"):
        reconstruction(torch.zeros(0, 2), [])
    for bad in ([1.5, 0.0], [1.0, 0.0], [0.6, 0.8]):  # outside, on the boundary (twice)
        with pytest.raises(ValueError, match="not inside the Poincaré ball.*'b'"):
            reconstruction({**pts, "b": np.array(bad)}, closure)
    with pytest.raises(ValueError, match="not inside"):
        reconstruction({**pts, "b": np.array([0.6, 0.0])}, closure, PoincareBall(4.0))  # radius 0.5
    assert reconstruction({**pts, "b": np.array([1.5, 0.0])}, closure, "euclidean").n_pairs == 2
    for bad in (np.array([0.1, 0.0, 0.0]), np.array([[0.1, 0.0]]), np.array(0.1)):
        with pytest.raises(ValueError, match="one dimension.*'b'"):
            reconstruction({**pts, "b": bad}, closure)


def test_reconstruction_takes_a_numpy_distance_callable():
    import poincare_memory

    ref = poincare_memory.PoincareBall()
    g = np.random.default_rng(0)
    pts = {i: g.normal(size=3) * 0.2 for i in range(12)}
    closure = [(i, i // 2) for i in range(1, 12)]
    ours = reconstruction(pts, closure)
    theirs = reconstruction(pts, closure, ref.distance)  # returns NumPy arrays
    assert theirs.map == pytest.approx(ours.map) and theirs.mean_rank == pytest.approx(ours.mean_rank)
    assert reconstruction(pts, closure, lambda x, y: np.linalg.norm(np.asarray(x) - np.asarray(y), axis=-1)).map \
        == pytest.approx(reconstruction(pts, closure, "euclidean").map)
