"""RowRiemannianAdam: geoopt's SparseRiemannianAdam update on the rows a sparse gradient touches."""

from __future__ import annotations

import geoopt
import pytest
import torch
import torch.nn.functional as F

from hypermem.geometry import poincare as P
from hypermem.nn import HyperbolicMemory, RowRiemannianAdam
from hypermem.nn.row_adam import moved_rows


def keys_pair(n=40, d=6, seed=0):
    """Two copies of the same trainable ball keys (a geoopt ManifoldParameter)."""
    g = torch.Generator().manual_seed(seed)
    x = P.project(0.6 * torch.randn(n, d, generator=g, dtype=torch.float64) / d**0.5)
    make = lambda: HyperbolicMemory(x.clone(), learn_keys=True).keys  # noqa: E731
    return make(), make()


def sparse_loss(keys, idx, w):
    return (F.embedding(idx, keys, sparse=True) * w).sum() + (F.embedding(idx, keys, sparse=True) ** 2).sum()


@pytest.mark.parametrize("duplicates", [False, True])
def test_the_update_is_geoopts_sparse_riemannian_adam(duplicates):
    a, b = keys_pair()
    assert isinstance(a, geoopt.ManifoldParameter)
    ours = RowRiemannianAdam([a], lr=0.05)
    ref = geoopt.optim.SparseRiemannianAdam([b], lr=0.05)
    g = torch.Generator().manual_seed(1)
    for step in range(6):
        n = 25 if duplicates else 12
        idx = torch.randint(0, 40, (n,), generator=g) if duplicates else torch.randperm(40, generator=g)[:n]
        w = torch.randn(n, 6, generator=g, dtype=torch.float64)
        for p, opt in ((a, ours), (b, ref)):
            opt.zero_grad()
            sparse_loss(p, idx, w).backward()
            opt.step()
        # distinct rows: the same numbers bit for bit; repeated rows: the duplicates are
        # summed in another order, so equal to rounding
        if duplicates:
            assert torch.allclose(a, b, rtol=0, atol=1e-12)
        else:
            assert torch.equal(a, b)
        for name in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(ours.state[a][name], ref.state[b][name], rtol=0, atol=1e-12)
        assert ours.state[a]["step"] == ref.state[b]["step"] == step + 1


def test_only_touched_rows_move_and_the_moved_rows_are_reported():
    a, _ = keys_pair()
    before = a.detach().clone()
    opt = RowRiemannianAdam([a], lr=0.1)
    idx = torch.tensor([3, 7, 7, 30])
    sparse_loss(a, idx, torch.ones(4, 6, dtype=torch.float64)).backward()
    assert moved_rows(a.grad).tolist() == [3, 7, 30]
    opt.step()
    moved = (a.detach() != before).any(1).nonzero().squeeze(1)
    assert moved.tolist() == [3, 7, 30]
    assert a.grad.is_coalesced() and moved_rows(a.grad).tolist() == [3, 7, 30]
    assert bool(P.is_inside(a.detach()).all())  # the retraction keeps the rows in the ball
    untouched = torch.ones(40, dtype=torch.bool)
    untouched[[3, 7, 30]] = False
    assert not bool(opt.state[a]["exp_avg"][untouched].any())


def test_dense_gradients_and_non_matrices_are_refused():
    a, _ = keys_pair()
    opt = RowRiemannianAdam([a])
    a.sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()
    with pytest.raises(ValueError, match="matrix"):
        RowRiemannianAdam([torch.nn.Parameter(torch.zeros(3))])
    assert moved_rows(None) is None and moved_rows(a.grad) is None
