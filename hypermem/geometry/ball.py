"""The Poincaré ball as a geoopt manifold with hypermem's methods."""

from __future__ import annotations

import warnings

import torch

with warnings.catch_warnings():
    # geoopt decorates its helpers with @torch.jit.script, which recent torch deprecates: its import
    # must not fail under ``python -W error::DeprecationWarning`` (nor warn 73 times in a notebook)
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning)
    import geoopt

from . import poincare_functions as P
from .conversion import as_points, check_curvature
from .numerics import ball_margin, max_radius
from .vocabulary import GeooptVocabulary
from .vocabulary import check_dim as _check_dim


def _inverse_softplus(c: torch.Tensor) -> torch.Tensor:
    """``isp_c = softplus^{-1}(c) = log(exp(c) - 1)``, evaluated as ``c + log(-expm1(-c))``:
    geoopt's ``log(exp(c) - 1)`` loses the digits of a small ``c`` (``1e-12`` read back as
    ``1.00009e-12``), is ``-inf`` below ``c ~ 1e-16`` (the curvature read back was 0) and
    ``+inf`` above 709."""
    return c + torch.log(-torch.expm1(-c))


def _geoopt_isp(c: torch.Tensor) -> torch.Tensor:
    """geoopt's ``log(exp(c) - 1)``: how checkpoints written before kept ``isp_c``."""
    return c.exp().sub(1).log()


def _exact_curvature(isp: torch.Tensor) -> float:
    """``c = softplus(isp)`` as a Python float: the shortest decimal (up to 17 digits) whose
    :func:`_inverse_softplus` (computed in float64 like the constructor; or geoopt's, which
    older checkpoints hold) rounds to ``isp`` exactly, so ``2.0`` saved comes back as ``2.0``,
    not ``2.0000000000000004``."""
    value = float(torch.nn.functional.softplus(isp.to(torch.float64)))
    for digits in range(1, 18):
        guess = float(f"{value:.{digits}g}")
        g = torch.tensor(guess, dtype=torch.float64)
        if guess > 0 and any(torch.equal(f(g).to(isp.dtype), isp) for f in (_inverse_softplus, _geoopt_isp)):
            return guess
    return value


def check_loaded_curvature(state_dict, key: str) -> None:
    """``ValueError`` naming ``key`` when ``state_dict[key]`` (an ``isp_c``) gives a curvature
    ``softplus(isp_c)`` that :func:`~hypermem.geometry.conversion.check_curvature` refuses;
    nothing to check when the key is absent, not one number, or on the meta device."""
    isp = state_dict.get(key)
    if isinstance(isp, torch.Tensor) and isp.numel() == 1 and not isp.is_meta:
        c = _exact_curvature(isp.detach().cpu().reshape(()))
        try:
            check_curvature(c)
        except ValueError as exc:
            raise ValueError(f"state_dict[{key!r}] = {float(isp):g} gives the curvature softplus(isp_c) = "
                             f"{c:g}, which PoincareBall refuses: {exc}") from None


