"""Pausing Python's cyclic garbage collector during bulk inserts.

Storing many memories at once allocates hundreds of thousands of small container
objects (records, metadata dicts, index entries).  CPython's cyclic collector runs after
every 700 net allocations of such objects and, every so often, walks *all* tracked
objects of the process, so a bulk insert into a process that already holds millions of
objects (the items being inserted, earlier memories) spends much of its time in
collections that find nothing: on 100,000 memories, about a third of ``add_many``.  The
objects created here hold no reference cycles, so nothing is lost by collecting them
later: :func:`gc_paused` turns automatic collection off for the duration and restores it
after (nested and concurrent pauses are counted; collection resumes when the last one
ends, and only if it was on before the first).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Context manager: no automatic cyclic garbage collection inside (see module docstring)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
