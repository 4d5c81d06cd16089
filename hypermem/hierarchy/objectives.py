r"""What a hierarchy embedding is trained for: one frozen configuration per objective.

* :class:`PoincareConfig` — Nickel & Kiela's softmax ranking loss (NeurIPS 2017, eq. 6)
  ``L(u, v) = -log(exp(-d(u, v)) / sum_{v' in {v} ∪ N(u)} exp(-d(u, v')))`` with the
  Poincaré distance (:func:`~hypermem.hierarchy.ranking_loss.softmax_ranking_loss`);
* :class:`EuclideanConfig` — the same loss with ``d(u, v) = ||u - v||`` (their baseline);
* :class:`ConeConfig` — Ganea, Bécigneul & Hofmann's max-margin cone loss (ICML 2018,
  eq. 32) ``sum_P E(x, y) + sum_N max(0, gamma - E(x', y'))``
  (:func:`~hypermem.hierarchy.cones.cone_loss`), points kept in the cone shell.

A configuration holds the settings (dimension, schedule, negatives, optimizer, device);
its :meth:`~PoincareConfig.objective` gives the behaviour the training loops share:
:class:`RankingObjective` or :class:`ConeObjective`, each with ``sampler`` (how the
negatives of a batch are drawn), ``loss`` (the summed loss of a batch, autocast off),
``constrain`` (the projection after a step), ``starts_from_poincare`` (cones start from a
Poincaré embedding, :meth:`ConeObjective.start`), ``isa_score`` (a link-prediction score, lower
= more likely) and ``closed_form`` (whether Riemannian SGD on it has the autograd-free
step of :mod:`~hypermem.hierarchy.fused_sgd`).  The training path is
:func:`~hypermem.hierarchy.training.train_embedding` (used by the ``fit_*`` functions) and
the Lightning module :mod:`hypermem.train.hierarchy_module`, both through
:mod:`~hypermem.hierarchy.steps`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..geometry import PoincareBall
from .cones import (
    DEFAULT_K,
    DEFAULT_MARGIN,
    cone_loss,
    cone_score,
    constrain_cone_shell,
    poincare_isa_score,
    sample_cone_negatives,
    squash_radii,
)
from .model import HierarchyEmbedding
from .ranking_loss import softmax_ranking_loss
from .relations import Relations
from .sampling import NegativeSampler

KINDS = ("poincare", "euclidean", "cones")

Draw = Callable[[torch.Tensor, bool], tuple[torch.Tensor, torch.Tensor]]
"""``draw(pairs, burning) -> (negatives, valid)`` for a batch of ``(B, 2)`` pairs."""


class RankingObjective:
    """Nickel & Kiela's softmax ranking loss in ``geometry`` (``"poincare"`` or
    ``"euclidean"``): negatives are nodes ``v'`` with ``(u, v')`` not related (``degree^0.75``
    during the burn-in, uniform afterwards)."""

    closed_form = True
    starts_from_poincare = False

    def __init__(self, geometry: str = "poincare"):
        self.kind = self.geometry = geometry

    def sampler(self, relations: Relations, generator: torch.Generator | None = None,
                symmetric: bool = False) -> NegativeSampler:
        """The :class:`~hypermem.hierarchy.sampling.NegativeSampler` of this objective."""
        return NegativeSampler(relations, symmetric=symmetric, generator=generator)

    def draw(self, relations: Relations, count: int, generator: torch.Generator | None = None,
             symmetric: bool = False) -> Draw:
        """``draw(pairs, burning) -> (neg (B, count), valid (B, count))``."""
        sampler = self.sampler(relations, generator, symmetric)
        return lambda pairs, burning: sampler.sample(pairs[:, 0], count, unigram=burning)

    def loss(self, model: HierarchyEmbedding, pairs: torch.Tensor, neg: torch.Tensor, valid: torch.Tensor
             ) -> torch.Tensor:
        """Summed softmax ranking loss of the batch."""
        with torch.autocast(pairs.device.type, enabled=False):  # 1 - |x|^2 needs the table's precision
            d_pos, d_neg = model(pairs[:, 0], pairs[:, 1], neg)
            return softmax_ranking_loss(d_pos, d_neg, valid, reduction="sum")

    def constrain(self, model: HierarchyEmbedding) -> None:
        """Nothing to do: the Riemannian step already projects into the ball."""

    def isa_score(self, points: torch.Tensor, pairs: torch.Tensor, ball: PoincareBall) -> torch.Tensor | None:
        """Nickel & Kiela's is-a score (:func:`~hypermem.hierarchy.cones.poincare_isa_score`);
        ``None`` for the Euclidean baseline (no link prediction)."""
        if self.geometry != "poincare":
            return None
        return poincare_isa_score(points, pairs.to(points.device), ball.curvature)


class ConeObjective:
    """Ganea et al.'s entailment cones: ``negatives`` corrupted pairs per positive (half the
    hyponym, half the hypernym replaced), aperture constant ``K``, margin ``margin``."""

    kind, geometry, closed_form = "cones", "poincare", False
    starts_from_poincare = True  # the cones of a random start are meaningless: see start()

    def __init__(self, K: float = DEFAULT_K, margin: float = DEFAULT_MARGIN):
        self.K, self.margin = K, margin

    def start(self, model: HierarchyEmbedding, init: torch.Tensor, max_radius: float) -> None:
        """Copy the starting points ``init`` (a Poincaré embedding) into ``model``: projected
        into the ball, radii scaled to at most ``max_radius``
        (:func:`~hypermem.hierarchy.cones.squash_radii`), then into the cone shell."""
        w = model.weight
        with torch.no_grad():
            w.copy_(squash_radii(model.ball.projx(init.to(w.dtype)), max_radius, model.ball.curvature))
        self.constrain(model)

    def draw(self, relations: Relations, count: int, generator: torch.Generator | None = None,
             symmetric: bool = False) -> Draw:
        """``draw(pairs, burning) -> (neg (B, count, 2), valid (B, count))``."""
        if int(count) < 1:
            raise ValueError(f"negatives must be at least 1, got {count}")
        return lambda pairs, burning: sample_cone_negatives(pairs, int(count), relations, generator)

    def loss(self, model: HierarchyEmbedding, pairs: torch.Tensor, neg: torch.Tensor, valid: torch.Tensor
             ) -> torch.Tensor:
        """Summed max-margin cone loss of the batch."""
        with torch.autocast(pairs.device.type, enabled=False):
            return cone_loss(model, pairs, neg, valid, K=self.K, margin=self.margin)

    def constrain(self, model: HierarchyEmbedding) -> None:
        """Back into the cone shell (:func:`~hypermem.hierarchy.cones.constrain_cone_shell`)."""
        constrain_cone_shell(model, self.K)

    def isa_score(self, points: torch.Tensor, pairs: torch.Tensor, ball: PoincareBall) -> torch.Tensor:
        """The cone energy (:func:`~hypermem.hierarchy.cones.cone_score`)."""
        return cone_score(points, pairs.to(points.device), ball, self.K)


def objective_for(kind: str, K: float = DEFAULT_K, margin: float = DEFAULT_MARGIN):
    """The objective of a ``kind``: ``poincare``, ``euclidean`` or ``cones``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return ConeObjective(K, margin) if kind == "cones" else RankingObjective(kind)


