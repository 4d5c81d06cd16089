"""The Poincaré ball's pure functions (:mod:`hypermem.geometry.poincare_functions`) and its
class, :class:`~hypermem.geometry.PoincareBall`, under one name.

``hypermem.geometry.poincare.PoincareBall`` is where poincare-memory 0.1.4 documents its ball
(``poincare_memory.geometry.poincare.PoincareBall``), so a migrating user's import works with
one word changed.  The functions live in ``poincare_functions``, which the class itself imports;
this module only gathers both, so no import cycle runs between them.
"""

from .ball import PoincareBall
from .poincare_functions import *  # noqa: F403
from .poincare_functions import __all__ as _functions

__all__ = ["PoincareBall", *_functions]
