r"""A table of hierarchy embeddings: one point per node, Poincaré or Euclidean.

Nickel & Kiela ("Poincaré Embeddings for Learning Hierarchical Representations",
NeurIPS 2017) learn one point ``theta_i`` per node in the open unit ball, initialised
uniformly in ``[-1e-3, 1e-3]^d``, with the distance (eq. 1)

``d(u, v) = arcosh(1 + 2 ||u - v||^2 / ((1 - ||u||^2)(1 - ||v||^2)))``

(curvature ``-c``: :func:`hypermem.geometry.poincare.distance_arcosh`).  Their Euclidean
baseline uses ``||u - v||`` with the same loss.

The table is a :class:`geoopt.ManifoldParameter` on hypermem's
:class:`~hypermem.geometry.PoincareBall` (or on :class:`geoopt.Euclidean`), so
:class:`geoopt.optim.RiemannianSGD` / ``RiemannianAdam`` (and their sparse variants,
with ``sparse=True``) apply the right update: the Riemannian gradient
``((1 - ||x||^2)^2 / 4) grad`` and the retraction ``proj(x - lr * rgrad)`` of Nickel &
Kiela (eqs. 4-5).
"""

from __future__ import annotations

import geoopt
import torch
import torch.nn.functional as F

from ..geometry import PoincareBall
from ..geometry import poincare as P
from .fused import anchor_distance

GEOMETRIES = ("poincare", "euclidean")


class HierarchyEmbedding(torch.nn.Module):
    """``n`` points in ``dim`` dimensions, with the distance of their geometry.

    Parameters
    ----------
    n, dim:
        Number of nodes and dimension.
    geometry:
        ``"poincare"`` or ``"euclidean"``.
    ball:
        The :class:`~hypermem.geometry.PoincareBall` (default curvature 1).
    init_range:
        Initial coordinates are uniform in ``[-init_range, init_range]``.
    sparse:
        Produce sparse gradients (use with ``geoopt.optim.SparseRiemannianSGD``).
    seed, dtype, device:
        Initialisation seed, parameter dtype (float64 default) and device.
    """

    def __init__(self, n: int, dim: int, geometry: str = "poincare", ball: PoincareBall | None = None,
                 init_range: float = 1e-3, sparse: bool = False, seed: int = 0,
                 dtype: torch.dtype = torch.float64, device: torch.device | str | None = None):
        super().__init__()
        if geometry not in GEOMETRIES:
            raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")
        if int(n) < 1 or int(dim) < 1:
            raise ValueError(f"need n >= 1 nodes and dim >= 1, got n={n}, dim={dim}")
        if not init_range > 0:
            raise ValueError(f"init_range must be positive, got {init_range}")
        self.geometry = geometry
        self.ball = ball if ball is not None else PoincareBall()
        if geometry == "poincare" and not isinstance(self.ball, PoincareBall):
            raise TypeError(f"ball must be a hypermem PoincareBall, got {type(self.ball).__name__}")
        self.sparse = bool(sparse)
        g = torch.Generator().manual_seed(int(seed))
        init = (torch.rand(int(n), int(dim), generator=g, dtype=torch.float64) * 2 - 1) * init_range
        init = init.to(dtype=dtype, device=device)
        manifold = self.ball if geometry == "poincare" else geoopt.Euclidean(ndim=1)
        if geometry == "poincare":
            init = self.ball.projx(init)
        self.weight = geoopt.ManifoldParameter(init, manifold=manifold)

    @property
    def n(self) -> int:
        return self.weight.shape[0]

    @property
    def dim(self) -> int:
        return self.weight.shape[1]

    def extra_repr(self) -> str:
        return f"n={self.n}, dim={self.dim}, geometry={self.geometry!r}, sparse={self.sparse}"

    def lookup(self, idx: torch.Tensor) -> torch.Tensor:
        """Rows ``idx`` of the table (sparse gradient when ``sparse``; plain indexing,
        whose dense backward is faster than ``F.embedding``'s, otherwise)."""
        if self.sparse:
            return F.embedding(idx, self.weight, sparse=True)
        return self.weight[idx]

    def distance_between(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Distance between point tensors (broadcasting), in this geometry."""
        if self.geometry == "poincare":
            return P.distance_arcosh(x, y, self.ball.curvature)
        return (x - y).pow(2).sum(-1).clamp_min(1e-30).sqrt()

    def forward(self, u: torch.Tensor, v: torch.Tensor, neg: torch.Tensor | None = None):
        """Distances ``d(u, v)`` of shape ``(B,)`` and, with ``neg`` ``(B, k)``, ``d(u, neg)``
        of shape ``(B, k)``."""
        xu = self.lookup(u)
        if neg is None:
            return self.distance_between(xu, self.lookup(v))
        ys = self.lookup(torch.cat([v[:, None], neg], dim=1))  # (B, 1 + k, d), one gather
        if self.geometry == "poincare":
            d = anchor_distance(xu, ys, self.ball.curvature)
        else:
            d = self.distance_between(xu[:, None, :], ys)
        return d[:, 0], d[:, 1:]

    def pairwise_distance(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """All-pairs distances ``(b, d), (n, d) -> (b, n)`` (for evaluation)."""
        if self.geometry == "poincare":
            return self.ball.pairwise_distance(x, y)
        return torch.cdist(x, y)

    def points(self) -> torch.Tensor:
        """The points as a plain detached tensor."""
        return self.weight.detach().clone()
