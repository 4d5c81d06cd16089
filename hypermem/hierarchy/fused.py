r"""Poincaré distances from anchors to many points, with a closed-form backward.

Training evaluates ``d(u_b, v_bk)`` for a batch of anchors ``u`` ``(B, d)`` and their
positive and negative partners ``V`` ``(B, K, d)``.  Written with generic tensor ops
this materialises several ``(B, K, d)`` temporaries forward and backward; here the
forward uses one batched matrix product for ``<u, v>`` and the backward the analytic
gradient of Nickel & Kiela (NeurIPS 2017, eq. 4), for the unit ball:

``alpha = 1 - ||u||^2``, ``beta = 1 - ||v||^2``,
``gamma = 1 + 2 ||u - v||^2 / (alpha beta)``, ``d = arcosh(gamma)``,

``dd/du = 4 / (beta sqrt(gamma^2 - 1)) * ((||v||^2 - 2<u,v> + 1) / alpha^2 * u - v / alpha)``

and symmetrically for ``v``.  A ball of curvature ``-c`` scales the points by
``sqrt(c)`` (``d_c(u, v) = d_1(sqrt(c) u, sqrt(c) v) / sqrt(c)``), which leaves the
gradient formula in the scaled points unchanged.  ``gamma - 1`` is kept as ``z`` so
``arcosh(1 + z) = log1p(z + sqrt(z (z + 2)))`` stays precise for close points.

The home of the distance is :func:`hypermem.geometry.poincare.arcosh_distance`; this is a
copy because the backward reuses the forward's ``sqrt(z (z + 2))``, and
``tests/test_formula_contract.py`` checks it against the home.
"""

from __future__ import annotations

import math

import torch

from ..geometry.numerics import tiny


def anchor_distance_forward(u: torch.Tensor, V: torch.Tensor, sc: float) -> tuple[torch.Tensor, tuple]:
    """Distances ``(B, K)`` and the tensors :func:`anchor_distance_backward` needs
    (``sc = sqrt(c)``)."""
    x = u * sc
    Y = V * sc
    t = tiny(u.dtype)
    xx = (x * x).sum(-1)  # (B,)
    yy = (Y * Y).sum(-1)  # (B, K)
    xy = torch.bmm(Y, x.unsqueeze(-1)).squeeze(-1)  # (B, K)
    alpha = (1.0 - xx).clamp_min(t)
    beta = (1.0 - yy).clamp_min(t)
    sq = (xx.unsqueeze(-1) + yy - 2.0 * xy).clamp_min(0.0)
    z = (2.0 * sq / (alpha.unsqueeze(-1) * beta)).clamp_min(t)
    root = torch.sqrt(z * (z + 2.0))
    d = torch.log1p(z + root) / sc
    return d, (x, Y, xx, yy, xy, alpha, beta, root)


def anchor_distance_backward(saved: tuple, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients ``(dL/du (B, d), dL/dV (B, K, d))`` from ``grad = dL/dd`` ``(B, K)``."""
    x, Y, xx, yy, xy, alpha, beta, root = saved
    a = alpha.unsqueeze(-1)  # (B, 1)
    g = grad * 4.0 / root.clamp_min(tiny(root.dtype))  # (B, K); sc factors cancel
    # dd/dx = g / beta * ((yy - 2 xy + 1) / a^2 * x - Y / a)
    cu = g / beta
    coef_x = (cu * (yy - 2.0 * xy + 1.0) / (a * a)).sum(-1, keepdim=True)  # (B, 1)
    gx = coef_x * x - torch.bmm((cu / a).unsqueeze(1), Y).squeeze(1)
    # dd/dY = g / alpha * ((xx - 2 xy + 1) / beta^2 * Y - x / beta)
    cv = g / a
    gY = (cv * (xx.unsqueeze(-1) - 2.0 * xy + 1.0) / (beta * beta)).unsqueeze(-1) * Y \
        - (cv / beta).unsqueeze(-1) * x.unsqueeze(1)
    return gx, gY


class _AnchorDistance(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u: torch.Tensor, V: torch.Tensor, sc: float):
        d, saved = anchor_distance_forward(u, V, sc)
        ctx.save_for_backward(*saved)
        return d

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        gx, gY = anchor_distance_backward(ctx.saved_tensors, grad)
        return gx, gY, None


def anchor_distance(u: torch.Tensor, V: torch.Tensor, c: float = 1.0) -> torch.Tensor:
    """Poincaré distances ``d_c(u_b, V_bk)``: ``u`` ``(B, d)``, ``V`` ``(B, K, d)`` -> ``(B, K)``.

    Same values as :func:`hypermem.geometry.poincare.distance_arcosh` (to rounding);
    fewer temporaries and a closed-form backward.
    """
    if u.dim() != 2 or V.dim() != 3 or V.shape[0] != u.shape[0] or V.shape[2] != u.shape[1]:
        raise ValueError(f"need u (B, d) and V (B, K, d), got {tuple(u.shape)} and {tuple(V.shape)}")
    return _AnchorDistance.apply(u, V, math.sqrt(float(c)))
