"""What a read of :class:`~hypermem.nn.HyperbolicMemory` returns, and its softmax."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Readout(NamedTuple):
    """What a read of :class:`HyperbolicMemory` returns (a ``NamedTuple``, so module hooks such
    as ``register_full_backward_hook`` see its tensors).

    ``read`` ``(batch, value_dim)``: the weighted sum of the values; ``weights``
    ``(batch, k)``: the softmax over the read slots (rows sum to 1); ``indices``
    ``(batch, k)``: the slots read (all slots in order for a full read; ``-1`` where fewer
    than ``k`` slots were left after exclusions, with weight 0; a query whose slots were all
    excluded gets all-zero weights and a zero read); ``distances`` ``(batch, k)``;
    ``scores`` ``(batch, k)``: the logits of the softmax (``-inf`` for missing slots).
    """

    read: torch.Tensor
    weights: torch.Tensor
    indices: torch.Tensor
    distances: torch.Tensor
    scores: torch.Tensor


def attention(scores: torch.Tensor) -> torch.Tensor:
    """``softmax`` over each row; a row with no slot left (every score ``-inf``: all
    excluded) gets weight 0 everywhere, so its read is the zero vector, not NaN."""
    empty = torch.isneginf(scores).all(dim=1, keepdim=True)
    return torch.softmax(scores.masked_fill(empty, 0.0), dim=1).masked_fill(empty, 0.0)
