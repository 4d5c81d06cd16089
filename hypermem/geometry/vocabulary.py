r"""geoopt's method names on hypermem's numerics: one ball, one set of answers.

:class:`~hypermem.geometry.PoincareBall` subclasses :class:`geoopt.PoincareBall` so that
:class:`geoopt.ManifoldParameter` and geoopt's Riemannian optimizers work with it.  geoopt's
own formulas clamp ``artanh`` at ``1 - 1e-7`` in every dtype and project onto a margin of
``1e-5`` (float64) or ``4e-3`` (float32), so a float64 point at depth 20 would be at
distance 20.0 by ``distance`` and 16.8 by ``dist``.  This mixin re-implements every
geoopt method whose formula has a pole or a projection with the functions of
:mod:`hypermem.geometry.poincare` (and :mod:`~hypermem.geometry.numerics`'s per-dtype
clamps and margins):

* ``dist``, ``dist2``, ``dist0``, ``lambda_x``, ``inner``, ``norm``;
* ``mobius_sub``, ``mobius_coadd``, ``mobius_cosub``, ``mobius_pointwise_mul``,
  ``mobius_matvec``, ``mobius_fn_apply``, ``mobius_fn_apply_chain`` (the last four by
  the identities of Ganea et al. 2018, Sec. 3: ``M ⊗ x = exp_0(M log_0(x))``,
  ``f^⊗(x) = exp_0(f(log_0(x)))``);
* ``geodesic`` (both argument orders, see :meth:`geodesic`), ``geodesic_unit``,
  ``transp``, ``dist2plane``, ``weighted_midpoint`` and the point check of
  :class:`geoopt.ManifoldParameter`.

The methods left to geoopt are listed in :data:`RATIONAL_INHERITED`: rational formulas
without a clamp or a projection (gyration, antipode, stereographic maps, the transports
at the origin), or compositions of the methods above (``retr_transp``,
``expmap_transp``, ``random_normal``...).
"""

from __future__ import annotations

import numbers

import torch
from geoopt.utils import drop_dims, list_range

from . import poincare_functions as P
from .conversion import as_points, as_tensor, sqrt_curvature
from .numerics import safe_norm, sech2, sq_norm, tiny

RATIONAL_INHERITED = frozenset({
    "gyration", "antipode", "sproj", "inv_sproj", "transp0", "transp0back", "proju", "origin",
    "transp_follow_retr", "transp_follow_expmap", "expmap_transp", "retr_transp", "random_normal",
    "random", "wrapped_normal", "component_inner", "check_point", "assert_check_point", "check_vector",
    "assert_check_vector", "check_point_on_manifold", "assert_check_point_on_manifold",
    "check_vector_on_tangent", "assert_check_vector_on_tangent", "unpack_tensor", "pack_point",
})
"""geoopt methods kept as they are: exact rational formulas, or built on the overridden ones."""


def check_dim(dim: int) -> None:
    if dim != -1:
        raise ValueError(f"hypermem's PoincareBall reduces over the last dimension only (dim=-1), got dim={dim}")


def _keep(d: torch.Tensor, keepdim: bool) -> torch.Tensor:
    return d.unsqueeze(-1) if keepdim else d


def _is_scalar(t) -> bool:
    if isinstance(t, numbers.Real):
        return True
    return hasattr(t, "ndim") and t.ndim == 0


