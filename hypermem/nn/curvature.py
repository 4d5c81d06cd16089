r"""The curvature of the nn layers: a buffer by default, a trained parameter on request.

A layer's ball (:class:`hypermem.geometry.PoincareBall`, a :class:`geoopt.PoincareBall`)
stores ``c`` as ``isp_c = softplus^{-1}(c)``.  geoopt always makes it an
``nn.Parameter`` (with ``requires_grad=False`` when the curvature is fixed), so a fixed
curvature would show up in ``named_parameters()`` and in optimizers' parameter lists
without ever getting a gradient.  :func:`make_ball` keeps a fixed curvature as a buffer
(saved in the ``state_dict`` under the same name, moved by ``.to()``), and a learnable one
as geoopt's parameter: ``c = softplus(isp_c)`` stays positive whatever the optimizer does,
and the layers then compute with the tensor ``c`` so gradients reach it.

Curvature is trained like any Euclidean parameter (``torch.optim.Adam`` or geoopt's
``RiemannianAdam``, which treats non-manifold parameters as Euclidean).  Changing ``c``
changes the ball's radius ``1/sqrt(c)``: points stored as Poincaré coordinates (the keys
of :class:`~hypermem.nn.HyperbolicMemory`) stay inside it because every read projects them
onto the current ball and their manifold (:class:`FollowingBall`) projects them before each
Riemannian step; a key the ball shrank past lands at its margin.
"""

from __future__ import annotations

import torch

from ..geometry import PoincareBall


def make_ball(curvature: float = 1.0, learnable: bool = False) -> PoincareBall:
    """A :class:`~hypermem.geometry.PoincareBall` whose ``isp_c`` is a buffer unless ``learnable``."""
    ball = PoincareBall(curvature, learnable=bool(learnable))
    if not learnable:
        isp = ball.isp_c
        del ball.isp_c  # nn.Module.__delattr__: the parameter goes, a buffer of the same name replaces it
        ball.register_buffer("isp_c", isp.detach().clone())
    return ball


def ball_c(ball: PoincareBall) -> float | torch.Tensor:
    """``c`` for the formulas: the tensor ``softplus(isp_c)`` (with gradient) when the
    curvature is learnable, the exact Python float otherwise."""
    return ball.c if ball.learnable else ball.curvature


class FollowingBall(PoincareBall):
    """The manifold of points stored on a ball whose curvature is learned: the same ``c``
    (it shares the ball's ``isp_c`` parameter), and each Riemannian step starts from the
    point projected onto the current ball.  An optimizer may update ``c`` before the
    points in the same step; a point then lies just outside the shrunken ball, where the
    parallel transport of Adam's momentum diverges (``~1e281``) and Adam's second moment
    ``component_inner(x, g) = lambda_x^2 <g, g>`` (``lambda_x = 2 / (1 - c||x||^2)``) is NaN,
    so every method an optimizer calls with the stored point projects it first."""

    def __init__(self, ball: PoincareBall):
        super().__init__(ball.curvature, learnable=True)
        del self.isp_c  # the shared parameter of the ball replaces its own
        self.isp_c = ball.isp_c

    def egrad2rgrad(self, x, grad, *, dim: int = -1) -> torch.Tensor:  # type: ignore[override]
        return super().egrad2rgrad(self.projx(x), grad, dim=dim)

    def inner(self, x, u, v=None, *, keepdim: bool = False, dim: int = -1) -> torch.Tensor:  # type: ignore[override]
        return super().inner(self.projx(x), u, v, keepdim=keepdim, dim=dim)

    def component_inner(self, x, u, v=None) -> torch.Tensor:  # type: ignore[override]
        return super().component_inner(self.projx(x), u, v)

    def retr_transp(self, x, u, v, *, dim: int = -1):  # type: ignore[override]
        return super().retr_transp(self.projx(x), u, v, dim=dim)

    def expmap_transp(self, x, u, v, *, dim: int = -1):  # type: ignore[override]
        return super().expmap_transp(self.projx(x), u, v, dim=dim)


def points_manifold(ball: PoincareBall) -> PoincareBall:
    """The manifold for a ``ManifoldParameter`` of points on ``ball``: the ball itself, or a
    :class:`FollowingBall` of it when its curvature is learnable."""
    return FollowingBall(ball) if ball.learnable else ball


def shared_or_new_ball(curvature, learnable: bool) -> PoincareBall:
    """``curvature`` itself when it is a ball (shared between layers), else :func:`make_ball`."""
    if isinstance(curvature, PoincareBall):
        if learnable and not curvature.learnable:
            raise ValueError("learn_curvature=True with a shared ball whose curvature is fixed; "
                             "build the ball with make_ball(c, learnable=True)")
        return curvature
    return make_ball(curvature, learnable)
