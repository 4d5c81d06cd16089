"""The JSON description of an embedder that files and pages carry (``config["embedder"]``)."""

from __future__ import annotations

from typing import Any

from .choice import StandIn
from .hashing import HashingEmbedder

__all__ = ["embedder_spec", "is_minilm_spec", "MINILM"]

MINILM = "all-MiniLM-L6-v2"
"""The offline default model's name, as embedder specs record it."""


def embedder_spec(embedder: Any) -> dict[str, Any]:
    """JSON-able description of an embedder.

    ``{"type": "hashing", "dim", "ngram_range", "seed"}`` for :class:`HashingEmbedder`
    (the reference's format); the stored spec of a :class:`~hypermem.embed.choice.StandIn`;
    ``{"type": ClassName, "dim", "custom": True}`` otherwise, plus ``"model":
    "all-MiniLM-L6-v2"`` for a :class:`~hypermem.embed.SentenceTransformerEmbedder` of the
    offline default model, so that a load can rebuild it (:data:`MINILM`).

    >>> embedder_spec(HashingEmbedder(dim=64))
    {'type': 'hashing', 'dim': 64, 'ngram_range': [3, 5], 'seed': 0}
    """
    stored = getattr(embedder, "spec", None)
    if isinstance(embedder, StandIn) and stored is not None:  # a store opened without its embedder
        return dict(stored)
    if isinstance(embedder, HashingEmbedder):
        return {"type": "hashing", "dim": int(embedder.dim), "ngram_range": list(embedder.ngram_range),
                "seed": int(embedder.seed)}
    out = {"type": type(embedder).__name__, "dim": int(embedder.dim), "custom": True}
    if type(embedder).__name__ == "SentenceTransformerEmbedder" and \
            getattr(embedder, "model_name", None) in (MINILM, "sentence-transformers/" + MINILM):
        out["model"] = MINILM
    return out


def is_minilm_spec(spec: Any) -> bool:
    """Whether a stored embedder spec records the offline all-MiniLM-L6-v2 embedder."""
    return (isinstance(spec, dict) and spec.get("type") == "SentenceTransformerEmbedder"
            and spec.get("model") == MINILM and spec.get("dim") == 384)
