"""hypermem: a differentiable, hierarchy-aware, time-aware memory in the Poincaré ball.

The main names are importable from here::

    from hypermem import Memory, PoincareBall, HashingEmbedder, HalfLife
"""

from .embed import BallProjector, CallableEmbedder, Embedder, HashingEmbedder, SentenceTransformerEmbedder
from .geometry import PoincareBall
from .index import MIPSIndex
from .retrieval import DEFAULT_K, combine, cone_energy
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
    "__version__",
]
