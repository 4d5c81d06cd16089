"""Nearest-neighbour search building blocks (layer 2): the exact chunked top-k kernel,
distance models, and the Lorentz MIPS index."""

from .mips import MIPSIndex, faiss_available
from .scores import HyperbolicDistance, ShellDistance
from .topk import exact_topk

__all__ = ["MIPSIndex", "faiss_available", "exact_topk", "ShellDistance", "HyperbolicDistance"]
