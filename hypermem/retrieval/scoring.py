r"""Combining geometry and time into one retrieval score (the one home of the formula).

``score = -distance + depth_bias * depth + time_coef * log(max(time_weight, MIN_WEIGHT))``:
:func:`combine` evaluates it; :func:`score_bias` is its query-independent part, which the
store's search (through :func:`hypermem.index.exact_topk`), the durable backends and the
differentiable memory (:mod:`hypermem.nn.time_scores`) add to ``-distance``.
"""

from __future__ import annotations

import math

import torch

from ..geometry.conversion import as_tensors
from ..geometry.numerics import MIN_WEIGHT


def combine(distances, time_weights=None, depths=None, time_coef: float = 1.0,
            depth_bias: float = 0.0) -> torch.Tensor:
    r"""Retrieval score ``-distance + depth_bias * depth + time_coef * log(time_weight)``.

    Larger is better.  ``depth_bias > 0`` prefers specific (deep) memories, ``< 0``
    general ones; ``time_coef`` scales the temporal policy (1.0: halving a weight costs
    ``ln 2`` in score, the same as moving ``ln 2 ~ 0.69`` further away in the ball).
    Weights are floored at ``MIN_WEIGHT = 1e-6`` before the logarithm, so a zero weight is a large
    finite penalty, never ``-inf``.

    Example::

        >>> combine([1.0, 2.0], time_weights=[1.0, 0.5]).tolist()  # doctest: +ELLIPSIS
        [-1.0, -2.69...]
    """
    args = [distances]
    if time_weights is not None:
        args.append(time_weights)
    if depths is not None:
        args.append(depths)
    ts = as_tensors(*args, names=("distances", "time_weights", "depths")[: len(args)])
    w = ts[1] if time_weights is not None else None
    dep = ts[-1] if depths is not None else None
    return -ts[0] + score_bias(w, dep, time_coef, depth_bias, like=ts[0])


def score_bias(time_weights: torch.Tensor | None, depths: torch.Tensor | None, time_coef: float,
               depth_bias: float, like: torch.Tensor | None = None, overwrite: bool = False) -> torch.Tensor:
    r"""The query-independent part of the score, ``time_coef * log(max(w, MIN_WEIGHT)) +
    depth_bias * depth`` (a term is left out when its coefficient is 0 or its values are None).

    :func:`combine` adds it to ``-distance``; the store's search, its index kernel and the
    durable backends rank by ``-distance + score_bias(...)`` through this one function.  The
    result has the dtype and device of ``depths`` (else ``like``, else ``time_weights``); the
    logarithm is taken in the weights' own dtype first.  ``overwrite=True``: the caller gives
    ``time_weights`` up (a fresh tensor it does not read again), and the time term is computed
    in their buffer instead of a copy (a search over N memories saves ``8 N`` bytes).
    """
    ref = depths if depths is not None else like if like is not None else time_weights
    if ref is None:
        raise ValueError("score_bias needs depths, time_weights or like= for the shape")
    out = None  # one fresh buffer, filled in place (a search evaluates this over every memory)
    if time_weights is not None and time_coef != 0.0:
        w = time_weights.clamp_min_(MIN_WEIGHT) if overwrite else time_weights.clamp_min(MIN_WEIGHT)
        out = w.log_().mul_(time_coef).to(device=ref.device, dtype=ref.dtype)
    if depths is not None and depth_bias != 0.0:
        out = depths * depth_bias if out is None else out.add_(depths.to(out.dtype), alpha=depth_bias)
    if out is None:
        return torch.zeros(ref.shape, dtype=ref.dtype, device=ref.device)
    return out if out.shape == ref.shape else out + torch.zeros(ref.shape, dtype=ref.dtype, device=ref.device)


RECENCY_DEFAULT = 0.1
"""The default ``recency_weight`` of a store with a real embedder (chosen on LoCoMo 0-4)."""


def calibrated_time_coef(recency_weight: float, spread: float) -> float:
    r"""The ``time_coef`` that makes one half-life of age cost ``recency_weight`` times the
    spread of distances: ``time_coef = recency_weight * spread / ln 2``.

    With a half-life policy ``log w = -ln 2 * age / half_life``, so the time term is
    ``-recency_weight * spread * age / half_life``: a memory one half-life older must be
    ``recency_weight * spread`` closer to the query to tie.  ``spread`` is the standard
    deviation of the distances between the store's memories
    (:func:`hypermem.store.calibration.distance_spread`), the scale on which an embedder tells
    relevant from irrelevant (0.11-0.14 for all-MiniLM-L6-v2 on LoCoMo's conversations, where the
    seed's ``time_coef = 1``, ``ln 2 = 0.69`` per half-life, lets age decide: issue 32).  ``recency_weight`` lies in ``[0, 1]``.
    """
    if not 0.0 <= recency_weight <= 1.0:
        raise ValueError(f"recency_weight must be in [0, 1], got {recency_weight!r}")
    return recency_weight * spread / math.log(2.0)
