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
``b_max`` of a chunk, a key can only enter the top-k if ``s_qj >= g^{-1}(b_max - t_q)``.
Each chunk then costs one matrix product and one partial sort of the products (the
``2k + 8`` largest per query, as a heap would keep); only those get the (costly) distance
and bias evaluated, and when more than that many could pass the threshold, the chunk
falls back to an exact count.  The answer is exact either way; pruning only
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
            # A key can only enter if -g(s) + b_max >= t (t: current k-th best score), i.e.
            # s >= s_min.  Take the few largest products per query (one partial sort, like a
            # heap) and check that nothing beyond them can pass; otherwise count exactly.
            s_min = inverse(bmax - best_s[:, -1])  # (B,)
            width = sims.shape[1]
            m = min(width, 2 * kk + 8)
            vals, pos = torch.topk(sims, m, dim=1, sorted=False)
            if m < width and bool((vals.min(dim=1).values >= s_min).any()):
                m = int((sims >= s_min.unsqueeze(1)).sum(dim=1).max())
                vals, pos = torch.topk(sims, m, dim=1, sorted=False) if m * 4 < width else (None, None)
            elif not bool((vals.max(dim=1).values >= s_min).any()):
                continue  # no key of this chunk can enter any query's top-k
            if vals is not None:
                sims, gathered = vals, pos
        if gathered is None:
            idx = torch.arange(start, stop, device=dev)
            d = distance(sims, idx)
            sc = -d if b is None else b.unsqueeze(0) - d
            idx = idx.expand(B, -1)
        else:
            idx = gathered + start
            d = distance(sims, idx)
            sc = -d if b is None else b[gathered] - d
        sc_top, pos = _top_first(sc, min(kk, sc.shape[1]))
        all_s = torch.cat([best_s, sc_top], dim=1)
        all_i = torch.cat([best_i, torch.gather(idx, 1, pos)], dim=1)
        all_d = torch.cat([best_d, torch.gather(d, 1, pos)], dim=1)
        # Earlier chunks hold smaller indices and come first: a stable sort keeps ties in
        # index order.
        best_s, pos = torch.sort(all_s, dim=1, descending=True, stable=True)
        best_s, pos = best_s[:, :kk], pos[:, :kk]
        best_i = torch.gather(all_i, 1, pos)
        best_d = torch.gather(all_d, 1, pos)
    best_s, best_i, best_d = _sort_ties(best_s, best_i, best_d)
    return _pad(best_s, best_i, best_d, k)


def _top_first(sc: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``top`` largest per row, ties broken by position (the lower column wins)."""
    if sc.shape[1] <= 4 * top + 64:
        vals, pos = torch.sort(sc, dim=1, descending=True, stable=True)
        return vals[:, :top], pos[:, :top]
    vals, pos = torch.topk(sc, top, dim=1)
    # Only an exact tie at the cut can make topk's choice differ from the stable order.
    if bool(((sc >= vals[:, -1:]).sum(dim=1) > top).any()):
        vals, pos = torch.sort(sc, dim=1, descending=True, stable=True)
        return vals[:, :top], pos[:, :top]
    return vals, pos


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
