"""Combining geometry and time into one retrieval score."""

from __future__ import annotations

import torch

from ..geometry.conversion import as_tensors

MIN_WEIGHT = 1e-6  # equals hypermem.temporal.MIN_WEIGHT (tested)


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
    d = ts[0]
    score = -d
    i = 1
    if time_weights is not None:
        w = ts[i]
        i += 1
        if time_coef != 0.0:
            score = score + time_coef * w.clamp_min(MIN_WEIGHT).log()
    if depths is not None and depth_bias != 0.0:
        score = score + depth_bias * ts[i]
    return score