class GeooptVocabulary:
    """geoopt's ``PoincareBall`` API computed with hypermem's numerics (see the module docstring)."""

    # -- distances and the metric ---------------------------------------------------
    def dist(self, x, y, *, keepdim: bool = False, dim: int = -1) -> torch.Tensor:
        """Same as :meth:`distance` (geoopt's name)."""
        check_dim(dim)
        return _keep(self.distance(x, y), keepdim)

    def dist2(self, x, y, *, keepdim: bool = False, dim: int = -1) -> torch.Tensor:
        return self.dist(x, y, keepdim=keepdim, dim=dim) ** 2

    def dist0(self, x, *, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
        """Same as :meth:`distance_to_origin` (geoopt's name)."""
        check_dim(dim)
        return _keep(self.distance_to_origin(x), keepdim)

    def lambda_x(self, x, *, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
        """Conformal factor, shape ``x.shape[:-1]`` (geoopt's default; :meth:`conformal_factor`
        keeps the last dimension)."""
        check_dim(dim)
        return P.conformal_factor(x, self._c(), keepdim=keepdim)

    def inner(self, x, u, v=None, *, keepdim: bool = False, dim: int = -1) -> torch.Tensor:
        """Riemannian inner product ``lambda_x^2 <u, v>`` of tangent vectors at ``x``."""
        check_dim(dim)
        x, u = as_points(x, u, names=("x", "u"))
        v = u if v is None else as_tensor(v, dtype=u.dtype, device=u.device, name="v")
        lam = P.conformal_factor(x, self._c(), keepdim=keepdim)
        return lam**2 * (u * v).sum(-1, keepdim=keepdim)

    def norm(self, x, u, *, keepdim: bool = False, dim: int = -1) -> torch.Tensor:
        """Riemannian norm ``lambda_x ||u||`` of a tangent vector at ``x``."""
        check_dim(dim)
        x, u = as_points(x, u, names=("x", "u"))
        return P.conformal_factor(x, self._c(), keepdim=keepdim) * u.norm(dim=-1, keepdim=keepdim)

    def _check_point_on_manifold(self, x, *, atol=1e-5, rtol=1e-5, dim: int = -1):
        check_dim(dim)
        if bool(P.is_inside(x, self._c()).all()):
            return True, None
        return False, f"'x' norm lies out of the ball of radius {self.radius:.6g} (or is not finite)"

    # -- gyrovector operations ----------------------------------------------------------
    def _out(self, res: torch.Tensor, project: bool) -> torch.Tensor:
        return P.project(res, self._c()) if project else res

    def mobius_sub(self, x, y, *, dim: int = -1, project: bool = True) -> torch.Tensor:
        """``x ⊖ y = x ⊕ (-y)``."""
        check_dim(dim)
        x, y = as_points(x, y)
        return self._out(P.mobius_add(x, -y, self._c()), project)

    def mobius_coadd(self, x, y, *, dim: int = -1, project: bool = True) -> torch.Tensor:
        """Möbius coaddition (geoopt's rational formula, hypermem's projection)."""
        check_dim(dim)
        x, y = as_points(x, y)
        return self._out(super().mobius_coadd(x, y, dim=-1, project=False), project)

    def mobius_cosub(self, x, y, *, dim: int = -1, project: bool = True) -> torch.Tensor:
        """Möbius cosubtraction (geoopt's rational formula, hypermem's projection)."""
        check_dim(dim)
        x, y = as_points(x, y)
        return self._out(super().mobius_cosub(x, y, dim=-1, project=False), project)

    def mobius_fn_apply(self, fn, x, *args, dim: int = -1, project: bool = True, **kwargs) -> torch.Tensor:
        """Möbius version of ``fn``: ``exp_0(fn(log_0(x)))``."""
        check_dim(dim)
        c = self._c()
        return self._out(P.expmap0(fn(P.logmap0(x, c), *args, **kwargs), c), project)

    def mobius_fn_apply_chain(self, x, *fns, project: bool = True, dim: int = -1) -> torch.Tensor:
        """``exp_0(f_n(...f_1(log_0(x))))``; ``x`` itself without functions."""
        check_dim(dim)
        if not fns:
            return x
        c = self._c()
        v = P.logmap0(x, c)
        for fn in fns:
            v = fn(v)
        return self._out(P.expmap0(v, c), project)

    def mobius_pointwise_mul(self, w, x, *, dim: int = -1, project: bool = True) -> torch.Tensor:
        """``w ⊙ x = exp_0(w * log_0(x))``."""
        x, w = as_points(x, w, names=("x", "w"))
        return self.mobius_fn_apply(lambda v: w * v, x, dim=dim, project=project)

    def mobius_matvec(self, m, x, *, dim: int = -1, project: bool = True) -> torch.Tensor:
        """``M ⊗ x = exp_0(M log_0(x))`` for a matrix ``m`` of shape ``(out, in)``."""
        (x,) = as_points(x, names=("x",))
        m = as_tensor(m, dtype=x.dtype, device=x.device, name="m")
        return self.mobius_fn_apply(lambda v: v @ m.transpose(-1, -2), x, dim=dim, project=project)

    # -- curves, transport, planes, means -------------------------------------------------
    def geodesic(self, *args, dim: int = -1, **kwargs) -> torch.Tensor:
        r"""Point at fraction ``t`` of the geodesic from ``x`` (``t = 0``) to ``y`` (``t = 1``),
        ``x ⊕_c (t ⊗_c ((-x) ⊕_c y))`` (Ganea et al. 2018, eq. 6): :func:`~hypermem.geometry.poincare.geodesic`.

        Both argument orders are accepted: geoopt's ``geodesic(t, x, y)`` and the NumPy
        reference's ``geodesic(x, y, t)``.  The order is read from which end holds a
        scalar (a number or a 0-dimensional tensor/array), or, for arrays, which end has a
        last dimension of 1 while the other points do not; keywords ``t=``, ``x=``,
        ``y=`` always work.  When nothing tells them apart (a 1-dimensional ball with
        arrays for all three), geoopt's order ``(t, x, y)`` is used.
        """
        check_dim(dim)
        t, x, y = _geodesic_args(args, kwargs)
        x, y = as_points(x, y)
        t = as_tensor(t, dtype=x.dtype, device=x.device, name="t")
        if t.dim() == max(x.dim(), y.dim()) and t.shape[-1] == 1:
            t = t.squeeze(-1)  # geoopt's layout: t broadcasts against the points themselves
        return P.geodesic(t, x, y, self._c())

    def geodesic_unit(self, t, x, u, *, dim: int = -1, project: bool = True) -> torch.Tensor:
        """geoopt's unit-speed curve ``x ⊕ (tanh(sqrt(c) t / 2) / sqrt(c)) u / ||u||``, by
        :func:`~hypermem.geometry.poincare.mobius_add_from_gaps` with the second point's gap
        ``sech^2(sqrt(c) t / 2)`` (exact where ``tanh`` rounds to 1: see ``expmap``)."""
        check_dim(dim)
        x, u = as_points(x, u, names=("x", "u"))
        c = self._c()
        sc = sqrt_curvature(c)
        t = as_tensor(t, dtype=x.dtype, device=x.device, name="t")
        a = sc * t / 2.0
        z = torch.tanh(a) / sc * (u / safe_norm(u, keepdim=True))
        return self._out(P.mobius_add_from_gaps(x, z, P.boundary_gap(sq_norm(x, keepdim=True), c), sech2(a), c),
                         project)

    def transp(self, x, y, v, *, dim: int = -1) -> torch.Tensor:
        """Parallel transport ``P_{x->y}(v) = (lambda_x / lambda_y) gyr[y, -x] v``."""
        check_dim(dim)
        x, y, v = as_points(x, y, v, names=("x", "y", "v"))
        c = self._c()
        ratio = P.conformal_factor(x, c, keepdim=True) / P.conformal_factor(y, c, keepdim=True)
        return self.gyration(y, -x, v) * ratio

    def dist2plane(self, x, p, a, *, dim: int = -1, keepdim: bool = False, signed: bool = False,
                   scaled: bool = False) -> torch.Tensor:
        r"""Distance from ``x`` to the gyroplane through ``p`` with normal ``a`` (Ganea et al. 2018,
        Thm. 5): ``(1/sqrt(c)) arsinh(2 sqrt(c) |<(-p) ⊕ x, a>| / ((1 - c ||(-p) ⊕ x||^2) ||a||))``."""
        check_dim(dim)
        x, p, a = as_points(x, p, a, names=("x", "p", "a"))
        c = self._c()
        sc = sqrt_curvature(c)
        diff = P.mobius_add(-p, x, c)
        dot = (diff * a).sum(-1, keepdim=keepdim)
        if not signed:
            dot = dot.abs()
        a_norm = a.norm(dim=-1, keepdim=keepdim)
        den = ((1.0 - c * sq_norm(diff, keepdim=keepdim)) * a_norm).clamp_min(tiny(x.dtype))
        d = torch.asinh(2.0 * sc * dot / den) / sc
        return d * a_norm if scaled else d

    def weighted_midpoint(self, xs, weights=None, *, reducedim=None, dim: int = -1, keepdim: bool = False,
                          lincomb: bool = False, posweight: bool = False, project: bool = True) -> torch.Tensor:
        r"""Weighted gyro-midpoint (Ungar 2010), geoopt's options:
        ``m = (1/2) ⊗ (sum w_i lambda_i x_i / sum w_i (lambda_i - 1))``; ``lincomb`` scales
        by the total weight instead of averaging."""
        check_dim(dim)
        (xs,) = as_points(xs, names=("xs",))
        c = self._c()
        if reducedim is None:
            reducedim = list_range(xs.dim())
            reducedim.pop(-1)
        gamma = P.conformal_factor(xs, c, keepdim=True)
        if weights is None:
            w = torch.tensor(1.0, dtype=xs.dtype, device=xs.device)
        else:
            w = as_tensor(weights, dtype=xs.dtype, device=xs.device, name="weights").unsqueeze(-1)
        if posweight and bool(w.lt(0).any()):
            xs = torch.where(w.lt(0), self.antipode(xs), xs)
            w = w.abs()
        den = ((gamma - 1.0) * w).sum(reducedim, keepdim=True)
        den = torch.where(den < 0, -1.0, 1.0) * den.abs().clamp_min(1e-10)
        two_mean = (gamma * w * xs).sum(reducedim, keepdim=True) / den
        mean = P.mobius_scalar_mul(0.5, two_mean, c)
        if lincomb:
            if w.numel() == 1:
                alpha = w.clone()
                for d in reducedim:
                    alpha = alpha * xs.size(d)
            else:
                alpha = torch.broadcast_tensors(w, gamma)[0].sum(reducedim, keepdim=True)
            mean = P.mobius_scalar_mul(alpha.squeeze(-1), mean, c)
        if not keepdim:
            mean = drop_dims(mean, reducedim)
        return self._out(mean, project)


def _geodesic_args(args: tuple, kwargs: dict):
    """``(t, x, y)`` from geoopt's ``(t, x, y)`` or the reference's ``(x, y, t)`` (see
    :meth:`GeooptVocabulary.geodesic`)."""
    unknown = set(kwargs) - {"t", "x", "y"}
    if unknown:
        raise TypeError(f"geodesic() got unexpected keyword arguments {sorted(unknown)}")
    if len(args) + len(kwargs) != 3:
        raise TypeError(f"geodesic() takes three arguments t, x, y (or x, y, t), got {len(args) + len(kwargs)}")
    if kwargs:
        names = [n for n in ("x", "y", "t") if n not in kwargs] if "t" in kwargs else \
            [n for n in ("t", "x", "y") if n not in kwargs]
        vals = dict(zip(names, args), **kwargs)
        return vals["t"], vals["x"], vals["y"]
    a, b, z = args
    if _is_scalar(a) and not _is_scalar(z):
        return a, b, z
    if _is_scalar(z) and not _is_scalar(a):
        return z, a, b

    def last(v):
        return getattr(v, "shape", (None,))[-1] if getattr(v, "ndim", 1) else None

    if last(z) == 1 and last(a) not in (None, 1):
        return z, a, b
    return a, b, z