LossFn = Callable[[HierarchyEmbedding, torch.Tensor, bool], torch.Tensor]
"""``loss_fn(model, batch, burning) -> summed loss``, the custom-loss form of
:func:`~hypermem.hierarchy.training.train_embedding`."""


def as_loss_fn(objective, relations: Relations, negatives: int, generator: torch.Generator | None = None,
               symmetric: bool = False) -> LossFn:
    """``objective``'s loss with its own negatives as a ``loss_fn(model, batch, burning)``."""
    draw = objective.draw(relations, negatives, generator, symmetric)
    return lambda model, batch, burning: objective.loss(model, batch, *draw(batch, burning))


def softmax_objective(relations: Relations, negatives: int, generator: torch.Generator | None = None,
                      symmetric_negatives: bool = False) -> LossFn:
    """Nickel & Kiela's loss as a ``loss_fn(model, batch, burning)``: negatives are nodes
    ``v'`` with ``(u, v')`` not in the relation (their directed rule; ``symmetric_negatives``
    also excludes ``(v', u)``), drawn by ``degree^0.75`` during the burn-in and uniformly
    afterwards."""
    if isinstance(negatives, bool) or int(negatives) != negatives or negatives < 1:
        raise ValueError(f"negatives must be at least 1, got {negatives!r}")
    return as_loss_fn(RankingObjective(), relations, int(negatives), generator, symmetric_negatives)


