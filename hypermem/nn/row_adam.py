r"""Row-wise (lazy) Riemannian Adam for a table of points with sparse row gradients.

A memory's keys are an ``(N, d)`` table of points of the ball; a training step reads a few
rows (the top-``k`` slots of a batch), so the key gradient is sparse.  The lazy Riemannian
Adam of Bécigneul & Ganea ("Riemannian Adaptive Optimization Methods", ICLR 2019), in the
row-wise form of geoopt's ``SparseRiemannianAdam``, updates only the rows ``R`` that the
gradient touches, with moments kept per row: for ``x = X[R]`` and the summed Euclidean
gradient ``g = G[R]`` (Euclidean gradient of the loss with respect to the rows),

.. math::

    \tilde g &= \operatorname{egrad2rgrad}(x, g)
              = \tfrac{(1 - c\|x\|^2)^2}{4}\, g, \\
    m &\leftarrow \beta_1 m + (1 - \beta_1)\,\tilde g, \qquad
    v \leftarrow \beta_2 v + (1 - \beta_2)\,\langle \tilde g, \tilde g\rangle_x^{\text{comp}}, \\
    \delta &= -\eta\, \frac{m / (1 - \beta_1^t)}{\sqrt{v / (1 - \beta_2^t)} + \epsilon}, \qquad
    (x, m) \leftarrow \big(R_x(\delta),\; \Gamma_{x \to R_x(\delta)}(m)\big),

with the manifold's retraction ``R`` and vector transport ``Γ`` (``manifold.retr_transp``),
``t`` the step count of the table (one per ``step`` call, as geoopt counts it) and the
component-wise inner product ``manifold.component_inner``.  The rows outside ``R`` and
their moments are not touched.

The update is geoopt's, computed with the same manifold calls in the same order; what
differs is the bookkeeping: the gradient is coalesced once and its values are the rows'
gradients (geoopt coalesces, takes ``unique`` of the indices, then ``index_select``\ s the
uncoalesced sparse tensor and densifies it), the moments are read and written with
``index_select`` / ``index_copy_``, and the coalesced gradient replaces ``grad`` so that a
caller who needs the moved rows (a key cache refreshed per row,
:meth:`hypermem.nn.HyperbolicMemory.refresh_key_rows`) reads them without another sort.
"""

from __future__ import annotations

import torch
from geoopt import ManifoldParameter, ManifoldTensor
from geoopt.manifolds import Euclidean

__all__ = ["RowRiemannianAdam", "moved_rows"]


def moved_rows(grad: torch.Tensor | None) -> torch.Tensor | None:
    """The rows ``(U,)`` a sparse gradient touches (sorted, unique); ``None`` for no or a dense
    gradient.  Cheap after :meth:`RowRiemannianAdam.step` (the gradient is then coalesced)."""
    if grad is None or not grad.is_sparse:
        return None
    return grad.coalesce().indices()[0]


class RowRiemannianAdam(torch.optim.Optimizer):
    """Lazy Riemannian Adam over the rows of 2-d (manifold) parameters with sparse gradients
    (see the module docstring); the same update as ``geoopt.optim.SparseRiemannianAdam``.

    Parameters
    ----------
    params: 2-d parameters (``ManifoldParameter`` or plain: a plain one is Euclidean).
    lr, betas, eps: Adam's step size, moment decays and denominator offset.
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        if lr < 0.0 or eps < 0.0 or not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid lr={lr}, betas={betas} or eps={eps}")
        super().__init__(params, dict(lr=float(lr), betas=tuple(betas), eps=float(eps)))
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"RowRiemannianAdam needs matrix parameters, got shape {tuple(p.shape)}")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for point in group["params"]:
                if point.grad is None:
                    continue
                if not point.grad.is_sparse:
                    raise RuntimeError("RowRiemannianAdam needs sparse row gradients (an embedding read with "
                                       "sparse=True); use geoopt.optim.RiemannianAdam for dense ones")
                grad = point.grad.coalesce()
                point.grad = grad  # the moved rows, sorted and unique, for whoever reads them next
                rows, g = grad.indices()[0], grad.values()
                manifold = point.manifold if isinstance(point, (ManifoldParameter, ManifoldTensor)) else _EUCLID
                state = self.state[point]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(point)
                    state["exp_avg_sq"] = torch.zeros_like(point)
                state["step"] += 1
                x = point.index_select(0, rows)
                m = state["exp_avg"].index_select(0, rows)
                v = state["exp_avg_sq"].index_select(0, rows)
                g = manifold.egrad2rgrad(x, g)
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).add_(manifold.component_inner(x, g), alpha=1 - b2)
                denom = v.div(1 - b2 ** state["step"]).sqrt_()
                direction = m.div(1 - b1 ** state["step"]) / denom.add_(group["eps"])
                new_x, new_m = manifold.retr_transp(x, -group["lr"] * direction, m)
                point.index_copy_(0, rows, new_x)
                state["exp_avg"].index_copy_(0, rows, new_m)
                state["exp_avg_sq"].index_copy_(0, rows, v)
        return loss


_EUCLID = Euclidean()
