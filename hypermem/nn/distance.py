r"""Hyperbolic and shell distances with gradient, written with inner products.

The formulas of :mod:`hypermem.nn.hyperbolic_memory` (Nickel & Kiela 2017, eq. 1, and the shell
distance of :class:`hypermem.store.Memory`) in terms of ``<q, k>``, ``||q||^2`` and
``||k||^2``, so a full read (one matrix product) and a top-k read (one batched product of
the gathered keys) agree to rounding.  ``curvature`` is a float or a 0-d tensor (a
learnable curvature, :mod:`hypermem.nn.curvature`).  The products run with autocast off
in the keys' dtype: in bfloat16 ``1 - c|k|^2`` has 8 bits of mantissa, and keys at depth
3 already sit on the boundary.
"""

from __future__ import annotations

import contextlib

import torch

from ..geometry.numerics import tiny
from ..geometry.poincare import arcosh_distance, boundary_gap, shell_distance_at_depth

Curvature = float | torch.Tensor


def _no_autocast(device: torch.device):
    """Autocast off on ``device`` (the ``meta`` device has no autocast: nothing to turn off)."""
    return contextlib.nullcontext() if device.type == "meta" else torch.autocast(device.type, enabled=False)


def _from_products(qk: torch.Tensor, q2: torch.Tensor, k2: torch.Tensor, metric: str, curvature: Curvature,
                   base_depth: float) -> torch.Tensor:
    """Distances from inner products ``<q, k>`` and squared norms (broadcasting shapes):
    the formulas of :func:`hypermem.geometry.poincare.arcosh_distance` and
    :func:`~hypermem.geometry.poincare.shell_distance_at_depth` (finite at any depth: the
    shell scale ``sinh(sqrt(c) rho)`` is taken in log space where it overflows).

    The shell metric needs ``cos = <q, k> / (||q|| ||k||)``.  The origin has no direction:
    where ``||q||^2`` or ``||k||^2`` is at most ``tiny(dtype)`` the cosine is taken as 0 (what
    the chunked search sees: a zero direction), with zero gradient, and the square roots are
    taken one norm at a time (``sqrt(q2 * k2)`` underflows to 0 in float32 once both are
    below ~1e-19, which gave ``0 / 0 = NaN``)."""
    c = curvature
    t = tiny(qk.dtype)
    if metric == "hyperbolic":
        diff2 = (q2 + k2 - 2.0 * qk).clamp_min(0.0)
        return arcosh_distance(diff2, boundary_gap(q2, c), boundary_gap(k2, c), c)
    has_dir = (q2 > t) & (k2 > t)
    # the other branch's norms are replaced by 1, so its gradient is finite before where() zeroes it
    qn, kn = torch.where(q2 > t, q2, 1.0).sqrt(), torch.where(k2 > t, k2, 1.0).sqrt()
    cos = torch.where(has_dir, qk / (qn * kn), 0.0)
    # ||u - v|| / 2 = sqrt((1 - cos) / 2) for unit directions u, v
    half_chord = ((1.0 - cos) * 0.5).clamp_min(t).sqrt()
    return shell_distance_at_depth(half_chord, base_depth, c)


def gathered_distance(queries: torch.Tensor, keys: torch.Tensor, metric: str, curvature: Curvature,
                      base_depth: float) -> torch.Tensor:
    """Distances ``(B, m)`` between queries ``(B, d)`` and per-query keys ``(B, m, d)``.

    One batched matrix product of queries and keys plus the keys' squared norms, then
    the formulas of :mod:`hypermem.nn.hyperbolic_memory` written in terms of ``<q, k>``, ``||q||^2`` and
    ``||k||^2`` (as :func:`all_distance` does, so a top-k read and a full read agree to
    rounding): cost ``O(B m d)``.
    """
    with _no_autocast(keys.device):
        queries = queries.to(keys.dtype)
        qk = torch.bmm(keys, queries.unsqueeze(2)).squeeze(2)
        q2 = queries.pow(2).sum(-1, keepdim=True)
        k2 = keys.pow(2).sum(-1)
        return _from_products(qk, q2, k2, metric, curvature, base_depth)


def all_distance(queries: torch.Tensor, keys: torch.Tensor, metric: str, curvature: Curvature,
                 base_depth: float) -> torch.Tensor:
    """Distances ``(B, N)`` between queries ``(B, d)`` and all keys ``(N, d)`` (one matrix
    product; memory ``O(B N)``)."""
    with _no_autocast(keys.device):
        queries = queries.to(keys.dtype)
        qk = queries @ keys.T
        q2 = queries.pow(2).sum(-1, keepdim=True)
        k2 = keys.pow(2).sum(-1).unsqueeze(0)
        return _from_products(qk, q2, k2, metric, curvature, base_depth)
