"""Hyperbolic entailment cones (Ganea, Bécigneul & Hofmann, ICML 2018): a re-export.

The formulas live in :mod:`hypermem.geometry.cones` (half-aperture
``psi(x) = arcsin(K (1 - ||x||^2) / ||x||)``, angle ``Xi(x, y)``, energy
``max(0, Xi - psi)``); this module keeps the import path of the seed
(``poincare_memory.retrieval.cones``).
"""

from ..geometry.cones import DEFAULT_K, cone_angle, cone_energy, half_aperture, in_cone

__all__ = ["DEFAULT_K", "cone_angle", "cone_energy", "half_aperture", "in_cone"]
