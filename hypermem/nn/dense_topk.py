"""The exact top-``k`` of a dense score matrix, with per-query exclusions, in plain tensor ops.

``scores`` ``(B, N)`` (higher is better) -> slots ``(B, k)``: excluded slots (``exclude``
``(B,)`` or ``(B, m)``, ``-1`` entries ignored) are set to ``-inf`` by a scatter, then
``torch.topk``; a slot whose score is ``-inf`` (excluded, or a bias of ``-inf``) comes back as
``-1``, and so do the entries beyond ``N``.  No step reads a tensor's value on the host, so
the function traces under ``torch.compile`` without a graph break; it is what
:meth:`hypermem.nn.HyperbolicMemory.select` runs when compiled (the pruned chunked search of
:func:`hypermem.index.exact_topk` has data-dependent loops) and what the RAG model's cosine
fast path runs (:func:`hypermem.nn.rag_model.cosine_topk`).  Memory ``O(B x N)``.
"""

from __future__ import annotations

import math

import torch


def exclusion_mask(exclude: torch.Tensor, n: int) -> torch.Tensor:
    """Boolean ``(B, n)``, true at the slots of ``exclude`` ``(B, m)`` (``-1`` entries ignored):
    a scatter into ``n + 1`` columns whose last one takes the ``-1`` entries and is dropped."""
    col = torch.where(exclude >= 0, exclude, torch.full_like(exclude, n))
    mask = torch.zeros(exclude.shape[0], n + 1, dtype=torch.bool, device=exclude.device)
    return mask.scatter(1, col, True)[:, :n]  # out of place: a vmapped exclude cannot scatter into an unbatched mask


def dense_topk(scores: torch.Tensor, k: int, exclude: torch.Tensor | None = None) -> torch.Tensor:
    """Top-``k`` slots ``(B, k)`` of ``scores`` ``(B, N)`` (see the module docstring)."""
    B, n = scores.shape
    if exclude is not None:
        ex = exclude.to(device=scores.device, dtype=torch.long).view(B, -1)
        scores = scores.masked_fill(exclusion_mask(ex, n), -math.inf)
    vals, idx = scores.topk(min(int(k), n), dim=1)
    idx = idx.masked_fill(torch.isneginf(vals), -1)
    if idx.shape[1] < k:
        idx = torch.cat([idx, idx.new_full((B, k - idx.shape[1]), -1)], 1)
    return idx
