"""Optional numba compilation of the hierarchy kernels, loaded on first use.

Importing numba costs about 0.3 s, so :mod:`hypermem.hierarchy` does not import it; a
kernel wrapped by :func:`lazy_njit` imports numba and compiles (or loads from numba's
on-disk cache) at its first call.  ``HAVE_NUMBA`` says whether the ``fast`` extra is
installed, without importing it.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from collections.abc import Callable

HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def lazy_njit(fn: Callable) -> Callable:
    """``fn`` compiled by ``numba.njit(cache=True, nogil=True)`` when first called
    (once, also when several threads make the first call together)."""
    lock = threading.Lock()

    @functools.cache
    def compile_once() -> Callable:
        import numba

        return numba.njit(cache=True, nogil=True)(fn)

    def compiled() -> Callable:
        with lock:
            return compile_once()

    @functools.wraps(fn)
    def call(*args):
        return compiled()(*args)

    return call
