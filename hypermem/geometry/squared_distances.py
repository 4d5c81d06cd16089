r"""All-pairs squared Euclidean distances ``D2[..., i, j] = ||x_i - y_j||^2`` from the
coordinate differences, with derivatives of every order.

``x`` ``(..., n, d)`` and ``y`` ``(..., m, d)`` (batch shapes broadcast) give
``(..., n, m)``.  The formula is the broadcast sum

``D2_ij = sum_k (x_ik - y_jk)^2``

(not the matrix-product shortcut ``||x_i||^2 + ||y_j||^2 - 2 <x_i, y_j>``, which cancels for
nearby points, see :func:`~hypermem.geometry.poincare.pairwise_distance`).  Its derivatives:

* backward: ``dL/dx_i = 2 sum_j g_ij (x_i - y_j)``, ``dL/dy_j = -2 sum_i g_ij (x_i - y_j)``
  for the incoming gradient ``g = dL/dD2``;
* forward (JVP): ``dD2_ij = 2 <x_i - y_j, dx_i - dy_j>``.

:func:`torch.cdist` (``compute_mode="donot_use_mm_for_euclid_dist"``) computes the forward and
the first-order backward without materialising the ``(n, m, d)`` differences (memory
``O(n m)``), but it has no double backward and no forward-mode AD.  :func:`squared_distances`
is a :class:`torch.autograd.Function` that keeps cdist for those two and writes the rest in
differentiable torch ops of the broadcast form (memory ``O(n m d)``):

* a backward under ``create_graph=True`` (``torch.autograd.grad(..., create_graph=True)``,
  ``torch.func.grad``, ``gradgradcheck``, Hessian-vector products) is itself differentiable;
* ``torch.func.jvp`` / ``jacfwd`` use the JVP above;
* ``torch.func.vmap`` batches all of them (``generate_vmap_rule``).

Under ``torch.compile`` it is plain ``torch.cdist`` (a compiled graph has no double backward).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["squared_distances"]


def _differences(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x_i - y_j`` ``(..., n, m, d)``: the broadcast form the derivatives are written in."""
    return x.unsqueeze(-2) - y.unsqueeze(-3)


class _SquaredDistances(torch.autograd.Function):
    """cdist's forward and first-order backward; broadcast-form higher derivatives."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dist = torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist")
        return dist.square(), dist

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor, torch.Tensor], output: Any) -> None:
        x, y = inputs
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(x, y, output[1])
        ctx.save_for_forward(x, y)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _: Any) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        x, y, dist = ctx.saved_tensors
        need_x, need_y = ctx.needs_input_grad[:2]
        if torch.is_grad_enabled():  # create_graph=True: a backward that is itself differentiable
            gd = 2.0 * g.unsqueeze(-1) * _differences(x, y)
            return (gd.sum(-2) if need_x else None), (-gd.sum(-3) if need_y else None)
        # first order: cdist's own backward (no (n, m, d) tensor); d(dist^2) = 2 dist d(dist)
        scaled = (2.0 * g * dist).contiguous()
        gx = torch.ops.aten._cdist_backward(scaled, x.contiguous(), y.contiguous(), 2.0, dist) if need_x else None
        gy = (torch.ops.aten._cdist_backward(scaled.mT.contiguous(), y.contiguous(), x.contiguous(), 2.0,
                                             dist.mT.contiguous()) if need_y else None)
        return gx, gy

    @staticmethod
    def jvp(ctx: Any, dx: torch.Tensor | None, dy: torch.Tensor | None) -> tuple[torch.Tensor, None]:
        x, y = ctx.saved_tensors
        if dx is None:
            dx = torch.zeros_like(x)
        if dy is None:
            dy = torch.zeros_like(y)
        return 2.0 * (_differences(x, y) * _differences(dx, dy)).sum(-1), None


def squared_distances(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``||x_i - y_j||^2`` for ``x`` ``(..., n, d)``, ``y`` ``(..., m, d)`` (torch tensors of one
    dtype and device; batch shapes broadcast), as ``(..., n, m)``: see the module docstring
    for the formula and its derivatives (first order: :func:`torch.cdist`'s cost; higher
    orders and forward mode: the broadcast form)."""
    if torch.compiler.is_compiling():
        return torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist").square()
    batch = torch.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x = x.expand(*batch, *x.shape[-2:])
    y = y.expand(*batch, *y.shape[-2:])
    return _SquaredDistances.apply(x, y)[0]