def cone_objective(relations: Relations, negatives: int = 10, K: float = DEFAULT_K, margin: float = DEFAULT_MARGIN,
                   generator: torch.Generator | None = None) -> LossFn:
    """The cone loss as a ``loss_fn(model, batch, burning)``."""
    return as_loss_fn(ConeObjective(K, margin), relations, negatives, generator)


@dataclass(frozen=True)
class RankingConfig:
    """Settings of the softmax ranking objective (the defaults of
    :func:`~hypermem.hierarchy.training.fit_poincare_embeddings`); use :class:`PoincareConfig`
    or :class:`EuclideanConfig`."""

    dim: int = 10
    epochs: int = 200
    lr: float = 0.3
    negatives: int = 50
    burn_in: int = 20
    burn_in_lr_factor: float = 0.1
    batch_size: int = 32
    seed: int = 0
    ball: PoincareBall | None = None
    optimizer: str = "rsgd"
    final_lr_factor: float = 1.0
    device: torch.device | str | None = None
    dtype: torch.dtype = torch.float64
    sparse: bool | None = None
    eval_every: int = 0
    workers: int = 1

    geometry: ClassVar[str] = "poincare"

    def objective(self) -> RankingObjective:
        """The behaviour the training loops share (:class:`RankingObjective`)."""
        return RankingObjective(self.geometry)

    def settings(self, device: torch.device, sparse: bool) -> dict:
        """The report's ``settings``: the configuration with the device and sparsity used."""
        return {"geometry": self.geometry, "dim": self.dim, "epochs": self.epochs, "lr": self.lr,
                "negatives": self.negatives, "burn_in": self.burn_in, "burn_in_lr_factor": self.burn_in_lr_factor,
                "final_lr_factor": self.final_lr_factor, "batch_size": self.batch_size, "optimizer": self.optimizer,
                "seed": self.seed, "dtype": str(self.dtype), "device": str(device), "sparse": sparse,
                "workers": self.workers}


@dataclass(frozen=True)
class PoincareConfig(RankingConfig):
    """Settings of :func:`~hypermem.hierarchy.training.fit_poincare_embeddings` (same names
    and defaults; see there)."""


@dataclass(frozen=True)
class EuclideanConfig(RankingConfig):
    """Settings of :func:`~hypermem.hierarchy.training.fit_euclidean_embeddings` (plain SGD
    on the same loss with ``||u - v||``; no ball)."""

    lr: float = 0.05
    burn_in: int = 0
    batch_size: int = 128

    geometry: ClassVar[str] = "euclidean"

    def __post_init__(self):
        if self.ball is not None:
            raise ValueError("the Euclidean baseline has no ball")


@dataclass(frozen=True)
class ConeConfig:
    """Settings of :func:`~hypermem.hierarchy.training.fit_entailment_cones` (same names and
    defaults; see there)."""

    dim: int = 5
    epochs: int = 100
    lr: float = 0.01
    negatives: int = 10
    batch_size: int = 256
    K: float = DEFAULT_K
    margin: float = DEFAULT_MARGIN
    init_epochs: int = 100
    init_max_radius: float = 3.0
    seed: int = 0
    ball: PoincareBall | None = None
    optimizer: str = "radam"
    device: torch.device | str | None = None
    dtype: torch.dtype = torch.float64

    def objective(self) -> ConeObjective:
        """The behaviour the training loops share (:class:`ConeObjective`)."""
        return ConeObjective(self.K, self.margin)

    def settings(self) -> dict:
        """The report's ``settings``."""
        return {"kind": "cones", "dim": self.dim, "epochs": self.epochs, "lr": self.lr, "negatives": self.negatives,
                "batch_size": self.batch_size, "K": self.K, "margin": self.margin, "init_epochs": self.init_epochs}
