"""Handing the heap a bulk insert or load freed back to the operating system.

A large ``add_many`` or the load of a store allocates temporaries (the checked batch, rows
read from a database, embeddings on their way to the columns) and frees them when it ends.
glibc's ``malloc`` keeps freed memory in the process for reuse; what it keeps between live
allocations stays in the resident set, about 130 bytes a memory after storing a million
(benchmarks/RESULTS.md, "Records as columns").  ``malloc_trim(0)`` (glibc >= 2.8) returns
every free page of the heap to the kernel (``madvise(MADV_DONTNEED)``), not only the top:
:func:`trim_heap` calls it after a batch of at least :data:`TRIM_ROWS` memories, where its
cost (a walk of the free lists, milliseconds) is small beside the batch's.  On other C
libraries (macOS, musl, Windows) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

__all__ = ["TRIM_ROWS", "trim_heap", "trim_after"]

TRIM_ROWS = 10_000
"""The smallest batch after which the heap is trimmed."""

_trim = None
_looked = False


def _malloc_trim():
    global _trim, _looked
    if not _looked:
        _looked = True
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
            try:
                fn = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
                _trim = fn
            except (OSError, AttributeError):
                _trim = None
    return _trim


def trim_heap() -> bool:
    """Return the heap's free pages to the kernel; True when the C library could."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


def trim_after(rows: int) -> None:
    """:func:`trim_heap` when ``rows`` memories were just stored or loaded (>= :data:`TRIM_ROWS`)."""
    if rows >= TRIM_ROWS:
        trim_heap()
