"""The distance spread of a store, which calibrates its time term (``recency_weight``).

:func:`distance_spread` is the standard deviation of the distances between up to
:data:`SAMPLE` of the store's memories (spread evenly over its rows, every pair once), in the
distance the store's search ranks by: the shell distance between their unit directions
(``metric="shell"``), or the Poincaré distance between their points (``metric="hyperbolic"``,
the default of a store placed by a hierarchy encoder, whose distances are those of the
encoder's ball of curvature ``1/d``: tens of units, not tenths).  It is how far apart the
embedder puts this store's texts, the scale against which a score term must be weighed (:func:`hypermem.retrieval.scoring.calibrated_time_coef`).  A store
with fewer than :data:`MIN_ROWS` memories uses :data:`FALLBACK_SPREAD`, about all-MiniLM-L6-v2's
on LoCoMo (0.106-0.142 over conversations 0-4, ``benchmarks/bench_locomo.py``).  :class:`Spread` keeps the value until the store changes.

The calibration is a half-life's (``calibrated_time_coef``): it scales ``log w`` so that one
half-life costs ``recency_weight * spread``.  A :class:`~hypermem.temporal.ValidityWindow` is no
half-life: scaled alike, being outside the window costs only ``time_coef * ln(outside_weight)``
(``0.02 * ln 1e-6 ~ -0.28`` with MiniLM), about two spreads, so an expired fact that matches the
query better still outranks the current one.  The score has one time term, so the window cannot keep
full strength beside a calibrated smooth factor; :class:`Spread` warns once per store when it first
calibrates a policy with a window (:func:`window_warning`), naming ``valid_only=True`` (leave the
expired out) and ``time_coef=1.0`` (the seed's full-strength window).
"""

from __future__ import annotations

import math

import torch

from ..geometry.numerics import MIN_WEIGHT
from ..geometry.poincare import pairwise_distance
from ..index import ShellDistance
from ..retrieval.scoring import calibrated_time_coef
from ..temporal import Product, ValidityWindow
from .caller_warning import warn_caller

__all__ = ["FALLBACK_SPREAD", "MIN_ROWS", "SAMPLE", "Spread", "ages", "distance_spread", "window_warning"]

SAMPLE = 256
MIN_ROWS = 8
FALLBACK_SPREAD = 0.13


def distance_spread(state, curvature: float, base_depth: float, metric: str = "shell") -> float:
    """Standard deviation of the distances between sampled memories, in the store's
    ``metric`` (module docstring)."""
    n = state.n
    if n < MIN_ROWS:
        return FALLBACK_SPREAD
    rows = torch.linspace(0, n - 1, min(n, SAMPLE), dtype=torch.float64).round().long().unique()
    i, j = torch.triu_indices(len(rows), len(rows), offset=1)
    if metric == "hyperbolic":
        X = state.points(curvature, rows.to(state.device))
        d = pairwise_distance(X, X, curvature)[i, j]
    else:
        D = state.direction[rows.to(state.device)].to(torch.float64)
        cos = (D @ D.T).clamp(-1.0, 1.0)
        d = ShellDistance(curvature, base_depth)(cos[i, j], None)
    return float(d.std()) if d.numel() > 1 else FALLBACK_SPREAD


def _windows(policy) -> list[ValidityWindow]:
    """The :class:`ValidityWindow` factors of ``policy`` (through nested :class:`Product`)."""
    if isinstance(policy, ValidityWindow):
        return [policy]
    if isinstance(policy, Product):
        return [w for p in policy.policies for w in _windows(p)]
    return []


def ages(policy) -> bool:
    """Whether ``policy`` weighs by age, the thing :func:`calibrated_time_coef` scales: False for
    a :class:`ValidityWindow` alone (or a :class:`Product` of windows), whose term is an
    exclusion (``ln outside_weight`` outside, 0 inside) with no half-life to calibrate, so the
    store keeps the seed's ``time_coef = 1`` for it."""
    if isinstance(policy, ValidityWindow):
        return False
    if isinstance(policy, Product):
        return any(ages(p) for p in policy.policies)
    return True


def window_warning(policy, recency_weight: float, spread: float) -> str | None:
    r"""The warning for a calibrated time term over a policy with a validity window, or None.

    Outside its window a memory's score moves by ``time_coef * ln(max(outside_weight, MIN_WEIGHT))``
    with ``time_coef = recency_weight * spread / ln 2`` (:func:`calibrated_time_coef`), against
    ``ln 1e-6 ~ -13.8`` at the seed's ``time_coef = 1``; None when no window lowers a weight."""
    outs = [max(w.outside_weight, MIN_WEIGHT) for w in _windows(policy)]
    outs = [o for o in outs if o < 1.0]
    if not outs:
        return None
    coef = calibrated_time_coef(recency_weight, spread)
    cost = coef * math.log(min(outs))
    return (f"this store calibrates its time term (recency_weight={recency_weight:g}: time_coef={coef:.4g}), "
            f"which scales a half-life; being outside a ValidityWindow then costs only {cost:.3g} in score "
            f"(against {math.log(min(outs)):.3g} at time_coef=1.0), so an expired fact can outrank the current "
            "one: search with valid_only=True to leave the expired out, or create the store with "
            "time_coef=1.0 (docs/store.md, 'A calibrated time term')")


class Spread:
    """:func:`distance_spread` of a store, recomputed only when its ``state.version`` changes
    (:func:`window_warning` given once a store, at the first calibration over a window)."""

    def __init__(self) -> None:
        self.version, self.value, self.warned = -1, FALLBACK_SPREAD, False

    def of(self, memory) -> float:
        st = memory.state
        if self.version != st.version:
            self.value = distance_spread(st, memory.curvature, memory.base_depth, memory.metric)
            self.version = st.version
            message = None if self.warned or memory.recency_weight is None else \
                window_warning(memory.decay, memory.recency_weight, self.value)
            if message:
                self.warned = True
                warn_caller(message)
        return self.value
