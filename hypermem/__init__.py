"""hypermem: a differentiable, hierarchy-aware, time-aware memory in the Poincaré ball.

Import what you need from the subpackages, or the main names from here::

    from hypermem import PoincareBall
"""

from .geometry import PoincareBall

__version__ = "0.1.0"

__all__ = ["PoincareBall", "__version__"]
