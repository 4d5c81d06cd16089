"""Poincaré-ball geometry on torch tensors (layer 1 of hypermem).

* :class:`PoincareBall` — a :class:`geoopt.PoincareBall` with hypermem's methods;
* :mod:`~hypermem.geometry.poincare` — the pure functions behind it;
* :mod:`~hypermem.geometry.lorentz` — hyperboloid helpers and the MIPS trick;
* :mod:`~hypermem.geometry.cones` — entailment cones (Ganea et al. 2018);
* :mod:`~hypermem.geometry.numerics` — per-dtype margins and clamped special functions.
"""

from .conversion import as_points, as_tensor, check_curvature
from .deferred_import import defer_submodule
from .lorentz import lorentz_distance, lorentz_inner, mips_scores, to_mips_vectors
from .numerics import artanh, ball_margin, max_radius

# geoopt's optimizers import scipy.optimize (~0.45 s); the store never needs them: they load on
# first use (geoopt.optim.RiemannianSGD), see hypermem.geometry.deferred_import
defer_submodule("geoopt", "optim")

from .ball import PoincareBall  # noqa: E402

__all__ = [
    "PoincareBall",
    "as_points",
    "as_tensor",
    "check_curvature",
    "lorentz_inner",
    "lorentz_distance",
    "to_mips_vectors",
    "mips_scores",
    "ball_margin",
    "max_radius",
    "artanh",
]
