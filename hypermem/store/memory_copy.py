"""``copy.copy(mem)`` of a :class:`~hypermem.store.Memory`, and the class name its ``repr`` shows.

A store is not a flat container: its rows (:class:`~hypermem.store.state.MemoryState`) and the
helpers that read them (the searcher, the placer, the views, the suggester) point at one another
and at the store.  Python's default ``copy.copy`` copies the attribute dict only, so the copy's
helpers would keep ranking and writing through the *original* store (its decay policy, its rows):
a copy that is neither shallow nor independent.  :func:`copy_memory` makes ``copy.copy`` what
``dict.copy`` is to a user: an independent store (records, points, settings, search index and
helpers copied, as ``copy.deepcopy`` does) that shares only what is not store state: the embedder
(a model, possibly large), the clock and the placement reranker.

The copy is taken under the store's lock (``mem.state.lock``, which every write, ``save`` and
``to_json`` hold): a copy made while another thread writes waits for that write and copies
the store before or after it, never halfway.

A store bound to durable storage (``Memory.open``) is refused: a copy would be a second handle
writing the same file or database behind the first one's back.
"""

from __future__ import annotations

import copy
from typing import Any

from .backends.durable import DurableStore

__all__ = ["copy_memory", "shown_class_name"]


def copy_memory(mem: Any) -> Any:
    """An independent copy of the in-process store ``mem`` that shares its embedder, clock and
    reranker (``Memory.__copy__``); a ``TypeError`` for a store bound to durable storage."""
    storage = mem.storage
    if storage is not None:
        where = getattr(storage, "path", None) or "its database"
        raise TypeError(f"copy.copy of a store opened with Memory.open ({where}) would be a second handle writing "
                        f"the same storage: call Memory.open on it again for another handle; for an "
                        f"independent in-process copy, mem.save('snapshot.db') and Memory.load('snapshot.db')")
    with mem.state.lock:   # no write halfway through the copy (store.state: every write holds it)
        shared = (mem.embedder, mem.clock, mem.reranker)
        return copy.deepcopy(mem, {id(x): x for x in shared})


def shown_class_name(mem: Any) -> str:
    """The name of the user's class of ``mem`` (a subclass's own name; for a store of
    ``Memory.open``, the class it was opened as, not the durable class made for it)."""
    return next(c.__name__ for c in type(mem).__mro__ if not issubclass(c, DurableStore))
