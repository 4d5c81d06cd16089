"""The reads of a durable store (:class:`~.durable.DurableStore`) that answer from its in-process
state without a query: ``len``, ``in``, iteration, ``ids``, the columns and the navigation.

**After a failed write.**  A write that fails is rolled back on the server and the in-process
state is rebuilt from it (:meth:`DurableStore._undo`).  When that rebuild fails too (the server
went away), the state may still hold what the failed call changed, which was never committed;
the store is marked stale.  Each read here first re-reads a stale store (:meth:`refresh`): with
the server back it answers from the committed rows; while the server is still away it raises
the :class:`~.storage_errors.StorageError` of the re-read, never rows that were not committed.

**After close().**  A closed store answers none of these either: each raises the
:class:`~.storage_errors.StorageError` ``"this memory's storage is closed"`` (that of
:meth:`refresh`), as its writes and searches do, never the rows it held when it was closed;
``with store:`` on a closed store raises it too.  A store that is open and not stale pays two
attribute tests a call (``_stale``, ``storage.closed``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_NAVIGATION = ("parent", "children", "ancestors", "descendants", "siblings", "level", "depth", "point", "embedding")
"""Reads of one id: an id this process has not seen yet is looked up after a refresh."""
_PLAIN = ("roots", "tree", "to_dataframe", "time_weights", "build_index")
_COLUMNS = ("ids", "points", "directions", "depths", "embeddings")


def fresh(memory) -> None:
    """Re-read ``memory`` when a failed write left it stale (raises while the storage is away);
    raise the ``StorageError`` of :meth:`refresh` when its storage is closed."""
    if memory._stale or getattr(memory._storage, "closed", False):  # unbound (None): not closed
        memory.refresh()


def _enter(self):
    """``with store:``: the store itself; a closed one raises the ``StorageError`` of its reads."""
    fresh(self)
    return self


def _caught_up(base: type, name: str):
    """A navigation method (``children``, ``parent``, ...) that reads the in-process state as it
    is (no query), and, for an id it does not know, catches up with the other processes once and
    asks again: an id another process just added is found, an unknown one still a ``KeyError``."""
    def method(self, id: str, *args: Any, **kwargs: Any):
        fresh(self)
        read = getattr(super(base, self), name)
        try:
            return read(id, *args, **kwargs)
        except KeyError:
            if not self.refresh():
                raise
            return read(id, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``Memory.{name}``; an id this process has not seen yet is looked up after a refresh()."
    return method


def _plain(base: type, name: str):
    def method(self, *args: Any, **kwargs: Any):
        fresh(self)
        return getattr(super(base, self), name)(*args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``Memory.{name}``, re-read first after a failed write (:mod:`{__name__}`)."
    return method


def _hot(base: type):
    """``len(store)`` and ``id in store``, which users call in loops: the test of :func:`fresh`
    written in (no call to it, no argument packing), so they cost what the generic wrappers did."""
    def __len__(self) -> int:
        if self._stale or getattr(self._storage, "closed", False):
            self.refresh()
        return super(base, self).__len__()

    def __contains__(self, id: object) -> bool:
        if self._stale or getattr(self._storage, "closed", False):
            self.refresh()
        return super(base, self).__contains__(id)
    return __len__, __contains__


def _column(base: type, name: str) -> property:
    def read(self):
        fresh(self)
        return getattr(super(base, self), name)
    return property(read, doc=f"``Memory.{name}``, re-read first after a failed write (:mod:`{__name__}`).")


def install(base: type) -> None:
    """Set the reads of this module on ``base`` (the durable mixin, placed before ``Memory``)."""
    for name in _NAVIGATION:
        setattr(base, name, _caught_up(base, name))
    for name in (*_PLAIN, "__iter__"):
        setattr(base, name, _plain(base, name))
    base.__len__, base.__contains__ = _hot(base)
    for name in _COLUMNS:
        setattr(base, name, _column(base, name))
    base.__enter__ = _enter
