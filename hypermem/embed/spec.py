"""The JSON description of an embedder that files and pages carry (``config["embedder"]``)."""

from __future__ import annotations

from typing import Any

from .choice import StandIn
from .hashing import HashingEmbedder

__all__ = ["embedder_spec", "is_minilm_spec", "MINILM", "searches_with_minilm"]

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


def searches_with_minilm(spec: Any) -> bool:
    """Whether a command that opens a store without its embedder (``hypermem search``,
    ``hypermem mcp``) embeds with all-MiniLM-L6-v2: a spec that records it
    (:func:`is_minilm_spec`), or a 384-dimensional ``SentenceTransformerEmbedder`` recorded
    before specs named the model (the store's own open warns when the two differ)."""
    return is_minilm_spec(spec) or (isinstance(spec, dict) and spec.get("type") == "SentenceTransformerEmbedder"
                                    and spec.get("dim") == 384 and "model" not in spec)
