r"""Distance models for :func:`~hypermem.index.topk.exact_topk`: distance as a function of
the cosine ``s`` between a query direction and a stored direction.

* Shell metric (both points moved to the reference radius ``rho``; law of cosines):
  ``g(s) = (2 / sqrt(c)) arsinh(sinh(sqrt(c) rho) sqrt((1 - s) / 2))``, the same for
  every key, with inverse ``g^{-1}(y) = 1 - 2 (sinh(sqrt(c) y / 2) / sinh(sqrt(c) rho))^2``
  for ``y >= 0`` (no ``s`` reaches ``y < 0``).
* Hyperbolic metric (the memory's actual point at Euclidean norm ``r_j``, the query at
  ``r_q``; Nickel & Kiela 2017, eq. 1):
  ``||q - p||^2 = (r_q - r_j)^2 + 2 r_q r_j (1 - s)`` and
  ``g = (1 / sqrt(c)) arcosh(1 + 2c ||q - p||^2 / ((1 - c r_q^2)(1 - c r_j^2)))``.
  ``1 - c r^2 = 1 / cosh^2(sqrt(c) R / 2)`` is taken from the hyperbolic radius ``R``,
  which keeps it precise near the boundary.

The formulas have their home in :mod:`hypermem.geometry.poincare`: the hyperbolic model
evaluates :func:`~hypermem.geometry.poincare.arcosh_distance` there; the shell model keeps
an in-place copy of :func:`~hypermem.geometry.poincare.shell_distance_from_half_chord` (it
runs on every chunk of the search's hot loop, where the generic form would allocate two
more ``(B, chunk)`` blocks), checked against it by ``tests/test_formula_contract.py``.
"""

from __future__ import annotations

import math

import torch

from ..geometry.poincare import arcosh_distance, shell_scale

_SLACK = {torch.float32: 1e-5, torch.float64: 1e-12}


class ShellDistance:
    """``g(s)`` of the shell metric at reference radius ``depth`` (key-independent)."""

    def __init__(self, curvature: float, depth: float):
        self.sc = math.sqrt(curvature)
        self.scale = shell_scale(depth, curvature)

    def __call__(self, s: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        half = (1.0 - s).mul_(0.5).clamp_(min=0.0).sqrt_()
        return torch.asinh(half.mul_(self.scale)).mul_(2.0 / self.sc)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Smallest cosine with ``g(s) <= y`` (``+inf`` where ``y < 0``), minus a rounding slack."""
        t = torch.sinh(y.clamp_min(0.0) * (self.sc / 2.0)) / self.scale
        s = 1.0 - 2.0 * t * t
        s = s - _SLACK.get(s.dtype, 1e-5) * (1.0 + s.abs())
        s = torch.where(y < 0, torch.full_like(s, math.inf), s)
        return torch.nan_to_num(s, nan=-math.inf, neginf=-math.inf)


class HyperbolicDistance:
    """``g(s, j)`` of the hyperbolic metric: query norms ``(B,)``, key norms and
    hyperbolic radii ``(N,)``."""

    def __init__(self, curvature: float, query_radius: torch.Tensor, key_radius: torch.Tensor):
        self.c = curvature
        self.sc = math.sqrt(curvature)
        self.qn = torch.tanh(self.sc * query_radius / 2.0) / self.sc  # Euclidean norms
        self.qa = torch.cosh(self.sc * query_radius / 2.0).pow(-2)     # 1 - c r_q^2
        self.kn = torch.tanh(self.sc * key_radius / 2.0) / self.sc
        self.ka = torch.cosh(self.sc * key_radius / 2.0).pow(-2)

    def __call__(self, s: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        kn, ka = self.kn[idx], self.ka[idx]
        qn, qa = self.qn.unsqueeze(1), self.qa.unsqueeze(1)
        sq = (qn - kn).pow(2) + 2.0 * qn * kn * (1.0 - s).clamp_min(0.0)
        return arcosh_distance(sq, qa, ka, self.c)


class Optimistic:
    r"""``g(min(s + delta, 1))``: a distance model that never exceeds ``g`` at any product
    within ``delta`` of ``s`` (``g`` decreasing), with inverse ``g^{-1}(y) - delta``.

    Used by :func:`hypermem.index.rescore.mirrored_topk`: when ``s`` is a float32 product
    whose error against the float64 one is at most ``delta``, the score ``b - g(s + delta)``
    is an upper bound of the float64 score (up to the float32 evaluation of ``g``), which is
    what lets a float32 scan certify its candidates."""

    def __init__(self, distance, delta: float):
        self.distance, self.delta = distance, float(delta)

    def __call__(self, s: torch.Tensor, idx: torch.Tensor | None = None) -> torch.Tensor:
        return self.distance((s + self.delta).clamp_(max=1.0), idx)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """Smallest product whose optimistic distance is at most ``y``."""
        return self.distance.inverse(y) - self.delta
