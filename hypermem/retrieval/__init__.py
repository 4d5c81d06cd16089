"""Retrieval building blocks: scores and entailment cones (layer 2)."""

from .cones import DEFAULT_K, cone_angle, cone_energy, half_aperture, in_cone
from .scoring import combine, score_bias

__all__ = ["DEFAULT_K", "cone_angle", "cone_energy", "half_aperture", "in_cone", "combine", "score_bias"]
