"""Walk 70 of hypermem.nn: an inference-mode read before a sparse key refresh, a write under
inference_mode before an in-place update, entailment_cone_loss on points outside the ball,
and LatentRetrievalReader / CosineKeys on an empty batch, a k above the slots and NaN queries."""

import pytest
import torch

from hypermem.geometry import poincare as P
from hypermem.nn import (
    CosineKeys,
    HyperbolicMemory,
    LatentRetrievalReader,
    PairReader,
    entailment_cone_loss,
    poincare_ranking_loss,
)


def _memory():
    return HyperbolicMemory(0.3 * torch.eye(4), torch.eye(4))


def _sparse_step(mem, q):
    """A training read, backward, and a plain step on the rows read; returns those rows."""
    out = mem(q, k=2)
    out.read.sum().backward()
    rows = out.indices.reshape(-1).unique()
    with torch.no_grad():
        mem.keys[rows] -= 1e-2 * mem.keys.grad[rows]
    mem.keys.grad = None
    return rows


def test_a_read_under_inference_mode_then_a_sparse_refresh_keeps_the_cache_exact():
    mem = _memory()
    q = torch.full((2, 4), 0.1)
    with torch.inference_mode():
        mem(q, k=2)  # a validation read builds the key cache
    rows = _sparse_step(mem, q)
    mem.refresh_key_rows(rows)  # raised "Inplace update to inference tensor outside InferenceMode"
    dirs, radius = mem.key_geometry()  # the refreshed cache, not a recompute
    assert not dirs.is_inference() and not radius.is_inference()
    K = mem.keys.detach()
    assert torch.allclose(dirs, K / K.norm(dim=1, keepdim=True))
    assert torch.allclose(radius, P.distance_to_origin(K, mem.curvature))
    assert torch.equal(mem(q, k=2).indices, _memory_like(mem)(q, k=2).indices)
    with torch.inference_mode():  # and again: a refresh under inference_mode of a normal cache
        mem(q, k=2)
        mem.refresh_key_rows(rows)


def _memory_like(mem):
    return HyperbolicMemory(mem.keys.detach().clone(), mem.values.clone())


def test_a_write_under_inference_mode_leaves_buffers_an_update_can_change():
    mem = HyperbolicMemory(0.3 * torch.eye(4), torch.eye(4), depth=torch.ones(4), timestamps=torch.zeros(4))
    with torch.inference_mode():
        mem.append(0.2 * torch.ones(1, 4), torch.ones(1, 4), depth=torch.ones(1), timestamps=torch.zeros(1))
    assert not any(getattr(mem, n).is_inference() for n in ("keys", "values", "depth", "timestamps"))
    mem.update([4], values=torch.zeros(1, 4), depth=torch.tensor([2.0]), timestamps=torch.ones(1))
    assert mem.depth[4] == 2.0 and mem.timestamps[4] == 1.0 and mem.values[4].abs().sum() == 0


def test_the_cone_loss_refuses_points_outside_the_ball_and_nan_by_name():
    v = torch.tensor([[0.0, 0.5]])
    u = torch.tensor([[1.05, 0.0]], requires_grad=True)  # read as "solved" (loss 0, zero gradient) before
    with pytest.raises(ValueError, match=r"general row #0 is not inside the Poincaré ball"):
        entailment_cone_loss(u, v)
    with pytest.raises(ValueError, match=r"specific row #0 has NaN coordinates"):
        entailment_cone_loss(v, torch.tensor([[float("nan"), 0.1]]))
    ok = torch.tensor([[0.3, 0.0], [0.0, 0.2]])
    with pytest.raises(ValueError, match=r"neg_specific row #1 has inf coordinates"):
        entailment_cone_loss(ok, ok, ok, torch.tensor([[0.1, 0.0], [float("inf"), 0.0]]))
    with pytest.raises(ValueError, match=r"specific row #0 is not inside the Poincaré ball of curvature 4"):
        entailment_cone_loss(ok, torch.tensor([[0.6, 0.0], [0.0, 0.1]]), ball=4.0)
    # the same check, worded as the ranking loss words it
    with pytest.raises(ValueError, match=r"u row #0 is not inside the Poincaré ball"):
        poincare_ranking_loss(u.detach(), v, v.unsqueeze(1))
    loss = entailment_cone_loss(torch.tensor([[0.5, 0.0]], requires_grad=True), v)
    assert torch.isfinite(loss) and loss > 0


def test_the_latent_reader_loss_refuses_an_empty_batch_like_the_losses():
    mem = _memory()
    model = LatentRetrievalReader(mem, PairReader(4, 4, n_classes=3), k=2)
    x, y = torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)
    with pytest.raises(ValueError, match=r"LatentRetrievalReader.loss got an empty batch"):
        model.loss(x, x, y)
    assert model.loss(x, x, y, reduction="sum").item() == 0.0
    q = torch.full((3, 4), 0.1)
    labels = torch.tensor([0, 1, 2])
    per_row = model.loss(q, q, labels, reduction="none")
    assert per_row.shape == (3,) and torch.allclose(per_row.mean(), model.loss(q, q, labels))


def test_cosine_keys_refuse_a_k_above_the_slots_with_the_memory_s_words():
    keys = CosineKeys(torch.eye(4), values=torch.eye(4))
    q = torch.randn(1, 4)
    with pytest.raises(ValueError) as hyp:
        _memory().select(0.1 * q.clamp(-1, 1), 6)
    with pytest.raises(ValueError) as cos:
        keys.select(q, 6)  # padded with -1 before
    assert str(cos.value) == str(hyp.value)
    assert keys.select(q, 4).shape == (1, 4)


def test_a_nan_query_to_a_cosine_keys_reader_is_named():
    keys = CosineKeys(torch.eye(4), values=torch.eye(4))
    model = LatentRetrievalReader(keys, PairReader(4, 4, n_classes=3), k=2)
    q = torch.tensor([[0.1, 0.0, 0.0, 0.0], [float("nan"), 0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match=r"query #1 has NaN coordinates"):
        model(q, torch.zeros(2, 4))  # NaN log-probs before
    with pytest.raises(ValueError, match=r"query #1 has NaN coordinates"):
        model(q, torch.zeros(2, 4), indices=torch.tensor([[0, 1], [0, 1]]))  # given slots: score_slots checks
    assert torch.isfinite(model(q[:1], torch.zeros(1, 4)).log_probs).all()
