"""Hierarchy embeddings (layer 2, pure torch).

* :mod:`~hypermem.hierarchy.tree` — rooted-tree utilities (children map, depths, closure);
* :mod:`~hypermem.hierarchy.relations` — pair sets as index tensors (fast membership);
* :mod:`~hypermem.hierarchy.sarkar` — Sarkar's training-free construction (Sala et al. 2018);
* :mod:`~hypermem.hierarchy.training` — Poincaré / Euclidean embeddings (Nickel & Kiela 2017)
  trained with geoopt's Riemannian optimizers;
* :mod:`~hypermem.hierarchy.cones` — entailment-cone training (Ganea et al. 2018);
* :mod:`~hypermem.hierarchy.evaluation` — reconstruction MAP / mean rank, link-prediction F1.
"""

from .evaluation import (
    LinkPredictionResult,
    ReconstructionResult,
    best_threshold,
    link_prediction,
    reconstruction,
)
from .relations import Relations
from .tree import children_map, depths, transitive_closure

__all__ = [
    "Relations",
    "children_map",
    "depths",
    "transitive_closure",
    "reconstruction",
    "ReconstructionResult",
    "link_prediction",
    "LinkPredictionResult",
    "best_threshold",
]
