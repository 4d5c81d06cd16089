r"""The read-only views of the mirror-free PostgreSQL client (:class:`.server.ServerMemory`),
and the names of the ``Memory`` methods it does not offer.

Offered, each one read transaction of server queries (nothing kept afterwards):

* ``tree`` (the rows' text, parent and depth; the whole store or one subtree);
* ``table`` / ``to_dataframe`` (the rows with their levels, from one recursive query, and
  their time weights computed in the process by the decay policy, as in ``Memory.table``);
* ``time_weights`` (all memories in insertion order, or the given ids);
* ``embed_query`` (the embedder only: no row is read).

Not offered: the methods that need every row's vectors in the process (the columns
``points`` / ``directions`` / ``depths`` / ``embeddings``, ``save``, ``to_json``, ``inspect``,
``plot``, the in-process index, parent suggestion).  Asking for one raises an
``AttributeError`` naming the method and what to use instead (the mirrored
``Memory.open(url)``, a per-memory method, a ``hypermem`` command on the URL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import torch

from ...temporal import policy_weights
from ...temporal.clock import to_seconds
from ..views import MemoryViews, tree_text
from . import server_writes as W
from .rows import record_of

_M = "hypermem_memories"
_MIRROR = "open the store with its in-process mirror, Memory.open(url)"
_TIMES = ("t", "access_count", "valid_from", "valid_until")
_ROW = ("id", "text", "parent_id", "t", "valid_from", "valid_until", "access_count", "last_accessed", "meta", "depth")
_LEVELED = (f"WITH RECURSIVE lv(id, level) AS (SELECT id, 0 FROM {_M} WHERE parent_id IS NULL UNION ALL "
            f"SELECT m.id, lv.level + 1 FROM {_M} m JOIN lv ON m.parent_id = lv.id) "
            f"SELECT {', '.join('m.' + c for c in _ROW)}, lv.level FROM {_M} m JOIN lv ON lv.id = m.id"
            "{where} ORDER BY m.seq, m.id")

MIRROR_ONLY: dict[str, str] = {
    "points": "point(id) reads one memory's point from the server; for the whole column " + _MIRROR,
    "directions": "point(id) reads one memory's point from the server; for the whole column " + _MIRROR,
    "depths": "depth(id) reads one memory's depth from the server; for the whole column " + _MIRROR,
    "embeddings": "embedding(id) reads one memory's embedding from the server; for the whole column " + _MIRROR,
    "save": "copy the store with Memory.open(url).save(path), or export it: hypermem export URL out.json",
    "to_json": "export the store with hypermem export URL out.json, or " + _MIRROR,
    "inspect": "write the page with hypermem inspect URL -o page.html, or " + _MIRROR,
    "plot": "draw it with Memory.open(url).plot() (the mirror), or write the page: hypermem inspect URL -o page.html",
    "build_index": "the server's HNSW index is storage.build_ann_index(), searched with search(..., ann=True)",
    "index_recall": "the in-process index is the mirror's: " + _MIRROR,
    "suggest_parents": "parent suggestion places texts in process: " + _MIRROR,
    "reranker": "the placement reranker works in process: " + _MIRROR,
    "select": "select() reads the filter columns in process: " + _MIRROR,
}
"""``Memory`` methods a mirror-free store lacks, with what to use instead."""


def mirror_only(name: str) -> AttributeError:
    """The error of a ``Memory`` method the mirror-free store lacks (plain otherwise)."""
    if name in MIRROR_ONLY:
        return AttributeError(f"ServerMemory (Memory.open(url, mirror=False)) has no {name}(): it needs every row in "
                              f"this process, and this store keeps none; {MIRROR_ONLY[name]}")
    if name == "search_server":  # the mirrored store's server search: here every search is one
        return AttributeError("ServerMemory (Memory.open(url, mirror=False)) has no search_server(): its search() "
                              "runs on the server already; search(..., ann=True) reads the HNSW index")
    return AttributeError(f"'ServerMemory' object has no attribute {name!r}")


def _weights(decay, now: float, rows: Sequence[Sequence[Any]]) -> torch.Tensor:
    """The decay policy's weights at ``now`` of ``(t, access_count, valid_from, valid_until)`` rows."""
    f64 = {"dtype": torch.float64}
    if not rows:
        return torch.zeros(0, **f64)
    t, acc, vf, vu = zip(*rows)
    return policy_weights(decay, now, torch.tensor([to_seconds(x) for x in t], **f64),
                          torch.tensor([float(a) for a in acc], **f64),
                          torch.tensor([to_seconds(x, -math.inf) for x in vf], **f64),
                          torch.tensor([to_seconds(x, math.inf) for x in vu], **f64))


