"""Hierarchy embeddings (layer 2: torch, with optional numba kernels loaded on first use).

* :mod:`~hypermem.hierarchy.tree` — rooted-tree utilities (children map, depths, closure);
* :mod:`~hypermem.hierarchy.relations` — pair sets as index tensors (fast membership);
* :mod:`~hypermem.hierarchy.sarkar` — Sarkar's training-free construction (Sala et al. 2018),
  and :mod:`~hypermem.hierarchy.shadows`, the layout whose nested boundary shadows put every
  node's ancestors nearest (with :func:`~hypermem.hierarchy.shadows.shadow_isa_score`, a
  shadow-cone is-a score); both spread children along :mod:`~hypermem.hierarchy.directions`
  and return a :class:`~hypermem.hierarchy.layout.Layout`; :mod:`~hypermem.hierarchy.spanning`
  picks a DAG's spanning tree;
* :mod:`~hypermem.hierarchy.training` — Poincaré / Euclidean embeddings (Nickel & Kiela 2017)
  and entailment cones (Ganea et al. 2018), one frozen configuration per objective
  (:mod:`~hypermem.hierarchy.objectives`), the steps and their speed tiers in
  :mod:`~hypermem.hierarchy.steps` (autograd with geoopt; the closed-form step of
  :mod:`~hypermem.hierarchy.fused_sgd`; its compiled epoch,
  :mod:`~hypermem.hierarchy.compiled_sgd`), with :mod:`~hypermem.hierarchy.model`,
  :mod:`~hypermem.hierarchy.ranking_loss`, :mod:`~hypermem.hierarchy.sampling` and
  :mod:`~hypermem.hierarchy.fused`; :mod:`~hypermem.hierarchy.rsgd` is poincare-memory's path
  to the trainers;
* :mod:`~hypermem.hierarchy.cones` — the entailment-cone loss and scores, with the
  link-prediction splits of :mod:`~hypermem.hierarchy.splits`;
* :mod:`~hypermem.hierarchy.encoder_training` — :func:`fit_hierarchy_encoder`, a text encoder
  trained into the ball (HiT, He et al. 2024) or its Euclidean twin, with its losses
  (:mod:`~hypermem.hierarchy.encoder_losses`), batches (:mod:`~hypermem.hierarchy.encoder_batches`)
  and evaluation (:mod:`~hypermem.hierarchy.encoder_eval`);
* :mod:`~hypermem.hierarchy.evaluation` — reconstruction MAP / mean rank, link-prediction F1;
  :mod:`~hypermem.hierarchy.rank_polish` moves single nodes to lower the exact mean rank.

Example::

    >>> from hypermem.data.wordnet import load_mammals
    >>> from hypermem.hierarchy import fit_poincare_embeddings, reconstruction
    >>> m = load_mammals()
    >>> points, report = fit_poincare_embeddings(m.closure, dim=10)   # doctest: +SKIP
    >>> reconstruction(points, m.closure).map                         # doctest: +SKIP
    0.97...
"""


from .encoder_training import EncoderTrainConfig, fit_hierarchy_encoder
from .evaluation import (
    LinkPredictionResult,
    ReconstructionResult,
    best_threshold,
    link_prediction,
    reconstruction,
)
from .objectives import ConeConfig, EuclideanConfig, PoincareConfig
from .rank_polish import PolishReport, polish_ranks
from .relations import Relations
from .reranker_training import fit_placement_reranker
from .sarkar import decaying_edge_lengths, max_safe_depth, sarkar_layout, spread_directions
from .shadows import shadow_layout
from .training import (
    TrainingReport,
    fit_entailment_cones,
    fit_euclidean_embeddings,
    fit_hierarchy,
    fit_poincare_embeddings,
)
from .tree import children_map, depths, transitive_closure

__all__ = [
    "Relations",
    "children_map",
    "depths",
    "transitive_closure",
    "sarkar_layout",
    "shadow_layout",
    "spread_directions",
    "max_safe_depth",
    "decaying_edge_lengths",
    "fit_poincare_embeddings",
    "fit_euclidean_embeddings",
    "fit_entailment_cones",
    "fit_hierarchy",
    "fit_hierarchy_encoder",
    "EncoderTrainConfig",
    "fit_placement_reranker",
    "PoincareConfig",
    "EuclideanConfig",
    "ConeConfig",
    "TrainingReport",
    "reconstruction",
    "ReconstructionResult",
    "polish_ranks",
    "PolishReport",
    "link_prediction",
    "LinkPredictionResult",
    "best_threshold",
]
