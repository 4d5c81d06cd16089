r"""Exact top-k of ``score_ij = -g(s_ij, j) + b_j`` with ``s = Q K^T``, in bounded memory.

Every score hypermem ranks by has this shape: a matrix product of query and key vectors,
a distance ``g`` that is a monotone *decreasing* function of the product, and a
per-memory bias ``b`` (``depth_bias * depth + time_coef * log(time_weight)``; ``-inf``
excludes a memory).  For the shell metric ``s`` is the cosine between unit directions
and ``g`` the shell distance (:func:`hypermem.geometry.poincare.shell_distance_from_cosine`);
for the hyperbolic metric ``g`` also depends on the key's norm.

:func:`exact_topk` walks the keys in chunks (memory ``O(B * chunk)``, never ``O(B * N)``)
and keeps a running top-k per query.  When ``g`` does not depend on the key and its
inverse is known, it prunes: with the current k-th best score ``t_q`` and the largest bias
``b_max`` of a chunk, a key can only enter the top-k if
``s_qj >= g^{-1}(b_max - t_q)``, so only the few products above that threshold get the
(costly) distance and bias evaluated.  The answer is exact either way; pruning only
skips work that cannot change it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

DistanceFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``g(s, idx)``: distances for products ``s`` against the keys ``idx`` (a ``(C,)`` range
of a chunk, broadcast over queries, or a ``(B, m)`` gather of candidates)."""

InverseFn = Callable[[torch.Tensor], torch.Tensor]
"""``g^{-1}(y)``: smallest product whose distance is at most ``y`` (per query)."""


def _chunk_rows(batch: int, n: int, budget: int) -> int:
    return int(min(n, max(1024, budget // max(1, batch))))


def exact_topk(queries: torch.Tensor, keys: torch.Tensor, k: int, distance: DistanceFn,
               bias: torch.Tensor | None = None, inverse: InverseFn | None = None,
               chunk_elements: int = 1 << 22) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact top-k of ``-distance(Q K^T) + bias`` over all keys.

    Parameters
    ----------
    queries: ``(B, d)``.
    keys: ``(N, d)`` (same dtype and device).
    k: number of results per query.
    distance: ``g(s, idx)`` mapping products to distances (see :data:`DistanceFn`).
    bias: ``(N,)`` per-key bias; ``-inf`` excludes a key.  ``None`` means zero.
    inverse: ``g^{-1}`` for a key-independent ``g`` (enables pruning); ``None`` disables it.
    chunk_elements: products held at once (``B * chunk``), bounding memory.

    Returns
    -------
    scores ``(B, k)``, indices ``(B, k)`` (int64), distances ``(B, k)``; sorted by
    descending score, ties by ascending index.  Excluded or missing entries have score
    ``-inf`` and index ``-1``.
    """
    if queries.dim() != 2 or keys.dim() != 2 or queries.shape[1] != keys.shape[1]:
        raise ValueError(f"queries (B, d) and keys (N, d) must agree, got {tuple(queries.shape)} "
                         f"and {tuple(keys.shape)}")
    B, N = queries.shape[0], keys.shape[0]
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    dev, dt = queries.device, queries.dtype
    kk = min(k, N)
    best_s = torch.full((B, kk), -math.inf, dtype=dt, device=dev)
    best_i = torch.full((B, kk), -1, dtype=torch.long, device=dev)
    best_d = torch.full((B, kk), math.inf, dtype=dt, device=dev)
    if N == 0 or B == 0:
        return _pad(best_s, best_i, best_d, k)
    chunk = _chunk_rows(B, N, chunk_elements)
    zero = torch.zeros((), dtype=dt, device=dev)
    for start in range(0, N, chunk):
        stop = min(N, start + chunk)
        b = None if bias is None else bias[start:stop]
        bmax = zero if b is None else b.max()
        if b is not None and bool(bmax == -math.inf):
            continue
        sims = queries @ keys[start:stop].T  # (B, C)
        gathered = None
        if inverse is not None and start > 0:
            # A key can only enter if -g(s) + b_max >= t (t: current k-th best score).
            s_min = inverse(bmax - best_s[:, -1])  # (B,)
            m = int((sims >= s_min.unsqueeze(1)).sum(dim=1).max())
            if m == 0:
                continue
            if m * 4 < sims.shape[1]:
                sims, gathered = torch.topk(sims, m, dim=1, sorted=False)
        if gathered is None:
            idx = torch.arange(start, stop, device=dev)
            d = distance(sims, idx)
            sc = -d if b is None else b.unsqueeze(0) - d
            idx = idx.expand(B, -1)
        else:
            idx = gathered + start
            d = distance(sims, idx)
            sc = -d if b is None else b[gathered] - d
        top = min(kk, sc.shape[1])
        sc_top, pos = torch.topk(sc, top, dim=1)
        all_s = torch.cat([best_s, sc_top], dim=1)
        all_i = torch.cat([best_i, torch.gather(idx, 1, pos)], dim=1)
        all_d = torch.cat([best_d, torch.gather(d, 1, pos)], dim=1)
        best_s, pos = torch.topk(all_s, kk, dim=1)
        best_i = torch.gather(all_i, 1, pos)
        best_d = torch.gather(all_d, 1, pos)
    best_s, best_i, best_d = _sort_ties(best_s, best_i, best_d)
    return _pad(best_s, best_i, best_d, k)


def _sort_ties(s: torch.Tensor, i: torch.Tensor, d: torch.Tensor):
    # Order by descending score, then ascending index; missing entries (-1) last.
    big = torch.iinfo(torch.long).max
    key_i = torch.where(i < 0, torch.full_like(i, big), i)
    order = torch.argsort(key_i, dim=1, stable=True)
    s, i, d = (torch.gather(t, 1, order) for t in (s, i, d))
    order = torch.argsort(-s, dim=1, stable=True)
    s, i, d = (torch.gather(t, 1, order) for t in (s, i, d))
    i = torch.where(torch.isinf(s) & (s < 0), torch.full_like(i, -1), i)
    return s, i, d


def _pad(s, i, d, k):
    extra = k - s.shape[1]
    if extra <= 0:
        return s, i, d
    B = s.shape[0]
    return (torch.cat([s, s.new_full((B, extra), -math.inf)], 1),
            torch.cat([i, i.new_full((B, extra), -1)], 1),
            torch.cat([d, d.new_full((B, extra), math.inf)], 1))
