r"""Training hyperbolic entailment cones (Ganea, Bécigneul & Hofmann, ICML 2018).

Every point ``x`` owns a cone with half-aperture ``psi(x) = arcsin(K (1 - ||x||^2) / ||x||)``;
"``y`` is a ``x``" is modelled by ``y`` lying in the cone of ``x``, with the energy
``E(x, y) = max(0, Xi(x, y) - psi(x))`` (:func:`hypermem.geometry.cones.cone_energy`).
The loss (their eq. 32) is a max-margin loss over positive pairs ``P`` and negative
pairs ``N``:

``L = sum_{(x, y) in P} E(x, y) + sum_{(x', y') in N} max(0, gamma - E(x', y'))``

with margin ``gamma`` (0.01 in the paper).  Negatives corrupt either end of a positive
(half the general end, half the specific end) with a random node, filtered against the
training relation.  Training starts from a Poincaré embedding (Nickel & Kiela) and keeps
every point outside the ball of radius ``eps_K`` where the aperture is defined
(``K (1 - eps^2) / eps = 1``; :func:`inner_radius`).

The relation pairs are ``(hyponym, hypernym)``, so the cone belongs to the second
element: ``E(hypernym, hyponym)``.

Scores for link prediction (lower = more likely an edge): :func:`cone_score` (the
energy) and, for Poincaré embeddings, :func:`poincare_isa_score`, Nickel & Kiela's
``(1 + alpha (||v|| - ||u||)) d(u, v)`` (their Sec. 4.2 with ``alpha = 1000``).
"""

from __future__ import annotations

import math

import torch

from ..geometry import poincare as P
from ..geometry.cones import DEFAULT_K, cone_energy
from .model import HierarchyEmbedding
from .ranking_loss import reduce_loss
from .relations import Relations

DEFAULT_MARGIN = 0.01


def inner_radius(K: float = DEFAULT_K) -> float:
    """``eps_K`` with ``K (1 - eps^2) / eps = 1``: ``eps = (sqrt(1 + 4 K^2) - 1) / (2 K)``."""
    if not K > 0:
        raise ValueError(f"K must be positive, got {K}")
    return (math.sqrt(1.0 + 4.0 * K * K) - 1.0) / (2.0 * K)


MAX_NORM = 1.0 - 1e-5
"""Largest ``sqrt(c) ||x||`` during cone training (Ganea et al.'s boundary margin): closer
to the boundary the cone angle formula cancels and Riemannian steps vanish."""


def constrain_cone_shell(model: HierarchyEmbedding, K: float = DEFAULT_K, slack: float = 1e-3,
                         max_norm: float = MAX_NORM) -> None:
    """Keep every point in the shell ``eps_K + slack <= sqrt(c) ||x|| <= max_norm`` by
    radial moves (in place)."""
    sc = math.sqrt(model.ball.curvature)
    lo, hi = (inner_radius(K) + slack) / sc, max_norm / sc
    with torch.no_grad():
        w = model.weight
        n = w.norm(dim=-1, keepdim=True)
        if bool(((n < lo) | (n > hi)).any()):
            unit = torch.where(n > 0, w / n.clamp_min(1e-30), torch.ones_like(w) / math.sqrt(w.shape[-1]))
            w.copy_(unit * n.clamp(lo, hi))


def squash_radii(points: torch.Tensor, max_radius: float, c: float = 1.0) -> torch.Tensor:
    """Scale every point's hyperbolic distance from the origin by ``max_radius / r_max``
    (``r_max`` the largest one), keeping directions: a Poincaré embedding pushed to the
    boundary becomes a usable starting point for cones, with its radial order intact."""
    r = P.distance_to_origin(points, c)
    f = min(1.0, max_radius / max(float(r.max()), 1e-12))
    return P.set_depth(points, r * f, c)


def sample_cone_negatives(pos: torch.Tensor, k: int, relations: Relations,
                          generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, k, 2)`` corrupted pairs (even slots replace the hyponym, odd ones the
    hypernym) and a ``(B, k)`` mask of those not in ``relations`` and not self-pairs."""
    B = pos.shape[0]
    rnd = torch.randint(0, relations.n, (B, k), device=pos.device, generator=generator)
    neg = pos[:, None, :].expand(B, k, 2).clone()
    side = torch.arange(k, device=pos.device) % 2
    neg[:, :, 0] = torch.where(side == 0, rnd, neg[:, :, 0])
    neg[:, :, 1] = torch.where(side == 1, rnd, neg[:, :, 1])
    ok = (neg[..., 0] != neg[..., 1]) & ~relations.contains(neg[..., 0], neg[..., 1])
    return neg, ok


def pair_energy(model: HierarchyEmbedding, pairs: torch.Tensor, K: float = DEFAULT_K) -> torch.Tensor:
    """Cone energy ``E(hypernym, hyponym)`` of ``(..., 2)`` ``(hyponym, hypernym)`` index pairs."""
    hypo = model.lookup(pairs[..., 0])
    hyper = model.lookup(pairs[..., 1])
    return cone_energy(hyper, hypo, model.ball, K)


def cone_loss(model: HierarchyEmbedding, pos: torch.Tensor, neg: torch.Tensor, mask: torch.Tensor | None = None,
              K: float = DEFAULT_K, margin: float = DEFAULT_MARGIN, reduction: str = "sum") -> torch.Tensor:
    """Ganea et al.'s max-margin loss for positive pairs ``(B, 2)`` and negatives ``(B, k, 2)``."""
    e_pos = pair_energy(model, pos, K)
    e_neg = (margin - pair_energy(model, neg, K)).clamp_min(0.0)
    if mask is not None:
        e_neg = e_neg * mask.to(e_neg.dtype)
    return reduce_loss(e_pos + e_neg.sum(-1), reduction)


def cone_score(points: torch.Tensor, pairs: torch.Tensor, ball=None, K: float = DEFAULT_K) -> torch.Tensor:
    """Energy ``E(hypernym, hyponym)`` for ``(m, 2)`` ``(hyponym, hypernym)`` index pairs."""
    return cone_energy(points[pairs[:, 1]], points[pairs[:, 0]], ball, K)


def poincare_isa_score(points: torch.Tensor, pairs: torch.Tensor, c: float = 1.0, alpha: float = 1000.0
                       ) -> torch.Tensor:
    """Nickel & Kiela's is-a score, negated so lower = more likely:
    ``(1 + alpha (||v|| - ||u||)) d(u, v)`` for ``(u, v) = (hyponym, hypernym)``."""
    u, v = points[pairs[:, 0]], points[pairs[:, 1]]
    d = P.distance_arcosh(u, v, c)
    return (1.0 + alpha * (v.norm(dim=-1) - u.norm(dim=-1))) * d
