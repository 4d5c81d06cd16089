"""hypermem: a differentiable, hierarchy-aware, time-aware memory in the Poincaré ball.

The main names are importable from here::

    from hypermem import Memory, PoincareBall, HashingEmbedder, HalfLife

Every name the NumPy reference ``poincare-memory`` exports at its top level is here too
(``fit_poincare_embeddings``, ``sarkar_layout``, ``reconstruction``, ``in_cone``, ...).
The hierarchy functions are loaded on first use (module ``__getattr__``, PEP 562), so
``import hypermem`` costs no more than the store needs and never imports Lightning.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING

from .embed import BallProjector, CallableEmbedder, Embedder, HashingEmbedder, SentenceTransformerEmbedder
from .geometry import PoincareBall
from .geometry.lorentz import lorentz_distance, to_mips_vectors
from .index import MIPSIndex
from .retrieval import DEFAULT_K, combine, cone_energy, in_cone
from .store import Memory, MemoryRecord, SearchResult
from .temporal import (
    MIN_WEIGHT,
    DecayPolicy,
    Ebbinghaus,
    HalfLife,
    NoDecay,
    Product,
    ValidityWindow,
    generative_agents_recency,
)

__version__ = "0.1.0"

_LAZY = {
    "fit_poincare_embeddings": "hypermem.hierarchy.training",
    "fit_euclidean_embeddings": "hypermem.hierarchy.training",
    "sarkar_layout": "hypermem.hierarchy.sarkar",
    "max_safe_depth": "hypermem.hierarchy.sarkar",
    "reconstruction": "hypermem.hierarchy.evaluation",
    "transitive_closure": "hypermem.hierarchy.tree",
}
"""Names loaded on first access (the hierarchy package is not needed by the store)."""


if TYPE_CHECKING:  # a type checker reads the lazy names' own types (and flags a name not here: no __getattr__)
    from .hierarchy.evaluation import reconstruction
    from .hierarchy.sarkar import max_safe_depth, sarkar_layout
    from .hierarchy.training import fit_euclidean_embeddings, fit_poincare_embeddings
    from .hierarchy.tree import transitive_closure
else:
    def __getattr__(name: str):
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'hypermem' has no attribute {name!r}")
        value = getattr(_import_module(module), name)
        globals()[name] = value
        return value


def __dir__():
    return sorted({n for n in globals() if n.startswith("__") or not n.startswith("_")} | set(_LAZY))


__all__ = [
    "Memory",
    "MemoryRecord",
    "SearchResult",
    "PoincareBall",
    "Embedder",
    "HashingEmbedder",
    "CallableEmbedder",
    "SentenceTransformerEmbedder",
    "BallProjector",
    "MIPSIndex",
    "DecayPolicy",
    "NoDecay",
    "HalfLife",
    "Ebbinghaus",
    "ValidityWindow",
    "Product",
    "generative_agents_recency",
    "MIN_WEIGHT",
    "DEFAULT_K",
    "combine",
    "cone_energy",
    "in_cone",
    "lorentz_distance",
    "to_mips_vectors",
    "fit_poincare_embeddings",
    "fit_euclidean_embeddings",
    "sarkar_layout",
    "max_safe_depth",
    "reconstruction",
    "transitive_closure",
    "__version__",
]
