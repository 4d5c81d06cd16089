"""The nn layers against torch's module API: configs sharing a ball, backward hooks on a read,
printing a readout, the InfoNCE losses on an empty batch and under ``torch.compile``."""

from __future__ import annotations

import warnings

import pytest
import torch

from hypermem.nn import (
    BallEncoder,
    BallEncoderConfig,
    HyperbolicMemory,
    HyperbolicMemoryConfig,
    ParentVote,
    Readout,
    hyperbolic_info_nce,
    memory_info_nce,
)

K = 0.3 * torch.eye(4)
Q = torch.tensor([[0.29, 0.01, 0.0, 0.0], [0.0, 0.2, 0.05, 0.0]])


# ---------------------------------------------------------------------------- defect 4
def test_memory_config_refuses_learn_curvature_with_a_fixed_shared_ball():
    enc = BallEncoder(8, 16)
    cfg = HyperbolicMemoryConfig(slots=512, dim=16, value_dim=32, learn_curvature=True)
    with pytest.raises(ValueError, match=r"HyperbolicMemoryConfig\(learn_curvature=True\) cannot build\(ball=...\) "
                                         r"with a ball whose curvature is fixed"):
        cfg.build(ball=enc.ball)
    learned = BallEncoder(8, 16, learn_curvature=True)
    mem = cfg.build(ball=learned.ball)
    assert mem.ball is learned.ball and mem.ball.learnable
    assert HyperbolicMemoryConfig(slots=4, dim=16, value_dim=2).build(ball=enc.ball).ball is enc.ball


def test_encoder_config_refuses_learn_curvature_with_a_fixed_shared_ball():
    mem = HyperbolicMemory(K)
    cfg = BallEncoderConfig(in_features=6, out_features=4, learn_curvature=True)
    with pytest.raises(ValueError, match=r"BallEncoderConfig\(learn_curvature=True\) cannot build\(ball=...\)"):
        cfg.build(ball=mem.ball)
    learned = HyperbolicMemory(K, learn_curvature=True)
    assert cfg.build(ball=learned.ball).ball is learned.ball


def test_memory_config_passes_check_finite():
    assert HyperbolicMemoryConfig(slots=4, dim=3, value_dim=2, check_finite=False).build().check_finite is False


# ---------------------------------------------------------------------------- defect 11
@pytest.mark.parametrize("k", [None, 2])
def test_full_backward_hooks_fire_on_a_read(k):
    mem = HyperbolicMemory(K, torch.eye(4), learn_values=True)
    seen = []
    mem.register_full_backward_hook(lambda module, grad_in, grad_out: seen.append(grad_out))
    q = Q.clone().requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch warned "module output should be a Tensor or a tuple of Tensors"
        out = mem(q, k=k)
        out.read.sum().backward()
    assert len(seen) == 1 and torch.equal(seen[0][0], torch.ones_like(out.read))
    assert isinstance(out, Readout) and isinstance(out, tuple)
    read, weights, indices, distances, scores = out
    assert read is out.read and indices is out.indices and out._fields[-1] == "scores"
    assert weights.shape == distances.shape == scores.shape


def test_printing_a_parent_vote_warns_nothing():
    vote = ParentVote(torch.tensor([-1, 0, 0]), own_bias=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = repr(vote)
    assert "own_bias=0.5" in text and "vote_bias=0" in text


# ---------------------------------------------------------------------------- defect 12
def test_both_info_nce_losses_refuse_an_empty_batch_the_same_way():
    mem = HyperbolicMemory(K)
    q, t = K[:0], torch.tensor([], dtype=torch.long)
    for loss in (lambda r: hyperbolic_info_nce(q, K, t, reduction=r), lambda r: memory_info_nce(mem, q, t, reduction=r)):
        with pytest.raises(ValueError, match="empty batch"):
            loss("mean")
        assert float(loss("sum").detach()) == 0.0
        assert loss("none").shape == (0,)


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_memory_info_nce_compiles_without_a_graph_break():
    mem = HyperbolicMemory(0.3 * torch.eye(6), metric="hyperbolic")
    q = torch.tensor([[0.29, 0.01, 0.0, 0.0, 0.0, 0.0], [0.0, 0.2, 0.05, 0.0, 0.0, 0.0]])
    t = torch.tensor([0, 1])
    compiled = torch.compile(lambda q, t: memory_info_nce(mem, q, t), backend="eager", fullgraph=True)
    assert torch.allclose(compiled(q, t), memory_info_nce(mem, q, t))
