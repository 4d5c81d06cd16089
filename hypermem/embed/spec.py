"""The JSON description of an embedder that files and pages carry (``config["embedder"]``)."""

from __future__ import annotations

from typing import Any

from .choice import StandIn
from .hashing import HashingEmbedder

__all__ = ["embedder_spec"]


def embedder_spec(embedder: Any) -> dict[str, Any]:
    """JSON-able description of an embedder.

    ``{"type": "hashing", "dim", "ngram_range", "seed"}`` for :class:`HashingEmbedder`
    (the reference's format); the stored spec of a :class:`~hypermem.embed.choice.StandIn`;
    ``{"type": ClassName, "dim", "custom": True}`` otherwise.

    >>> embedder_spec(HashingEmbedder(dim=64))
    {'type': 'hashing', 'dim': 64, 'ngram_range': [3, 5], 'seed': 0}
    """
    stored = getattr(embedder, "spec", None)
    if isinstance(embedder, StandIn) and stored is not None:  # a store opened without its embedder
        return dict(stored)
    if isinstance(embedder, HashingEmbedder):
        return {"type": "hashing", "dim": int(embedder.dim), "ngram_range": list(embedder.ngram_range),
                "seed": int(embedder.seed)}
    return {"type": type(embedder).__name__, "dim": int(embedder.dim), "custom": True}
