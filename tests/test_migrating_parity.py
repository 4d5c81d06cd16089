"""What docs/migrating.md promises about ``sarkar_layout``, ``fit_poincare_embeddings`` and
``disk_coordinates`` against poincare-memory 0.1.4: pinned on hypermem alone, and compared
with the reference where it is installed (those tests skip without it)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

import hypermem as h
from hypermem.geometry import poincare as P
from hypermem.viz.export import disk_coordinates

EXAMPLE = [("r", "a"), ("r", "b"), ("r", "c"), ("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("b", "b2")]
TOY = {"r": ["a", "b", "c"], "a": ["a1", "a2", "a3"], "b": ["b1", "b2"], "c": ["c1"], "a1": ["x", "y"]}


def _random_tree(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(f"n{rng.randrange(i)}", f"n{i}") for i in range(1, n)]


def _angle(v: torch.Tensor) -> float:
    return math.atan2(float(v[1]), float(v[0]))


def test_2d_children_counter_clockwise_from_the_parent():
    """In the frame of ``a`` (``(-a) ⊕ y``), child ``j`` of 3 sits at ``angle(parent) + 2 pi j / 4``."""
    lay = h.sarkar_layout(EXAMPLE, dim=2, tau=1.0)
    x = lay["a"].reshape(1, 2)
    seen = lambda node: P.mobius_add(-x, lay[node].reshape(1, 2), 1.0)[0]  # noqa: E731
    base = _angle(seen("r"))
    for j, kid in enumerate(["a1", "a2", "a3"], start=1):
        turn = (_angle(seen(kid)) - base) % (2 * math.pi)
        assert turn == pytest.approx(2 * math.pi * j / 4, abs=1e-9)
        assert float(seen(kid).norm()) == pytest.approx(math.tanh(0.5), abs=1e-12)


def test_2d_issue_example_points():
    lay = h.sarkar_layout(EXAMPLE, dim=2)
    assert np.asarray(lay["a1"]) == pytest.approx([0.5363, -0.3476], abs=1e-4)
    assert float(h.PoincareBall().distance(lay["a1"], lay["b1"])) == pytest.approx(3.1378, abs=1e-4)


TREES = {
    "example": EXAMPLE,
    "random60": _random_tree(60, 0),
    "random180": _random_tree(180, 3),
    "chain": [(i, i + 1) for i in range(10)],
    "fan": [("r", i) for i in range(50)] + [(0, f"g{j}") for j in range(30)] + [("g0", f"h{j}") for j in range(7)],
    "binary": [(i, 2 * i + 1) for i in range(63)] + [(i, 2 * i + 2) for i in range(63)],
}


@pytest.mark.filterwarnings("ignore:tree depth:RuntimeWarning")  # the reference warns at 0.95 of its radius
@pytest.mark.parametrize("name", sorted(TREES))
def test_2d_layout_matches_reference(name):
    pm = pytest.importorskip("poincare_memory")
    edges = TREES[name]
    lengths = {e: 0.3 + (i % 7) / 5 for i, e in enumerate(edges)}
    for kw in ({"tau": 0.5}, {"tau": 1.0, "seed": 5}, {"tau": 0.8, "edge_length": lengths}):
        ref, ours = pm.sarkar_layout(edges, dim=2, **kw), h.sarkar_layout(edges, dim=2, **kw)
        assert set(ref) == set(ours)
        err = max(float(np.abs(np.asarray(ref[k]) - np.asarray(ours[k])).max()) for k in ref)
        assert err < 1e-9, (name, kw, err)


def test_2d_layout_matches_reference_curvature_and_root():
    pm = pytest.importorskip("poincare_memory")
    edges = _random_tree(100, 1)
    ref = pm.sarkar_layout(edges, ball=pm.PoincareBall(0.5), dim=2, tau=1.0)
    ours = h.sarkar_layout(edges, ball=h.PoincareBall(0.5), dim=2, tau=1.0)
    assert max(float(np.abs(np.asarray(ref[k]) - np.asarray(ours[k])).max()) for k in ref) < 1e-9
    forest = [("r", "a"), ("a", "b"), ("a", "c"), ("s", "t"), ("s", "u")]
    ref, ours = pm.sarkar_layout(forest, dim=2, root="r"), h.sarkar_layout(forest, dim=2, root="r")
    assert set(ref) == set(ours) == {"r", "a", "b", "c"}
    assert max(float(np.abs(np.asarray(ref[k]) - np.asarray(ours[k])).max()) for k in ref) < 1e-12


def test_anchor_related_to_every_node_has_no_negative():
    """hypermem never draws a related node as a negative: the root of a star, related to
    every node, gets none, so its pairs add exactly 0 to the loss."""
    star = [("r", "a"), ("r", "b"), ("r", "c")]
    _, rep = h.fit_poincare_embeddings(star, dim=2, epochs=3, lr=0.1, negatives=10, burn_in=1, batch_size=64, seed=0)
    assert rep.losses == [0.0, 0.0, 0.0]


def test_reference_values_train_differently_on_a_dense_closure():
    """The documented numbers of docs/migrating.md for the 13-node closure."""
    cl = h.transitive_closure(TOY, "r")
    kw = dict(dim=5, epochs=100, lr=0.1, negatives=10, burn_in=10, batch_size=64, seed=0)
    pts, rep = h.fit_poincare_embeddings(cl, **kw)
    assert 0.9 < rep.losses[0] < 1.3 < math.log(11)
    assert rep.losses[-1] < 0.1
    assert h.reconstruction(pts, cl).map == 1.0
    assert 0.9 < max(float(v.norm()) for v in pts.values()) < 1.0
    pm = pytest.importorskip("poincare_memory")
    _, ref = pm.fit_poincare_embeddings(pm.transitive_closure(TOY, "r"), **kw)
    assert ref.losses[0] == pytest.approx(math.log(11), abs=0.01)
    assert 2.0 < ref.losses[-1] < 2.4


def test_disk_coordinates_match_reference_up_to_axis_signs():
    pm = pytest.importorskip("poincare_memory")
    from poincare_memory.viz.export import disk_coordinates as ref_disk
    rng = np.random.default_rng(1)
    for d in (3, 5, 10):
        x = rng.normal(size=(30, d))
        x = 0.9 * x / np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(0, 1, (30, 1))
        ref, ours = ref_disk(x, pm.PoincareBall()), np.asarray(disk_coordinates(x, h.PoincareBall()))
        signs = np.sign((ref * ours).sum(0))
        assert np.abs(ref - ours * signs).max() < 1e-9
    one = np.array([[0.1, 0.2, 0.3]])
    assert np.abs(ref_disk(one, pm.PoincareBall())) == pytest.approx(np.abs(np.asarray(disk_coordinates(one, 1.0))))


def test_2d_spread_directions_follow_avoid_counter_clockwise():
    from hypermem.hierarchy.directions import spread_directions
    got = spread_directions(3, 2, avoid=(0.3, 0.4))   # avoid at 53.13 deg; slots at +90, +180, +270
    want = torch.tensor([[-0.8, 0.6], [-0.6, -0.8], [0.8, -0.6]], dtype=torch.float64)
    assert torch.allclose(got, want, atol=1e-12)
