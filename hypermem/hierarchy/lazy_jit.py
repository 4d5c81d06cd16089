"""Optional numba compilation of the hierarchy kernels, loaded on first use.

Importing numba costs about 0.3 s, so :mod:`hypermem.hierarchy` does not import it; a
kernel wrapped by :func:`lazy_njit` imports numba and compiles (or loads from numba's
on-disk cache) at its first call.  ``HAVE_NUMBA`` says whether the ``fast`` extra is
installed, without importing it.

Where numba can write its cache nowhere (a non-root user whose HOME is read-only or unset,
the package installed by root: numba raises "cannot cache function ...: no locator
available"), the kernel is compiled without the cache, with one warning for the process.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
import warnings
from collections.abc import Callable

HAVE_NUMBA = importlib.util.find_spec("numba") is not None

_NO_CACHE = ("numba can write its cache in no folder here (the package's __pycache__ and the home "
             "folder's are not writable): hypermem's kernels are compiled at every start instead (seconds); "
             "set NUMBA_CACHE_DIR to a writable folder to keep them")


def lazy_njit(fn: Callable) -> Callable:
    """``fn`` compiled by ``numba.njit(cache=True, nogil=True)`` when first called
    (once, also when several threads make the first call together); by ``cache=False`` where
    numba finds no folder to cache it in."""
    lock = threading.Lock()

    @functools.cache
    def compile_once() -> Callable:
        import numba

        try:
            return numba.njit(cache=True, nogil=True)(fn)
        except RuntimeError as exc:   # no cache locator: nowhere writable (numba.core.caching)
            if "cannot cache" not in str(exc):
                raise
            _warn_no_cache()
            return numba.njit(cache=False, nogil=True)(fn)

    def compiled() -> Callable:
        with lock:
            return compile_once()

    @functools.wraps(fn)
    def call(*args):
        return compiled()(*args)

    return call


@functools.cache
def _warn_no_cache() -> None:
    """The warning that the kernels are not cached, once per process (not once per kernel)."""
    warnings.warn(_NO_CACHE, RuntimeWarning, stacklevel=2)
