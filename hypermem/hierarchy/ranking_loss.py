r"""The softmax ranking loss of hierarchy embeddings (Nickel & Kiela), and torch-style reductions.

Nickel & Kiela (NeurIPS 2017, eq. 6): for a related pair ``(u, v)`` and negatives
``N(u)`` (nodes not related to ``u``),

``L(u, v) = -log( exp(-d(u, v)) / sum_{v' in {v} ∪ N(u)} exp(-d(u, v')) )``

a softmax cross-entropy whose logits are the negated distances and whose target is the
positive.  Negatives that the sampler could not make valid are masked out (logit
``-inf``), so they neither count in the sum nor get a gradient.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

REDUCTIONS = ("mean", "sum", "none")


def reduce_loss(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    """Per-item losses reduced as torch's losses do: ``"mean"``, ``"sum"`` or ``"none"``."""
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def softmax_ranking_loss(d_pos: torch.Tensor, d_neg: torch.Tensor, mask: torch.Tensor | None = None,
                         reduction: str = "mean") -> torch.Tensor:
    """Nickel & Kiela's loss from distances ``d_pos`` ``(B,)`` and ``d_neg`` ``(B, k)``.

    ``mask`` ``(B, k)`` marks valid negatives.  ``reduction``: ``"mean"``, ``"sum"`` or
    ``"none"`` (per pair).
    """
    if d_neg.dim() != 2 or d_pos.shape != d_neg.shape[:1]:
        raise ValueError(f"need d_pos (B,) and d_neg (B, k), got {tuple(d_pos.shape)} and {tuple(d_neg.shape)}")
    neg_logits = -d_neg
    if mask is not None:
        neg_logits = neg_logits.masked_fill(~mask, float("-inf"))
    logits = torch.cat([-d_pos[:, None], neg_logits], dim=1)
    target = torch.zeros(d_pos.shape[0], dtype=torch.long, device=d_pos.device)
    return F.cross_entropy(logits, target, reduction=reduction)
