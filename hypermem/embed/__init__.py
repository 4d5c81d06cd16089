"""Text embedders and the projection into the ball (layer 2)."""

from .base import Embedder, check_texts, embed_checked
from .callable import CallableEmbedder
from .choice import StandIn, embedder_named
from .hashing import HashingEmbedder
from .projection import BallProjector
from .sentence_transformer import SentenceTransformerEmbedder

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "CallableEmbedder",
    "SentenceTransformerEmbedder",
    "BallProjector",
    "StandIn",
    "embedder_named",
    "check_texts",
    "embed_checked",
]
