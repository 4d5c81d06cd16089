"""Numerical guards shared by every geometric function.

Working close to the boundary of the Poincaré ball is where hyperbolic code breaks:
``1 - c||x||^2`` cancels, ``artanh`` and ``arcosh`` reach their poles, and the norm has
no gradient at the origin.  This module holds the per-dtype constants and the clamped
special functions that the rest of :mod:`hypermem.geometry` uses.

Ball margin
-----------
A point ``x`` is kept at ``sqrt(c) * ||x|| <= 1 - margin(dtype)``:

==========  ==========  ==============================================
dtype       margin      largest hyperbolic radius ``2 artanh(1 - m)``
==========  ==========  ==============================================
float16     1e-2        ~5.3
bfloat16    2e-2        ~4.6
float32     1e-3        ~7.6
float64     1e-10       ~23.7
==========  ==========  ==============================================

float32 carries about 7 significant digits, so ``1 - ||x||^2`` near ``1 - 1e-3`` still
has four correct digits; float64 keeps six at ``1 - 1e-10``.  geoopt clamps ``artanh``
at ``1 - 1e-7`` in every dtype, which caps float64 distances near 16.6; hypermem's
dtype-aware clamps keep the whole float64 range (needed by deep trees, Sarkar 2011).

Half precision
--------------
float16 and bfloat16 are too short for the formulas themselves (``1 + 2|x - y|^2 / ((1 -
|x|^2)(1 - |y|^2))`` passes float16's 65504 near the boundary, ``sinh`` of a depth above 11
overflows it, bfloat16's 8-bit mantissa loses ``1 - |x|^2``): :func:`half_as_float32` makes a
geometry function compute in float32 and return the input's dtype (see ``docs/numerics.md``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from .conversion import check_curvature

_MARGINS = {
    torch.float16: 1e-2,
    torch.bfloat16: 2e-2,
    torch.float32: 1e-3,
    torch.float64: 1e-10,
}

# Distance from +-1 at which artanh's argument is clamped (smallest step representable
# below 1 in each dtype, a little enlarged).
_ARTANH_EPS = {
    torch.float16: 1e-3,
    torch.bfloat16: 8e-3,
    torch.float32: 1e-7,
    torch.float64: 1e-15,
}


def _clamp_gap(e: float, dtype: torch.dtype) -> float:
    e = 1.0 - float(torch.tensor(1.0 - e, dtype=dtype))  # the clamp as the dtype rounds it (1.19e-7 in float32)
    return e * (2.0 - e)


# Floor of the boundary gap 1 - c||x||^2 (see gap_floor), a plain dict so compiled code reads it freely.
_GAP_FLOOR = {dtype: _clamp_gap(e, dtype) for dtype, e in _ARTANH_EPS.items()}

# Floor for squared norms before a square root, so gradients stay finite at 0.
_TINY = {
    torch.float16: 1e-7,
    torch.bfloat16: 1e-7,
    torch.float32: 1e-30,
    torch.float64: 1e-300,
}


MIN_WEIGHT = 1e-6
"""Floor of a temporal weight before its logarithm enters a score (``ln 1e-6 ~ -13.8``):
the smallest weight any built-in policy of :mod:`hypermem.temporal` returns and the floor
of :func:`hypermem.retrieval.scoring.score_bias`.  Defined here, below both, so the two
share one value without importing each other."""


def ball_margin(dtype: torch.dtype) -> float:
    """Relative margin ``m`` that keeps points at ``sqrt(c)||x|| <= 1 - m`` for ``dtype``."""
    return _MARGINS.get(dtype, 1e-3)


def tiny(dtype: torch.dtype) -> float:
    """Smallest squared norm treated as non-zero for ``dtype``."""
    return _TINY.get(dtype, 1e-30)


def gap_floor(dtype: torch.dtype) -> float:
    """Floor of the boundary gap ``1 - c||x||^2``: ``e (2 - e)``, the gap of a point at the
    radius ``(1 - e) / sqrt(c)`` where :func:`artanh` clamps its argument (``e = 1e-7`` in
    float32, ``1e-15`` in float64: floors ``2e-7`` and ``2e-15``).  A point on or outside the
    boundary is thereby seen at the same clamp by the arcosh distance as by ``d(0, x) =
    2 artanh(sqrt(c)||x||) / sqrt(c)``; every point within the margin has a larger gap
    (``2e-3`` in float32, ``2e-10`` in float64), so none of them is changed."""
    return _GAP_FLOOR.get(dtype, _GAP_FLOOR[torch.float32])


_MAX_RADIUS: dict[tuple[torch.dtype, float], float] = {}
"""(dtype, curvature) -> :func:`max_radius`, for float curvatures already checked (a store asks
at every add)."""


def max_radius(dtype: torch.dtype, curvature: float = 1.0) -> float:
    """Largest hyperbolic distance from the origin representable inside the margin.

    ``r_max = (2 / sqrt(c)) * artanh(1 - margin)``.  Remembered per ``(dtype, c)`` for a
    float ``c`` (the value is the same computation's; an invalid ``c`` is refused each time).
    """
    key = (dtype, curvature) if type(curvature) is float else None
    r = _MAX_RADIUS.get(key) if key is not None else None
    if r is not None:
        return r
    m = ball_margin(dtype)
    t = torch.tensor(1.0 - m, dtype=torch.float64)
    r = float(2.0 * torch.atanh(t)) / math.sqrt(check_curvature(curvature))
    if key is not None and len(_MAX_RADIUS) < 4096:
        _MAX_RADIUS[key] = r
    return r


def artanh(x: torch.Tensor) -> torch.Tensor:
    """``artanh(x) = 0.5 * log((1 + x) / (1 - x))`` with ``|x|`` clamped below 1.

    The clamp is dtype-aware (``1 - 1e-15`` in float64, ``1 - 1e-7`` in float32), so the
    value and the gradient ``1 / (1 - x^2)`` stay finite.
    """
    eps = _ARTANH_EPS.get(x.dtype, 1e-7)
    x = x.clamp(-1.0 + eps, 1.0 - eps)
    return 0.5 * (torch.log1p(x) - torch.log1p(-x))


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh`` with its argument clamped to [-15, 15] (tanh is 1 to float64 precision there)."""
    return x.clamp(-15.0, 15.0).tanh()


def x_over_tanh(a: torch.Tensor) -> torch.Tensor:
    """``a / tanh(a)`` for ``a >= 0``, 1 at ``a = 0`` (the series ``1 + a^2 / 3``, whose next term
    ``-a^4 / 45`` is below float64's rounding for ``a < 1e-4``), with a finite gradient everywhere."""
    small = a < 1e-4
    safe = torch.where(small, 1.0, a)
    return torch.where(small, 1.0 + a * a / 3.0, safe / torch.tanh(safe))


def sech2(a: torch.Tensor) -> torch.Tensor:
    """``sech^2(a) = 1 - tanh^2(a) = 4 e^{-2|a|} / (1 + e^{-2|a|})^2``: the gap ``1 - tanh^2`` that
    ``1 - tanh(a)^2`` loses once ``tanh(a)`` rounds to 1 (``|a| > 19`` in float64), finite with a
    finite gradient for every ``a`` (``cosh(a)^-2`` overflows past 710)."""
    e = torch.exp(-2.0 * a.abs())
    return 4.0 * e / (1.0 + e) ** 2


def arcosh1p(u: torch.Tensor) -> torch.Tensor:
    """``arcosh(1 + u) = log1p(u + sqrt(u (u + 2)))`` for ``u >= 0``.

    Written in terms of ``u = z - 1`` so that small distances keep full relative
    precision (``arcosh(z)`` loses half the digits when ``z`` is near 1).  ``u <= 0``
    gives exactly 0 (so ``d(x, x) = 0``); the formula itself sees ``u`` clamped to the
    dtype's smallest positive (subnormal) float, which changes no positive ``u`` and keeps
    the gradient finite (and zero) at ``u = 0``.  (A floor at ``tiny(dtype)`` turned
    ``u = 2.5e-302`` into ``1e-300``: ``sqrt(2 tiny) / sqrt(c)`` gave 1.41 for a distance
    of 0.22 at ``c = 1e-300``.)
    """
    fin = torch.finfo(u.dtype)
    v = u.clamp_min(fin.tiny * fin.eps)
    return torch.where(u > 0, torch.log1p(v + torch.sqrt(v * (v + 2.0))), torch.zeros_like(v))


def asinh_exp(t: torch.Tensor) -> torch.Tensor:
    """``arsinh(e^t)`` without forming ``e^t``: ``t + log1p(sqrt(1 + e^{-2t}))`` for ``t > 0``
    (``arsinh(y) = log y + log(1 + sqrt(1 + y^{-2}))``), ``arsinh(e^t)`` for ``t <= 0``.

    Finite, with a finite gradient, for every ``t`` (``-inf`` gives 0): what a shell
    distance needs when ``sinh(sqrt(c) rho)`` overflows but the distance does not.
    """
    hi = t.clamp_min(0.0)
    lo = t.clamp_max(0.0)
    return torch.where(t > 0, hi + torch.log1p(torch.sqrt(1.0 + torch.exp(-2.0 * hi))), torch.asinh(torch.exp(lo)))


def exp_range(dtype: torch.dtype) -> float:
    """Largest ``a`` with ``sinh(a)`` (and ``cosh``, ``e^a / 2``) finite in ``dtype``:
    ``log(max(dtype))`` (709.78 in float64, 88.72 in float32)."""
    return math.log(torch.finfo(dtype).max)


def safe_norm(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """Euclidean norm ``sqrt(sum x_i^2)``, ``sqrt(tiny)`` where the sum is exactly 0 (the origin, or
    a vector whose squares underflow: below ~3e-23 in float32, ~1e-162 in float64), so its gradient
    is finite (0) there.  No other vector is floored: a floor at ``tiny`` (``1e-30`` in float32)
    gave every float32 vector shorter than 1e-15 the norm 1e-15 (``distance_to_origin`` 2e-15 with
    gradient 0 at ``||x|| = 1e-20``).  Squares below the dtype's normal range (``||x|| < 1e-19`` /
    ``1e-154``) are subnormal and keep fewer digits."""
    sq = x.pow(2).sum(dim=dim, keepdim=keepdim)
    return torch.where(sq > 0, sq, tiny(x.dtype)).sqrt()


def rescaled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(xs, s, nonzero)`` with ``x = s * xs`` over the last dimension: ``s = max_i |x_i|`` (1 for a
    zero row, ``nonzero`` False there), so ``||xs||`` lies in ``[1, sqrt(d)]`` and
    ``torch.linalg.vector_norm(xs)`` neither overflows nor underflows (``sum x_i^2`` of
    ``[3e19, 4e19]`` is ``inf`` in float32, and the point became ``x / inf = 0``).  ``+-inf``
    coordinates are first clamped to the dtype's largest finite value, so a row with infinite
    coordinates keeps their direction; NaN propagates.  Two passes over ``x`` and no host sync."""
    top = torch.finfo(x.dtype).max
    x = x.clamp(-top, top)
    m = torch.linalg.vector_norm(x, ord=math.inf, dim=-1, keepdim=True)
    nonzero = m > 0
    s = torch.where(nonzero, m, 1.0)
    return x / s, s, nonzero


def sq_norm(x: torch.Tensor, dim: int = -1, keepdim: bool = False) -> torch.Tensor:
    """Squared Euclidean norm ``sum x_i^2``."""
    return x.pow(2).sum(dim=dim, keepdim=keepdim)


HALF_DTYPES = (torch.float16, torch.bfloat16)
"""The half-precision dtypes that :func:`half_as_float32` computes in float32."""

_F = TypeVar("_F", bound=Callable[..., Any])


def _up(a: Any) -> Any:
    return a.float() if isinstance(a, torch.Tensor) and a.dtype in HALF_DTYPES else a


def _down(r: Any, dtype: torch.dtype) -> Any:
    """A float32 result back in ``dtype``, clamped to its largest finite value first (the float32
    value is capped by the float32 clamps; NaN stays NaN); other results unchanged."""
    if isinstance(r, torch.Tensor) and r.dtype == torch.float32:
        top = torch.finfo(dtype).max
        return r.clamp(-top, top).to(dtype)
    if isinstance(r, tuple):
        return tuple(_down(v, dtype) for v in r)
    return r


def half_as_float32(fn: _F) -> _F:
    """Decorator: a call with a float16 / bfloat16 tensor argument computes in float32 (its
    half tensors, curvature included, converted with ``.float()``, differentiably) and returns
    its float32 results in the half dtype (the promotion of the tensor arguments' dtypes:
    float16 with float32 gives float32, as torch promotes, while a 0-d tensor such as a
    learnable curvature leaves the dtype as it is), clamped to that dtype's range.

    float32 and float64 calls pass straight through (one dtype check per tensor argument, no
    copy).  The one home of the half-precision policy of :mod:`hypermem.geometry`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for a in args:  # the float32 / float64 path: this loop, then the call
            if isinstance(a, torch.Tensor) and a.dtype in HALF_DTYPES:
                break
        else:
            if not kwargs or not any(isinstance(a, torch.Tensor) and a.dtype in HALF_DTYPES
                                     for a in kwargs.values()):
                return fn(*args, **kwargs)
        half = torch.float16 if any(isinstance(a, torch.Tensor) and a.dtype == torch.float16
                                    for a in (*args, *kwargs.values())) else torch.bfloat16
        for a in (*args, *kwargs.values()):  # float32 next to a half tensor gives float32, as torch promotes;
            if isinstance(a, torch.Tensor) and a.is_floating_point() and a.dim() > 0:   # a 0-d one (a curvature) does not
                half = torch.promote_types(half, a.dtype)
        out = fn(*[_up(a) for a in args], **{k: _up(a) for k, a in kwargs.items()})
        return _down(out, half) if half in HALF_DTYPES else out
    return wrapper  # type: ignore[return-value]
