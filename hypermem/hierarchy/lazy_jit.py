"""Optional numba compilation of the hierarchy kernels, loaded on first use.

Importing numba costs about 0.3 s, so :mod:`hypermem.hierarchy` does not import it; a
kernel wrapped by :func:`lazy_njit` imports numba and compiles (or loads from numba's
on-disk cache) at its first call.  ``HAVE_NUMBA`` says whether the ``fast`` extra is
installed, without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def lazy_njit(fn: Callable) -> Callable:
    """``fn`` compiled by ``numba.njit(cache=True, nogil=True)`` when first called."""

    @functools.cache
    def compiled() -> Callable:
        import numba

        return numba.njit(cache=True, nogil=True)(fn)

    @functools.wraps(fn)
    def call(*args):
        return compiled()(*args)

    return call
