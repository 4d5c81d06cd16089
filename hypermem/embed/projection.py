"""Placing Euclidean embeddings in the ball: direction from the vector, depth chosen."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..geometry import PoincareBall, as_points, as_tensor
from ..geometry.numerics import safe_norm


@dataclass(frozen=True)
class BallProjector:
    """Place Euclidean vectors in the ball at a chosen hyperbolic depth.

    hypermem separates *direction* from *depth*: the semantic embedding gives the
    direction ``u = x / ||x||``, the hierarchy gives the hyperbolic radius ``r``, and the
    point is ``tanh(sqrt(c) r / 2) u / sqrt(c)`` (so ``d(0, p) = r``).

    Example::

        >>> from hypermem.geometry import PoincareBall
        >>> p = BallProjector(PoincareBall()).at_depth([[3.0, 4.0]], 2.0)
        >>> round(float(PoincareBall().distance_to_origin(p)), 6)
        2.0
    """

    ball: PoincareBall

    def direction(self, X) -> torch.Tensor:
        """Unit vectors ``X / ||X||`` (a zero row stays zero)."""
        (X,) = as_points(_float64_unless_tensor(X), names=("X",))
        return X / safe_norm(X, keepdim=True)

    def at_depth(self, X, depth) -> torch.Tensor:
        """Points with the direction of ``X`` at hyperbolic distance ``depth`` from the origin."""
        return self.ball.point_at(_float64_unless_tensor(X), depth)

    def expmap0(self, X, scale: float = 1.0) -> torch.Tensor:
        """Exponential map at the origin of the scaled vectors: depth ``2 * scale * ||x||``."""
        (X,) = as_points(_float64_unless_tensor(X), names=("X",))
        return self.ball.expmap0(scale * X)


def _float64_unless_tensor(X):
    """Embeddings from NumPy (often float32, e.g. sentence-transformers) become float64
    points, as in the NumPy reference: deep points need float64's margin.  Tensors keep
    their dtype."""
    return X if isinstance(X, torch.Tensor) else as_tensor(X, dtype=torch.float64, name="X")
