"""Nearest-neighbour search building blocks (layer 2): the exact chunked top-k kernel,
distance models, the Lorentz MIPS index and the banded HNSW index of the store's directions."""

from .bands import BandedDirectionIndex
from .mips import MIPSIndex, faiss_available
from .scores import HyperbolicDistance, ShellDistance
from .topk import exact_topk

__all__ = ["BandedDirectionIndex", "MIPSIndex", "faiss_available", "exact_topk", "ShellDistance", "HyperbolicDistance"]
