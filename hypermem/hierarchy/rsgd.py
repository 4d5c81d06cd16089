"""poincare-memory's module path ``poincare_memory.hierarchy.rsgd``, for drop-in imports.

The reference keeps its Riemannian SGD trainers (Nickel & Kiela, NeurIPS 2017) and the
Euclidean twin in ``hierarchy.rsgd``; hypermem's live in :mod:`hypermem.hierarchy.training`
and are the same functions here, so ``from hypermem.hierarchy.rsgd import
fit_poincare_embeddings`` works where ``from poincare_memory.hierarchy.rsgd import ...``
did.
"""

from .training import TrainingReport, fit_euclidean_embeddings, fit_poincare_embeddings

__all__ = ["TrainingReport", "fit_euclidean_embeddings", "fit_poincare_embeddings"]
