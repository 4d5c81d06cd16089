r"""The encoder's subsumption score of query vectors against every stored vector, in one matrix product.

For a hierarchy encoder of curvature ``c`` (the ball) or none (the twin) and ``lambda`` its
ranking weight (``ranking_lambda``: chosen on validation for ranking parents; the centripetal
weight when none was chosen), "``t`` is-a ``p``" scores (HiT, He et al. NeurIPS 2024, eq. 5;
:func:`hypermem.geometry.subsumption.score_from_terms`)::

    s(t, p) = -( d(t, p) + lambda (h(p) - h(t)) )

    ball:  d = (1/sqrt(c)) arcosh(1 + 2c ||t - p||^2 / ((1 - c|t|^2)(1 - c|p|^2))),  h(x) = d(0, x)
    twin:  d = ||t - p||,  h(x) = ||x||

with ``||t - p||^2 = |t|^2 + |p|^2 - 2 <t, p>``: the inner products of a batch of queries with
all ``n`` stored vectors are one ``(B, d) x (d, n)`` product, and ``|p|^2``, ``1 - c|p|^2`` and
``h(p)`` of the stored vectors are kept until the store changes (``state.version``), so a query
costs ``O(n d)`` multiply-adds and no ``(n, d)`` temporary.  In float64 (the store's embedding
column) the product form's absolute error on ``||t - p||^2`` is about ``1e-16 (|t|^2 + |p|^2)``,
far below the score differences that rank parents.  An encoder without ``curvature`` /
``centripetal_weight`` attributes is scored by its own ``subsumption_scores``.
"""

from __future__ import annotations

import torch

from ..geometry.poincare import arcosh_distance, boundary_gap, distance_to_origin
from ..geometry.subsumption import score_from_terms

__all__ = ["SubsumptionScan"]


class SubsumptionScan:
    """Scores against a store's ``embedding`` column, with the stored terms cached per version."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.terms: tuple[torch.Tensor, ...] = ()

    @staticmethod
    def _terms(x: torch.Tensor, c: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(|x|^2, 1 - c|x|^2, h(x))`` of rows ``x`` (the gap is unused in R^d), from one pass
        over ``x`` (``h`` depends on the norm only: it is taken of the norm as a 1-d point)."""
        norm = torch.linalg.vector_norm(x, dim=-1)
        sq = norm * norm
        if c is None:
            return sq, sq, norm
        return sq, boundary_gap(sq, c), distance_to_origin(norm[:, None], c)

    def stored(self, state, enc) -> tuple[torch.Tensor, ...]:
        """The cached terms of rows ``0 .. n-1`` of ``state.embedding``."""
        key = (id(state), state.version, state.n, enc.geometry, enc.curvature)
        if key != self.key:
            self.terms = self._terms(state.embedding_column().to(torch.float64), enc.curvature)
            self.key = key
        return self.terms

    def scores(self, enc, queries: torch.Tensor, parents: torch.Tensor,
               parent_terms: tuple[torch.Tensor, ...] | None = None) -> torch.Tensor:
        """``s(query_i, parent_j)`` as a ``(B, m)`` float64 tensor; ``parent_terms`` are the
        parents' cached terms (:meth:`stored`), computed here when None."""
        q = queries.to(torch.float64)
        p = parents.to(torch.float64)
        c = getattr(enc, "curvature", None)
        lam = getattr(enc, "ranking_lambda", getattr(enc, "centripetal_weight", None))
        if lam is None or (c is None and enc.geometry == "poincare"):
            return enc.subsumption_scores(q[:, None, :], p[None, :, :]).to(torch.float64)
        sq_p, gap_p, h_p = self._terms(p, c) if parent_terms is None else parent_terms
        sq_q, gap_q, h_q = self._terms(q, c)
        d2 = (sq_q[:, None] + sq_p[None, :] - 2.0 * (q @ p.T)).clamp_min(0.0)
        dist = d2.sqrt() if c is None else arcosh_distance(d2, gap_q[:, None], gap_p[None, :], c)
        return score_from_terms(dist, h_q[:, None], h_p[None, :], float(lam))