class ServerViews:
    """``tree``, ``table``, ``to_dataframe``, ``time_weights`` and ``embed_query`` of
    :class:`.server.ServerMemory` (see the module docstring)."""

    def __getattr__(self, name: str):
        raise mirror_only(name)

    def tree(self, root: str | None = None, max_text: int = 60) -> str:
        """``Memory.tree``: the hierarchy as indented text, ``[id d=1.50]`` after each text."""
        with self._read() as con:
            if root is None:
                tops = self._roots(con)
                rows = con.execute(f"SELECT id, text, parent_id, depth FROM {_M} ORDER BY sib, seq").fetchall()
            else:
                ids = [i for i, _ in W.subtree(con, root)] if isinstance(root, str) else []
                if not ids:
                    raise KeyError(f"unknown memory id {root!r}")
                tops = [root]
                rows = con.execute(f"SELECT id, text, parent_id, depth FROM {_M} WHERE id = ANY(%s) ORDER BY sib, seq",
                                   (ids,)).fetchall()
        text = {i: (t, float(d)) for i, t, _, d in rows}
        kids: dict[str, list[str]] = {}
        for i, _, p, _ in rows:
            if p is not None:
                kids.setdefault(p, []).append(i)
        return tree_text(tops, kids, lambda i: text[i][0], lambda i: text[i][1], max_text)

    def table(self, at_time: datetime | None = None) -> list[dict[str, Any]]:
        """``Memory.table``: one dict a memory in insertion order (id, text, parent, level,
        depth, time / t, weight, accesses, meta); the weights at ``at_time`` (default now).  At
        an explicit ``at_time``, only the rows recorded by then (``t <= at_time``, as ``stats``)."""
        now_dt = self._query.now(at_time)
        where, params = W.recorded_by(None if at_time is None else now_dt, "m.t")
        with self._read() as con:
            rows = [dict(zip((*_ROW, "level"), r)) for r in con.execute(_LEVELED.format(where=where), params)]
        now = to_seconds(now_dt)
        w = _weights(self.decay, now, [tuple(r[c] for c in _TIMES) for r in rows]).tolist()
        out = []
        for r, weight in zip(rows, w):
            rec = record_of(r)
            when = rec.t.isoformat()
            out.append({"id": rec.id, "text": rec.text, "parent": rec.parent_id, "level": int(r["level"]),
                        "depth": float(r["depth"]), "time": when, "t": when, "weight": weight,
                        "accesses": rec.access_count, "meta": dict(rec.meta)})
        return out

    to_dataframe = MemoryViews.to_dataframe  # :meth:`table` as a pandas.DataFrame

    def time_weights(self, ids: Sequence[str] | None = None, at_time: datetime | None = None) -> torch.Tensor:
        """``Memory.time_weights``: the weights (float64) of ``ids``, or of every memory in
        insertion order, at ``at_time`` (default now)."""
        cols = ", ".join(_TIMES)
        with self._read() as con:
            if ids is None:
                rows = con.execute(f"SELECT {cols} FROM {_M} ORDER BY seq, id").fetchall()
            else:
                ids = list(ids)
                found = {r[0]: r[1:] for r in con.execute(f"SELECT id, {cols} FROM {_M} WHERE id = ANY(%s)",
                                                          ([i for i in ids if isinstance(i, str)],))}
                for i in ids:
                    if i not in found:
                        raise KeyError(f"unknown memory id {i!r}")
                rows = [found[i] for i in ids]
        return _weights(self.decay, to_seconds(self._query.now(at_time)), rows).to(self.device)

    def embed_query(self, query: str, depth: float | None = None) -> torch.Tensor:
        """``Memory.embed_query``: the point of a free-text query (no row is read)."""
        return self._query.embed_query(query, depth)
