r"""Exact float64 top-k from a float32 scan: candidates certified by an error bound, then
re-scored in float64.

A search over ``N`` unit directions at float64 reads ``8 N d`` bytes a query; the same
scan over a float32 copy reads half, and the scan is bound by memory bandwidth.  Its
scores differ from the float64 ones by rounding, so :func:`mirrored_topk` does not trust
them; it uses them only to pick candidates that provably contain the float64 top-k:

1. **Product error.**  With ``u = 2^-24`` and ``gamma_d = d u / (1 - d u)`` (Higham,
   *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 3.5: the error bound of
   a floating-point dot product), rounding a unit query and a unit key to float32 and
   taking their product in float32 gives ``|s32 - s| <= 2u + u^2 + gamma_d (1 + u)^2``;
   the float64 product the re-score computes is within ``gamma_d`` at ``u = 2^-53`` of
   ``s``.  Their sum, plus the rounding of ``s32 + delta``, is ``delta``.
2. **Optimistic scan.**  The float32 scan ranks by ``kappa = b - g(s32 + delta)``
   (:class:`~hypermem.index.scores.Optimistic`); as ``g`` decreases in ``s``,
   ``b - g(s32 + delta) >= b - g(s64)`` for every key, so up to the float32 evaluation of
   ``g`` and ``b`` (at most ``E = 64 u (1 + max|b| + max g)``, many times the few roundings
   it holds) ``kappa + E`` bounds the float64 score from above.  The square-root pole of
   ``g`` at ``s = 1`` (a near self-match) is inside the bound: the shift is applied to
   ``s``, before ``g``.
3. **Certificate.**  The scan keeps its ``K`` best (``K > k``).  Their float64 scores are
   computed exactly as the float64 search would; if the ``K``-th scan score plus ``E`` is
   below the ``k``-th float64 score, no key outside the ``K`` can reach the top-k, and
   the top-k of the ``K`` (ties by index) *is* the float64 top-k.  Otherwise ``K`` grows
   four-fold and the query is scanned again; past ``max_candidates`` it is answered by the
   float64 scan itself.

So the answer is the float64 search's, bit for bit: both re-score their candidates with
:func:`~hypermem.index.topk.pair_products` (one summation order for every pair, wherever
the key sits).  Only key-independent distances (the shell metric)
are supported: their inverse lets the scan prune.
"""

from __future__ import annotations

import math

import torch

from .scores import Optimistic
from .topk import exact_topk, pair_products, scan_topk

__all__ = ["mirrored_topk", "product_error", "MAX_CANDIDATES"]

U32 = 2.0 ** -24
U64 = 2.0 ** -53
MAX_CANDIDATES = 4096
"""Past this many candidates a query that is still not certified is scanned in float64."""


def _gamma(d: int, u: float) -> float:
    return d * u / (1.0 - d * u)


def product_error(dim: int) -> float:
    """``delta``: a bound on ``|s32 - s64|`` for unit vectors of dimension ``dim`` (see the
    module docstring), plus the rounding of ``s32 + delta``."""
    return (2 * U32 + U32 * U32 + _gamma(dim, U32) * (1 + U32) ** 2) * 1.01 + _gamma(dim, U64) + 4 * U32


