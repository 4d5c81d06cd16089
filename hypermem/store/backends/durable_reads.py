"""The reads of a durable store (:class:`~.durable.DurableStore`) that answer from its in-process
state: ``len``, ``in``, ``ids`` and the navigation as it is (no query), and the whole-store reads
after a :meth:`refresh`.

**Other processes.**  The whole-store reads, iteration, ``save``, ``to_json``, ``to_dataframe``,
``time_weights`` and the columns ``points``, ``directions``, ``depths``, ``embeddings``, first
:meth:`refresh` (one small query; the changed rows applied), as ``search``, ``get``, ``stats``,
``table`` and ``select`` do: a snapshot holds every memory committed before the call began.
``len``, ``in``, ``ids`` and the navigation (``parent``, ``children``, ``roots``, ``tree``, ...)
answer from the state as of the last refresh, with no query (users call them in loops); an id
this process has not seen yet is looked up after a refresh.  Several reads that must agree:
``refresh()`` once, then hold ``state.lock`` and read ``len``, ``ids`` and ``state``'s fields.

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
attribute tests a call (``_stale``, ``storage.closed``) in ``len``, ``in``, ``ids`` and the navigation.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]

_NAVIGATION = ("parent", "children", "ancestors", "descendants", "siblings", "level", "depth", "point", "embedding")
"""Reads of one id: an id this process has not seen yet is looked up after a refresh."""
_PLAIN = ("roots", "tree", "build_index")
_REFRESHED = ("__iter__", "save", "to_json", "to_dataframe", "time_weights")
"""Reads of the whole store: they catch up with the other processes first."""
_COLUMNS = ("points", "directions", "depths", "embeddings")
"""The whole-store columns: caught up first, as :data:`_REFRESHED`; ``ids`` answers as of the last refresh."""


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


def refreshed(memory) -> None:
    """Catch up with the other processes (:meth:`refresh`): before a whole-store read."""
    memory.refresh()


_HOW = {fresh: "re-read first after a failed write", refreshed: "after a refresh()"}


def _plain(base: type, name: str, catch_up=fresh):
    """``Memory.<name>`` after ``catch_up`` (:func:`fresh` or :func:`refreshed`)."""
    def method(self, *args: Any, **kwargs: Any):
        catch_up(self)
        return getattr(super(base, self), name)(*args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``Memory.{name}``, {_HOW[catch_up]} (:mod:`{__name__}`)."
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


def _column(base: type, name: str, catch_up=fresh) -> property:
    def read(self):
        catch_up(self)
        return getattr(super(base, self), name)
    return property(read, doc=f"``Memory.{name}``, {_HOW[catch_up]} (:mod:`{__name__}`).")


def install(base: type) -> None:
    """Set the reads of this module on ``base`` (the durable mixin, placed before ``Memory``)."""
    for name in _NAVIGATION:
        setattr(base, name, _caught_up(base, name))
    for name in _PLAIN:
        setattr(base, name, _plain(base, name))
    for name in _REFRESHED:
        setattr(base, name, _plain(base, name, refreshed))
    base.__len__, base.__contains__ = _hot(base)
    base.ids = _column(base, "ids")
    for name in _COLUMNS:
        setattr(base, name, _column(base, name, refreshed))
    base.__enter__ = _enter
