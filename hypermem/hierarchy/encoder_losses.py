r"""Losses of a hierarchy encoder, on the points of one batch's distinct entities.

A batch (:class:`~hypermem.hierarchy.encoder_batches.EncoderBatch`) encodes each distinct
entity once, giving ``points`` ``(U, d)``; positives are index pairs ``(c_i, p_i)`` into
them, each with ``K`` negative parents ``n_ik`` (index ``-1`` = none).  Distances ``d`` and
norms ``h`` are the geometry's: in the ball of curvature ``-c``, ``d = d_c`` and
``h(x) = d_c(0, x)``; in R^d (the Euclidean twin), ``d = ||x - y||`` and ``h = ||x||``.

* **clustering** (HiT, He et al. 2024, eq. 3), margin ``alpha``, mean over the valid triplets::

      L_clu = mean_{i,k} max(0, d(c_i, p_i) - d(c_i, n_ik) + alpha)

* **centripetal** (HiT, eq. 4), margin ``beta``: a parent nearer the origin than its child::

      L_cen = mean_i max(0, h(p_i) - h(c_i) + beta)

* **contrastive** (in-batch InfoNCE, van den Oord et al. 2018): each child's parent against
  every other batch entity that is not the child or one of its known ancestors, with logits
  ``-d(c_i, u_j) / tau``::

      L_con = mean_i -log( exp(-d(c_i, p_i)/tau) / sum_{j in C_i} exp(-d(c_i, u_j)/tau) )

* **cone** (Ganea, Bécigneul & Hofmann 2018, eq. 33): the child inside the parent's
  entailment cone, out of the negatives' by the margin ``gamma``::

      L_cone = mean_i E(p_i, c_i) + mean_{i,k} max(0, gamma - E(n_ik, c_i))

  with the ball's energy (:func:`hypermem.geometry.cones.cone_energy`) or its Euclidean
  twin (:func:`~hypermem.geometry.cones.euclidean_cone_energy`, points in units of
  ``sqrt(d)``).

* **depth** (not in HiT): every batch entity ``u`` of known level ``l(u)`` (hops below a
  root of the training edges) one centripetal margin ``beta`` further from the origin per
  level, up to an offset common to the batch -- the mean absolute deviation of the
  residuals ``r_u = h(u) - beta l(u)`` (in the units of the distances, like the margins)::

      L_depth = mean_u |r_u - mean_v r_v|

  The centripetal loss orders each parent before its own children only; this term puts
  the norms of every branch on one scale, so that ``h(p) - h(c)`` in the score separates a
  parent from a child's siblings (same level) wherever they are in the tree.

* **siblings** (not in HiT): the children of one parent in the batch at one norm -- the
  mean absolute deviation of each child's norm from the mean of its batch siblings' (the
  children of the same parent ``p``, ``S_p``), over the children that have a sibling::

      L_sib = mean_i |h(c_i) - mean_{j in S_{p_i}} h(c_j)|

  A child's siblings are HiT's hard negatives; in the score ``h(x) - h(c)`` they are at the
  child's own level only when the norms of siblings agree, where ``depth`` asks one scale of
  the whole tree, this asks it of each family alone (no level needed).

* **calibration** (not in HiT), margin ``mu``: every positive of the batch scored below
  every negative of the batch, *across* children, with the decision's score distance
  ``D(c, x) = d(c, x) + lambda_0 (h(x) - h(c))`` (the negated subsumption score of
  :mod:`hypermem.geometry.subsumption`, at a fixed ``lambda_0``)::

      L_cal = mean_{i, (j,k) valid} max(0, D(c_i, p_i) - D(c_j, n_jk) + mu)

  The clustering and contrastive terms rank each child's parent above *its own*
  negatives; HiT's evaluation (and ``parent="auto"``) decides with one threshold over all
  pairs, which needs the scores of different children on one scale.  This is the pairwise
  (AUC) surrogate of that decision (Herschtal & Raskutti, "Optimising area under the ROC
  curve using gradient descent", ICML 2004).

With the batch built from HiT's triplets (each positive with its own ``K`` negatives),
``L_clu + L_cen`` equals HiT's ``HierarchyTransformerLoss`` value and gradient (the
centripetal mean over triplets is the mean over positives when every positive has ``K``
negatives) -- checked in ``tests/test_encoder_training.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..geometry.cones import DEFAULT_K, cone_energy, euclidean_cone_energy
from ..geometry.subsumption import geometry_distance as pair_distances
from ..geometry.subsumption import geometry_norm as point_norms

__all__ = ["LossWeights", "encoder_losses"]


@dataclass(frozen=True)
class LossWeights:
    """Weights and margins of the seven terms (see the module docstring)."""

    clustering: float = 1.0
    clustering_margin: float = 5.0
    centripetal: float = 1.0
    centripetal_margin: float = 0.5
    contrastive: float = 0.0
    temperature: float = 1.0
    cone: float = 0.0
    cone_margin: float = 0.01
    cone_K: float = DEFAULT_K
    depth: float = 0.0
    siblings: float = 0.0
    calibration: float = 0.0
    calibration_margin: float = 1.0
    calibration_lambda: float = 1.0

    def __post_init__(self) -> None:
        for name in ("clustering", "clustering_margin", "centripetal", "centripetal_margin", "contrastive",
                     "cone", "cone_margin", "depth", "siblings", "calibration", "calibration_margin", "calibration_lambda"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a finite positive number, got {self.temperature!r}")
        if not (self.cone_K > 0 and math.isfinite(self.cone_K)):
            raise ValueError(f"cone_K must be a finite positive number, got {self.cone_K!r}")


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    n = mask.sum()
    return (values * mask).sum() / n.clamp_min(1)


def encoder_losses(points: torch.Tensor, child: torch.Tensor, parent: torch.Tensor, negatives: torch.Tensor,
                   candidates: torch.Tensor | None, curvature: float | None,
                   weights: LossWeights = LossWeights(), levels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The terms and their weighted sum ``"loss"``.

    ``points`` ``(U, d)``; ``child`` / ``parent`` ``(P,)`` indices; ``negatives`` ``(P, K)``
    indices (``-1`` pads); ``candidates`` ``(P, U)`` boolean mask of each child's contrastive
    candidates (the parent included), needed only when ``weights.contrastive > 0``;
    ``levels`` ``(U,)`` each entity's level (``-1``: unknown), needed only when
    ``weights.depth > 0``."""
    zero = points.new_zeros(())
    c, p = points[child], points[parent]
    valid = negatives >= 0
    n = points[negatives.clamp_min(0)]
    out: dict[str, torch.Tensor] = {}
    d_pos = pair_distances(c, p, curvature)
    d_neg = pair_distances(c.unsqueeze(1), n, curvature)
    # every batch entity's norm once, for the terms that read norms
    h = point_norms(points, curvature) \
        if weights.centripetal or weights.calibration or weights.depth or weights.siblings else None
    out["clustering"] = _masked_mean(torch.relu(d_pos.unsqueeze(1) - d_neg + weights.clustering_margin), valid) \
        if weights.clustering > 0 else zero
    out["centripetal"] = torch.relu(h[parent] - h[child] + weights.centripetal_margin).mean() \
        if weights.centripetal > 0 else zero
    if weights.contrastive > 0:
        if candidates is None:
            raise ValueError("the contrastive loss needs the candidates mask")
        logits = -pair_distances(c.unsqueeze(1), points.unsqueeze(0), curvature) / weights.temperature
        logits = logits.masked_fill(~candidates, float("-inf"))
        out["contrastive"] = torch.nn.functional.cross_entropy(logits, parent)
    else:
        out["contrastive"] = zero
    if weights.cone > 0:
        if curvature is None:
            scale = 1.0 / math.sqrt(points.shape[-1])
            e_pos = euclidean_cone_energy(p, c, scale, weights.cone_K)
            e_neg = euclidean_cone_energy(n, c.unsqueeze(1), scale, weights.cone_K)
        else:
            e_pos = cone_energy(p, c, curvature, weights.cone_K)
            e_neg = cone_energy(n, c.unsqueeze(1), curvature, weights.cone_K)
        out["cone"] = e_pos.mean() + _masked_mean(torch.relu(weights.cone_margin - e_neg), valid)
    else:
        out["cone"] = zero
    if weights.depth > 0:
        if levels is None:
            raise ValueError("the depth loss needs the entities' levels")
        known = levels >= 0
        r = h - weights.centripetal_margin * levels.to(points.dtype)
        mean = _masked_mean(r, known)
        out["depth"] = _masked_mean((r - mean).abs(), known)
    else:
        out["depth"] = zero
    if weights.siblings > 0:
        count = torch.bincount(parent, minlength=points.shape[0]).to(points.dtype)
        total = points.new_zeros(points.shape[0]).index_add(0, parent, h[child])
        family = total[parent] / count[parent]
        out["siblings"] = _masked_mean((h[child] - family).abs(), count[parent] > 1)
    else:
        out["siblings"] = zero
    if weights.calibration > 0:
        lam = weights.calibration_lambda
        hc = h[child]
        d_p = d_pos + lam * (h[parent] - hc)
        d_n = (d_neg + lam * (h[negatives.clamp_min(0)] - hc.unsqueeze(1)))[valid]
        out["calibration"] = torch.relu(d_p.unsqueeze(1) - d_n.unsqueeze(0) + weights.calibration_margin).mean() \
            if d_n.numel() else zero
    else:
        out["calibration"] = zero
    out["loss"] = (weights.clustering * out["clustering"] + weights.centripetal * out["centripetal"]
                   + weights.contrastive * out["contrastive"] + weights.cone * out["cone"]
                   + weights.depth * out["depth"] + weights.siblings * out["siblings"]
                   + weights.calibration * out["calibration"])
    return out