def mirrored_topk(queries: torch.Tensor, fast_keys: torch.Tensor, exact_keys: torch.Tensor, k: int, distance,
                  bias: torch.Tensor | None = None, rows: torch.Tensor | None = None,
                  max_candidates: int = MAX_CANDIDATES) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r""":func:`~hypermem.index.exact_topk` of the float64 ``queries`` against the float64
    keys, computed from a float32 scan of ``fast_keys`` and a float64 re-score.

    Parameters
    ----------
    queries: ``(B, d)`` float64 unit directions.
    fast_keys: ``(N, d)`` float32 unit directions (the scan's copy of the keys).
    exact_keys: the float64 keys: ``(N, d)``, or with ``rows`` the full column whose row
        ``rows[j]`` is key ``j``.
    distance: a key-independent distance model with ``inverse`` (``ShellDistance``).
    bias: ``(N,)`` float64 per-key bias (``-inf`` excludes a key); None is zero.

    Returns scores, indices (into ``fast_keys``) and distances ``(B, k)``, float64, as
    :func:`~hypermem.index.exact_topk` does.
    """
    B, N = queries.shape[0], fast_keys.shape[0]
    k = int(k)
    dev = queries.device
    out_s = torch.full((B, k), -math.inf, dtype=torch.float64, device=dev)
    out_i = torch.full((B, k), -1, dtype=torch.long, device=dev)
    out_d = torch.full((B, k), math.inf, dtype=torch.float64, device=dev)
    if B == 0 or N == 0:
        return out_s, out_i, out_d
    delta = product_error(queries.shape[1])
    q32 = queries.to(torch.float32)
    b32 = None if bias is None else bias.to(torch.float32)
    bmax = 0.0 if bias is None else _largest_finite_magnitude(bias)
    gmax = float(distance(torch.tensor([-1.0], dtype=torch.float64, device=dev), None)[0])
    slack = 64 * U32 * (1.0 + bmax + gmax)
    optimistic = Optimistic(distance, delta)
    todo = torch.arange(B, device=dev)
    cand = min(N, 2 * k + 8)
    while todo.numel() > 0:
        if cand > max_candidates and cand < N:  # not certified: the float64 scan answers
            keys = exact_keys if rows is None else exact_keys[rows]
            s, i, d = exact_topk(queries[todo], keys, k, distance, bias, distance.inverse, max_product=1.0)
            out_s[todo], out_i[todo], out_d[todo] = s, i, d
            break
        kappa, local, _ = scan_topk(q32[todo], fast_keys, cand, optimistic, b32, optimistic.inverse,
                                    1 << 20, 1.0 + 2 * delta)
        s, i, d = _rescore(queries[todo], local, exact_keys, rows, distance, bias, k)
        if cand >= N:
            ok = torch.ones(todo.numel(), dtype=torch.bool, device=dev)
        else:
            cut = kappa[:, -1].to(torch.float64)
            ok = torch.isneginf(cut) | (cut + slack < s[:, -1])
        done = todo[ok]
        out_s[done], out_i[done], out_d[done] = s[ok], i[ok], d[ok]
        todo = todo[~ok]
        cand = min(N, 4 * cand)
    return out_s, out_i, out_d


def _largest_finite_magnitude(bias: torch.Tensor) -> float:
    """``max |b|`` over the finite entries of ``bias`` (one pass when all are finite)."""
    lo, hi = torch.aminmax(bias)
    if bool(torch.isfinite(lo)) and bool(torch.isfinite(hi)):
        return max(abs(float(lo)), abs(float(hi)))
    finite = bias[torch.isfinite(bias)]
    return 0.0 if finite.numel() == 0 else float(finite.abs().max())


def _rescore(queries, local, exact_keys, rows, distance, bias, k):
    """Float64 scores of the candidates ``local`` ``(b, K)`` (-1: none), their top-k by
    descending score, ties by ascending index."""
    valid = local >= 0
    li = local.clamp_min(0)
    gi = li if rows is None else rows[li]
    s64 = pair_products(queries, exact_keys, gi)  # (b, K), as exact_topk's re-score: bit for bit
    d64 = distance(s64, None)
    sc = -d64 if bias is None else bias[li] - d64
    sc = torch.where(valid, sc, torch.full_like(sc, -math.inf))
    big = torch.iinfo(torch.long).max
    order = torch.argsort(torch.where(valid, local, torch.full_like(local, big)), dim=1, stable=True)
    sc, li, d64 = (torch.gather(t, 1, order) for t in (sc, local, d64))
    order = torch.argsort(-sc, dim=1, stable=True)[:, :k]
    sc, li, d64 = (torch.gather(t, 1, order) for t in (sc, li, d64))
    gone = torch.isneginf(sc)
    li = torch.where(gone, torch.full_like(li, -1), li)
    d64 = torch.where(gone, torch.full_like(d64, math.inf), d64)
    if sc.shape[1] < k:
        pad = k - sc.shape[1]
        sc = torch.cat([sc, sc.new_full((sc.shape[0], pad), -math.inf)], 1)
        li = torch.cat([li, li.new_full((li.shape[0], pad), -1)], 1)
        d64 = torch.cat([d64, d64.new_full((d64.shape[0], pad), math.inf)], 1)
    return sc, li, d64
