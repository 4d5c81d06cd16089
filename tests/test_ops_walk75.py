"""Walk 75 (an operator's minimal container): numba without a writable cache, ``hypermem mcp``
with stdin closed, and the MCP server's log on a non-terminal stderr."""

from __future__ import annotations

import warnings

import numpy as np
import pytest


# ---------------------------------------------------------------------- 1. numba cannot cache
def _sum_of_squares(x):
    s = 0.0
    for v in x:
        s += v * v
    return s


class NoLocator:
    """A numba cache locator that finds no folder, as all of numba's do where none is writable."""

    @classmethod
    def from_function(cls, py_func, source_path):
        return None


def test_a_kernel_compiles_without_the_cache_when_numba_can_write_none(monkeypatch):
    """A non-root user with a read-only (or no) HOME, the package installed by root: numba finds
    no folder for its cache ("cannot cache function ...: no locator available") and training
    died.  Emulated with a cache locator that finds no folder (NUMBA_CACHE_LOCATOR_CLASSES; root can
    write anywhere): the kernel is
    compiled without the cache, gives the same result, and says so once, naming NUMBA_CACHE_DIR."""
    pytest.importorskip("numba")
    from numba.core import config

    from hypermem.hierarchy.lazy_jit import lazy_njit

    if not hasattr(config, "CACHE_LOCATOR_CLASSES"):
        pytest.skip("this numba has no NUMBA_CACHE_LOCATOR_CLASSES")
    monkeypatch.setattr(config, "CACHE_LOCATOR_CLASSES", f"{__name__}.NoLocator")   # numba's own setting
    x = np.arange(5, dtype=np.float64)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fast = lazy_njit(_sum_of_squares)
        assert fast(x) == _sum_of_squares(x) == 30.0
        assert fast(x + 1) == 55.0
    lines = [str(w.message) for w in seen if "NUMBA_CACHE_DIR" in str(w.message)]
    assert len(lines) == 1 and "\n" not in lines[0]