class PoincareBall(GeooptVocabulary, geoopt.PoincareBall):
    r"""Poincaré ball of curvature ``-curvature`` (``curvature > 0``).

    A subclass of :class:`geoopt.PoincareBall`, so it works with
    :class:`geoopt.ManifoldParameter`, :class:`geoopt.optim.RiemannianSGD` and
    :class:`geoopt.optim.RiemannianAdam`.  It adds the methods of hypermem's API; each
    delegates to the pure function of the same name in :mod:`hypermem.geometry.poincare`
    with ``c = curvature``.  geoopt's own method names (``dist``, ``dist0``, ``lambda_x``,
    ``inner``, ``mobius_matvec``, ``weighted_midpoint``...) are computed with the same
    functions (:mod:`hypermem.geometry.vocabulary`), so ``ball.dist == ball.distance`` and
    geoopt's optimizers and :class:`geoopt.ManifoldParameter` see the same ball.  The
    manifold's projection (``projx``, ``retr``) keeps points at the dtype-aware margin of
    :func:`hypermem.geometry.numerics.ball_margin`.

    Results are torch tensors; NumPy input keeps its floating dtype (float32 in, float32
    out) and ``np.asarray(result)`` gives an array back.

    Example::

        >>> ball = PoincareBall(curvature=1.0)
        >>> x = ball.point_at([1.0, 0.0], 2.0)
        >>> float(ball.distance_to_origin(x))  # doctest: +ELLIPSIS
        2.0...

    Parameters
    ----------
    curvature:
        Positive curvature magnitude ``c``; the sectional curvature is ``-c``.
    learnable:
        Make the curvature a trainable parameter (geoopt's softplus parametrisation).
    """

    def __init__(self, curvature: float = 1.0, learnable: bool = False):
        value = check_curvature(curvature)
        super().__init__(c=torch.tensor(value, dtype=torch.float64), learnable=learnable)
        with torch.no_grad():
            self.isp_c.copy_(_inverse_softplus(torch.tensor(value, dtype=torch.float64)))
        self._curvature = value
        self._learnable = bool(learnable)

    # -- curvature ----------------------------------------------------------------
    @property
    def curvature(self) -> float:
        """The curvature magnitude as a Python float."""
        return float(self.c.detach()) if self._learnable else self._curvature

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """Load ``isp_c``, then re-read the fixed curvature's exact float from it, so a
        checkpoint of another curvature is the one every formula uses (``c = softplus(isp_c)``;
        the float kept is the shortest decimal whose ``log(exp(c) - 1)`` gives ``isp_c`` back,
        else ``softplus(isp_c)`` itself).  A curvature the constructor would refuse (NaN, or
        ``isp_c`` so negative that ``softplus`` is 0 or below ``MIN_CURVATURE``) is refused
        before anything is loaded: ``ValueError`` naming the key."""
        check_loaded_curvature(state_dict, prefix + "isp_c")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._curvature = _exact_curvature(self.isp_c.detach())

    @property
    def learnable(self) -> bool:
        """Whether the curvature is a trainable parameter."""
        return self._learnable

    def curvature_arg(self) -> float | torch.Tensor:
        """The curvature as the functions of :mod:`hypermem.geometry` take it: the tensor of a
        learnable ball (keeps the graph), the exact Python float of a fixed one."""
        return self.c if self._learnable else self._curvature

    _c = curvature_arg

    def extra_repr(self) -> str:
        return f"curvature={self.curvature:g}" + (", learnable=True" if self._learnable else "")

    def __eq__(self, other):  # value equality, so balls compare like the seed's dataclass
        if not isinstance(other, PoincareBall):
            return NotImplemented
        return self.curvature == other.curvature and self._learnable == other._learnable

    __hash__ = torch.nn.Module.__hash__

    @property
    def sqrt_c(self) -> float:
        """``sqrt(c)`` as a Python float (the NumPy reference's attribute)."""
        return self.curvature**0.5

    @property
    def radius(self) -> float:  # type: ignore[override]
        """Euclidean radius ``1 / sqrt(c)`` of the ball."""
        return 1.0 / self.curvature**0.5

    def margin(self, dtype: torch.dtype = torch.float64) -> float:
        """Relative boundary margin used by :meth:`project` for ``dtype``."""
        return ball_margin(dtype)

    def max_radius(self, dtype: torch.dtype = torch.float64) -> float:
        """Largest hyperbolic distance from the origin representable in ``dtype``."""
        return max_radius(dtype, self.curvature)

    # -- hypermem API -----------------------------------------------------------------
    def conformal_factor(self, x, keepdim: bool = True) -> torch.Tensor:
        """``lambda_x = 2 / (1 - c ||x||^2)``, shape ``x.shape[:-1] + (1,)`` (as the NumPy
        reference: it multiplies vectors directly); ``keepdim=False`` drops the last axis,
        like geoopt's :meth:`lambda_x`."""
        return P.conformal_factor(x, self._c(), keepdim=keepdim)

    def mobius_add(self, x, y, *, dim: int = -1, project: bool = True) -> torch.Tensor:  # type: ignore[override]
        """Möbius addition ``x ⊕_c y``; see :func:`hypermem.geometry.poincare.mobius_add`."""
        _check_dim(dim)
        out = P.mobius_add(x, y, self._c())
        return P.project(out, self._c()) if project else out

    def mobius_scalar_mul(self, r, x, *, dim: int = -1, project: bool = True) -> torch.Tensor:  # type: ignore[override]
        """Möbius scalar multiplication ``r ⊗_c x``."""
        _check_dim(dim)
        out = P.mobius_scalar_mul(r, x, self._c())
        return P.project(out, self._c()) if project else out

    def distance(self, x, y) -> torch.Tensor:
        """Geodesic distance (gyrovector formula)."""
        return P.distance(x, y, self._c())

    def distance_arcosh(self, x, y) -> torch.Tensor:
        """Geodesic distance (arcosh formula)."""
        return P.distance_arcosh(x, y, self._c())

    def distance_to_origin(self, x) -> torch.Tensor:
        """``d_c(0, x)``, the depth coordinate."""
        return P.distance_to_origin(x, self._c())

    def pairwise_distance(self, x, y) -> torch.Tensor:
        """All-pairs distances ``(n, d), (m, d) -> (n, m)``."""
        return P.pairwise_distance(x, y, self._c())

    def shell_distance(self, x, y, depth) -> torch.Tensor:
        """Distance after moving both points to hyperbolic radius ``depth``."""
        return P.shell_distance(x, y, depth, self._c())

    def shell_distance_from_cosine(self, cos, depth) -> torch.Tensor:
        """Shell distance as a function of the cosine between directions."""
        return P.shell_distance_from_cosine(cos, depth, self._c())

    def expmap(self, x, v, *, project: bool = True, dim: int = -1) -> torch.Tensor:  # type: ignore[override]
        """Exponential map at ``x``."""
        _check_dim(dim)
        out = P.expmap(x, v, self._c())
        return P.project(out, self._c()) if project else out

    def expmap0(self, v, *, dim: int = -1, project: bool = True) -> torch.Tensor:  # type: ignore[override]
        """Exponential map at the origin."""
        _check_dim(dim)
        out = P.expmap0(v, self._c())
        return P.project(out, self._c()) if project else out

    def logmap(self, x, y, *, dim: int = -1) -> torch.Tensor:  # type: ignore[override]
        """Logarithmic map at ``x``."""
        _check_dim(dim)
        return P.logmap(x, y, self._c())

    def logmap0(self, y, *, dim: int = -1) -> torch.Tensor:  # type: ignore[override]
        """Logarithmic map at the origin."""
        _check_dim(dim)
        return P.logmap0(y, self._c())

    def point_at(self, direction, hyperbolic_radius) -> torch.Tensor:
        """Point at hyperbolic distance ``hyperbolic_radius`` from the origin along ``direction``."""
        return P.point_at(direction, hyperbolic_radius, self._c())

    def set_depth(self, x, hyperbolic_radius) -> torch.Tensor:
        """Move ``x`` radially to distance ``hyperbolic_radius`` from the origin."""
        return P.set_depth(x, hyperbolic_radius, self._c())

    def project(self, x, margin: float | None = None) -> torch.Tensor:
        """Pull points inside ``||x|| <= (1 - margin) / sqrt(c)``."""
        return P.project(x, self._c(), margin)

    def is_inside(self, x) -> torch.Tensor:
        """Boolean mask of points strictly inside the ball."""
        return P.is_inside(x, self._c())

    def check_inside(self, x, name: str = "x") -> torch.Tensor:
        """Return ``x`` as a tensor, or raise ``ValueError`` naming the first bad point
        (non-finite, or on or outside the boundary)."""
        (x,) = as_points(x, names=(name,))
        bad = ~P.is_inside(x, self._c())
        if bool(bad.any()):
            idx = tuple(int(i) for i in bad.nonzero()[0])
            norm = float(x[idx].norm()) if idx else float(x.norm())
            raise ValueError(f"{name}{list(idx) if idx else ''} is not inside the Poincaré ball of "
                             f"curvature {self.curvature:g} (norm {norm:.6g}, radius {self.radius:.6g})")
        return x

    def to_lorentz(self, x) -> torch.Tensor:
        """Map ball points onto the hyperboloid (one extra leading coordinate)."""
        return P.to_lorentz(x, self._c())

    def from_lorentz(self, X) -> torch.Tensor:
        """Map hyperboloid points back into the ball."""
        return P.from_lorentz(X, self._c())

    def egrad2rgrad(self, x, grad, *, dim: int = -1) -> torch.Tensor:  # type: ignore[override]
        """Riemannian gradient ``((1 - c||x||^2)^2 / 4) grad``."""
        _check_dim(dim)
        return P.egrad2rgrad(x, grad, self._c())

    def retraction(self, x, v) -> torch.Tensor:
        """First-order retraction ``proj(x + v)``."""
        return P.retraction(x, v, self._c())

    def random_points(self, n: int, dim: int, max_hyperbolic_radius: float = 2.0, seed: int | None = None,
                      dtype: torch.dtype = torch.float64, device=None) -> torch.Tensor:
        """Random points: uniform directions, hyperbolic radius uniform in ``[0, max]``."""
        return P.random_points(n, dim, max_hyperbolic_radius, seed, self.curvature, dtype, device)

    # -- geoopt hooks: keep the optimizers on hypermem's margins -------------------------
    def projx(self, x: torch.Tensor, *, dim: int = -1) -> torch.Tensor:
        _check_dim(dim)
        return P.project(x, self._c())

    def retr(self, x: torch.Tensor, u: torch.Tensor, *, dim: int = -1) -> torch.Tensor:
        """geoopt's retraction hook: ``proj(x + u)`` at hypermem's margin.

        Parameters
        ----------
        x, u: a point and a tangent vector at it.
        dim: the coordinate axis; only ``-1`` (the last): another is a ``ValueError``.
        """
        _check_dim(dim)
        return P.project(x + u, self._c())

