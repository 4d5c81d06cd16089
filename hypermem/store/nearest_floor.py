"""Whether a text belongs among a store's memories at all: the nearest-neighbour floor of
``parent="auto"``.

``parent="auto"`` files a text under the best candidate its neighbours vote for (or that the
encoder's pair score picks); a text from elsewhere -- a chat turn added to a store of code
notes -- still has a best candidate, and the pair score's threshold, chosen on validation pairs
of one positive to ten negatives, is asked here of the best of thousands of candidates, so it
lets most such texts through (benchmarks/RESULTS.md, "texts from elsewhere stay roots").

What separates a text from elsewhere is how near its nearest *filed* memory is: with ``cos(x, e)`` the cosine of the embedding column and
``F`` the memories in the store's tree (a parent or children; every memory when the store
holds no tree),

    nearest(x) = max_{j in F} cos(x, e_j),

and the filed memories say what "near" means here, by their leave-one-out nearest neighbours
``nearest_{-i}(e_i) = max_{j in F, j != i} cos(e_i, e_j)``.  The floor is their
``FLOOR_QUANTILE`` quantile over a seeded sample of ``FLOOR_SAMPLE`` of them; a text whose
``nearest(x)`` is below it is left a root.  Unfiled roots count for neither: texts from
elsewhere left roots must not lower the floor, nor let a second text like them pass it.  This is a nearest-neighbour novelty test (the
distance to the k-th neighbour as an outlier score, Ramaswamy, Rastogi & Shim, SIGMOD 2000),
its cut set by the quantile of the same statistic on the inliers (a conformal p-value
threshold, Vovk et al. 2005; Laxhammar & Falkman 2015): a text of the store's own kind is cut
with probability about ``FLOOR_QUANTILE``.

The floor is kept while the store's size stays within 10% of the size it was computed at:
the statistic moves slowly, and recomputing it costs ``FLOOR_SAMPLE x N`` cosines.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

__all__ = ["FLOOR_MIN_MEMORIES", "FLOOR_QUANTILE", "FLOOR_SAMPLE", "nearest_floor", "stale"]

FLOOR_QUANTILE: float | None = 0.01
"""The share of a store's own memories whose nearest neighbour is farther than the floor
(``None``: no floor; every text is placed as before)."""

FLOOR_SAMPLE = 512
"""How many stored memories the floor's quantile is read from (seeded)."""

FLOOR_MIN_MEMORIES = 20
"""Below this many memories there is no floor (too few neighbours to say what is near)."""


def nearest_floor(n: int, nearest_of: Callable[[torch.Tensor], torch.Tensor],
                  q: float | None = None, sample: int | None = None, chunk: int = 32) -> float:
    """The floor of a pool of ``n`` memories (the filed ones): the ``q`` quantile (default
    :data:`FLOOR_QUANTILE`) of the leave-one-out nearest-neighbour cosine of a seeded sample of
    ``sample`` of them (default :data:`FLOOR_SAMPLE`).  ``nearest_of(pos)`` gives that cosine
    ``(m,)`` for the pool's entries ``pos`` (itself left out); it is asked ``chunk`` entries at a
    time, so that the cosines held at once are ``chunk x N``, not ``sample x N``.  ``-inf`` (no
    floor) without a quantile or below :data:`FLOOR_MIN_MEMORIES` memories."""
    q = FLOOR_QUANTILE if q is None else q
    if q is None or n < FLOOR_MIN_MEMORIES:
        return -math.inf
    m = min(n, FLOOR_SAMPLE if sample is None else sample)
    pos = torch.randperm(n, generator=torch.Generator().manual_seed(0))[:m].sort().values
    near = torch.cat([nearest_of(pos[s: s + chunk]).to(torch.float64).cpu() for s in range(0, m, chunk)])
    return float(torch.quantile(near, q))


def stale(n: int, computed_at: int | None) -> bool:
    """Whether a floor computed at ``computed_at`` memories is to be computed again at ``n``."""
    return computed_at is None or not 0.9 * computed_at <= n <= 1.1 * computed_at
