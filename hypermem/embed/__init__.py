"""Text embedders, the projection into the ball and the hierarchy encoder (layer 2)."""

from .base import Embedder, check_texts, embed_checked
from .callable import CallableEmbedder
from .choice import StandIn, embedder_named
from .hashing import HashingEmbedder
from .hierarchy_encoder import EncoderFolderError, HierarchyEncoder
from .projection import BallProjector
from .reranker import PlacementReranker, RerankerFolderError
from .sentence_transformer import SentenceTransformerEmbedder

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "CallableEmbedder",
    "SentenceTransformerEmbedder",
    "BallProjector",
    "HierarchyEncoder",
    "EncoderFolderError",
    "PlacementReranker",
    "RerankerFolderError",
    "StandIn",
    "embedder_named",
    "check_texts",
    "embed_checked",
]
