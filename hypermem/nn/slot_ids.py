"""The slot ids of :class:`~hypermem.nn.HyperbolicMemory`: a list that caches its id -> row map.

:meth:`HyperbolicMemory.index_of` looks ids up in a dict built once and kept until the ids
change (``O(1)`` a lookup instead of ``O(N)`` a call).  Every change goes through the list:
the layer's constructor, ``append`` / ``remove``, ``load_state_dict`` (``set_extra_state``)
and an assignment ``memory.ids = [...]`` build a new :class:`SlotIds`; an in-place change
(``memory.ids[3] = "x"``, ``.append``, ``.extend``, ``del``, ``.sort()``, ...) drops the map
(``extend``, what ``append`` uses, updates it).

Generated ids (:func:`generate_ids`) are deterministic: the decimal strings ``str(n)`` for
``n = N, N + 1, ...`` (``N`` the number of slots before the write), skipping those in use.
"""

from __future__ import annotations

from collections.abc import Container, Iterable


def _dropping_rows(name: str):
    base = getattr(list, name)

    def method(self, *args, **kwargs):
        self._rows = None
        return base(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


class SlotIds(list):
    """A list of slot ids (strings) with a cached ``{id: row}`` map (:meth:`rows`)."""

    _rows: dict[str, int] | None = None

    def rows(self) -> dict[str, int]:
        """``{id: row}``, built on the first call after a change (the last row of a repeated id)."""
        if self._rows is None:
            self._rows = {i: r for r, i in enumerate(self)}
        return self._rows

    def extend(self, items: Iterable[str]) -> None:
        items = list(items)
        start, rows = len(self), self._rows
        list.extend(self, items)
        if rows is not None:
            rows.update((i, start + r) for r, i in enumerate(items))

    def __getstate__(self):
        return None  # the map is not pickled (deepcopy / torch.save): rebuilt on first use

    for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append", "insert", "pop", "remove",
                  "clear", "sort", "reverse"):
        locals()[_name] = _dropping_rows(_name)
    del _name


def generate_ids(n: int, taken: Container[str], start: int) -> list[str]:
    """``n`` new ids: ``str(start)``, ``str(start + 1)``, ... skipping those in ``taken``."""
    out: list[str] = []
    j = start
    while len(out) < n:
        name = str(j)
        if name not in taken:
            out.append(name)
        j += 1
    return out
