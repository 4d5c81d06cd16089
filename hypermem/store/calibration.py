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
"""

from __future__ import annotations

import torch

from ..geometry.poincare import pairwise_distance
from ..index import ShellDistance

__all__ = ["FALLBACK_SPREAD", "MIN_ROWS", "SAMPLE", "Spread", "distance_spread"]

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


class Spread:
    """:func:`distance_spread` of a store, recomputed only when its ``state.version`` changes."""

    def __init__(self) -> None:
        self.version, self.value = -1, FALLBACK_SPREAD

    def of(self, memory) -> float:
        st = memory.state
        if self.version != st.version:
            self.value = distance_spread(st, memory.curvature, memory.base_depth, memory.metric)
            self.version = st.version
        return self.value
