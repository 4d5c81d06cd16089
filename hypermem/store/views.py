"""Read-only views of the memory store: columns, hierarchy navigation, summaries, table, tree."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import torch

from ..geometry import poincare as P
from ..temporal import policy_spec
from ..temporal.clock import from_seconds, to_seconds
from .as_of import keep_at
from .removal import descendants
from .shown_text import shown


class MemoryViews:
    """Read-only views of a store through its :class:`~hypermem.store.state.MemoryState`:
    columns, navigation (``parent``, ``children``, ``ancestors``...) and summaries.  The
    ``Memory`` methods of the same names call it; an unknown id raises ``KeyError``.

    >>> from hypermem import Memory
    >>> from hypermem.embed import HashingEmbedder
    >>> mem = Memory(embedder=HashingEmbedder(dim=16))
    >>> for text, id, parent in [("animal", "a", None), ("dog", "d", "a"), ("cat", "c", "a"),
    ...                          ("puppy", "p", "d")]:
    ...     _ = mem.add(text, id=id, parent=parent)
    >>> mem.parent("p"), mem.children("a"), mem.siblings("d"), mem.roots()
    ('d', ['d', 'c'], ['c'], ['a'])
    >>> mem.ancestors("p"), mem.descendants("a"), mem.level("p")
    (['d', 'a'], ['d', 'c', 'p'], 2)
    """

    def __init__(self, memory):
        self.memory = memory

    # ------------------------------------------------------------------ columns
    @property
    def ids(self) -> list[str]:
        """Ids in insertion order."""
        return list(self.memory.state.ids)

    @property
    def points(self) -> torch.Tensor:
        """All points ``(n, dim)`` in insertion order (computed from directions and depths)."""
        with self.memory.state.lock:
            n = self.memory.state.n
            return P.point_at(self.memory.state.direction[:n], self.memory.state.depth[:n], self.memory.curvature)

    @property
    def directions(self) -> torch.Tensor:
        """Unit directions ``(n, dim)`` (a view of the store's tensor; do not modify)."""
        return self.memory.state.direction[: self.memory.state.n]

    @property
    def depths(self) -> torch.Tensor:
        """Hyperbolic radii ``(n,)`` (a view; do not modify)."""
        return self.memory.state.depth[: self.memory.state.n]

    @property
    def embeddings(self) -> torch.Tensor:
        """Raw embeddings ``(n, dim)``, float64 on the CPU (a view of the column when it is
        float64, else a float64 copy of the exact float32 values; do not modify)."""
        return self.memory.state.embeddings_of()

    # ------------------------------------------------------------------ navigation
    def parent(self, id: str) -> str | None:
        """The parent's id, ``None`` for a root."""
        return self.memory.state.records.parents[self.memory.state.row_of(id)]

    def children(self, id: str) -> list[str]:
        """Direct children, in the order they were added."""
        self.memory.state.row_of(id)
        return list(self.memory.state.children.get(id, ()))

    def ancestors(self, id: str) -> list[str]:
        """Ancestors from the parent up to the root."""
        out: list[str] = []
        cur = self.memory.state.records.parents[self.memory.state.row_of(id)]
        while cur is not None:
            out.append(cur)
            cur = self.memory.state.records.parent(cur)
        return out

    def descendants(self, id: str) -> list[str]:
        """All descendants, breadth first."""
        return descendants(self.memory.state, id)

    def siblings(self, id: str) -> list[str]:
        """The other children of the parent (for a root: the other roots)."""
        p = self.memory.state.records.parents[self.memory.state.row_of(id)]
        pool = self.memory.state.children.get(p, ()) if p is not None else self.roots()
        return [i for i in pool if i != id]

    def roots(self) -> list[str]:
        """Memories without a parent, in insertion order."""
        st = self.memory.state
        return [i for i, p in zip(st.ids, st.records.parents) if p is None]

    def level(self, id: str) -> int:
        """Hierarchy level: 0 for a root, the parent's level + 1 below it."""
        self.memory.state.row_of(id)
        return self.memory.state.levels[self.memory.state.row[id]]

    def depth(self, id: str) -> float:
        """Hyperbolic distance of ``id``'s point from the origin."""
        self.memory.state.row_of(id)
        return float(self.memory.state.depth[self.memory.state.row[id]])

    def point(self, id: str) -> torch.Tensor:
        """The point ``(dim,)`` of ``id``."""
        self.memory.state.row_of(id)
        r = self.memory.state.row[id]
        return P.point_at(self.memory.state.direction[r], self.memory.state.depth[r], self.memory.curvature)

    def embedding(self, id: str) -> torch.Tensor:
        """A copy of ``id``'s raw text embedding ``(dim,)`` (float64, CPU)."""
        self.memory.state.row_of(id)
        return self.memory.state.embeddings_of(self.memory.state.row[id]).clone()

    # ------------------------------------------------------------------ views
    def stats(self, at_time: datetime | None = None) -> dict[str, Any]:
        """Summary numbers: counts, levels, depths, timestamps, mean temporal weight.  At an
        explicit ``at_time`` they describe the store as it was then: the memories created after it
        are left out, as ``search(at_time=...)`` leaves them out (:mod:`hypermem.store.as_of`)."""
        with self.memory.state.lock:
            st, keep = self.memory.state, self._kept(at_time)
            levels, parents = st.levels, st.records.parents
            w = self.memory.searcher.weights(at_time) if st.n else None
            d, t, acc = st.depth[: st.n], st.time[: st.n], st.access[: st.n]
            if keep is not None:  # the rows that existed at at_time
                levels = [lv for lv, k in zip(levels, keep) if k]
                parents = [p for p, k in zip(parents, keep) if k]
                w, d, t, acc = (x[torch.tensor(keep, device=x.device)] for x in (w, d, t, acc))
            n = len(levels)
            hist: dict[int, int] = {}
            for lv in levels:
                hist[lv] = hist.get(lv, 0) + 1
            return {
                "count": n,
                "roots": sum(1 for p in parents if p is None),
                "max_level": max(levels, default=0),
                "levels": dict(sorted(hist.items())),
                "dim": self.memory.dim,
                "curvature": self.memory.curvature,
                "metric": self.memory.metric,
                "decay": policy_spec(self.memory.decay),
                "depth_min": float(d.min()) if n else None,
                "depth_max": float(d.max()) if n else None,
                "oldest": from_seconds(float(t.min())).isoformat() if n else None,
                "newest": from_seconds(float(t.max())).isoformat() if n else None,
                "mean_time_weight": float(w.mean()) if n else None,
                "accesses": int(acc.sum()) if n else 0,
                "dtype": str(self.memory.dtype).replace("torch.", ""),
                "device": str(self.memory.device),
            }

    def _kept(self, at_time: datetime | None) -> list[bool] | None:
        """Which rows existed at an explicit ``at_time`` (None: all of them, or no ``at_time``)."""
        st = self.memory.state
        if at_time is None or st.n == 0:
            return None
        keep = keep_at(st, to_seconds(self.memory.searcher.now(at_time)), True, False)
        return None if bool(keep.all()) else keep.tolist()

    def table(self, at_time: datetime | None = None) -> list[dict[str, Any]]:
        """Plain rows: id, text, parent, level, depth, time, weight, accesses, meta.  The creation
        time (ISO 8601) is under ``"time"`` and, as poincare-memory's rows name it, ``"t"``.  At an
        explicit ``at_time``, only the memories created by then (as :meth:`stats`)."""
        with self.memory.state.lock:
            w = self.memory.searcher.weights(at_time).tolist() if self.memory.state.n else []
            dep = self.memory.state.depth[: self.memory.state.n].tolist()
            keep = self._kept(at_time)
            rows = []
            for r, (i, rec) in enumerate(zip(self.memory.state.ids, self.memory.state.records.values())):
                if keep is not None and not keep[r]:
                    continue
                when = rec.t.isoformat()
                rows.append({"id": i, "text": rec.text, "parent": rec.parent_id, "level": self.memory.state.levels[r],
                             "depth": dep[r], "time": when, "t": when, "weight": w[r],
                             "accesses": rec.access_count, "meta": rec.meta})
            return rows

    def to_dataframe(self, at_time: datetime | None = None):
        """:meth:`table` as a ``pandas.DataFrame`` (the ``pandas`` extra); the creation times
        ``time`` and ``t`` are timezone-aware (UTC) ``datetime64`` columns."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError('to_dataframe needs pandas: pip install "hypermem-torch[pandas]"') from exc
        df = pd.DataFrame(self.table(at_time),
                          columns=["id", "text", "parent", "level", "depth", "time", "t", "weight", "accesses", "meta"])
        for col in ("time", "t"):
            df[col] = pd.to_datetime(df[col], utc=True, format="ISO8601")
        return df

    def tree(self, root: str | None = None, max_text: int = 60) -> str:
        """The hierarchy as indented text (all roots, or the subtree of ``root``), one line a
        memory: its text (at most ``max_text`` characters, newlines as spaces), its id and its
        depth, ``[id d=1.50]``, as poincare-memory prints it.  The indentation stops growing at
        level ``TREE_INDENT_CAP`` (64): a deeper memory keeps that indent and names its level,
        ``└── [level 5123] text  [id d=9.87]``, so a line stays short and a 20,000-deep chain
        takes memory linear in its length (:meth:`tree_lines` yields the same lines one by one)."""
        return "\n".join(self.tree_lines(root, max_text))

    def tree_lines(self, root: str | None = None, max_text: int = 60) -> Iterator[str]:
        """The lines of :meth:`tree`, produced as they are iterated (``hypermem tree`` prints
        them as they come).  The hierarchy, texts and depths are copied under the store's lock
        when this is called (an unknown ``root``: ``KeyError`` here), so later writes do not
        change the lines."""
        st = self.memory.state
        with st.lock:
            tops = [root] if root is not None else self.roots()
            if root is not None:
                st.row_of(root)
            rows = dict(st.row)
            depths = st.depth.tolist()  # one copy off the device, not one sync a memory
            texts = st.records.texts.take(range(len(st.records.texts)))   # one compact copy, read lazily
            kids = {p: list(c) for p, c in st.children.items()}
        return tree_lines(tops, kids, lambda i: texts[rows[i]], lambda i: depths[rows[i]], max_text)


TREE_INDENT_CAP = 64
"""The level past which ``tree`` lines keep a fixed indent and show ``[level N]`` instead."""


def tree_text(tops: Sequence[str], children: Mapping[str, Sequence[str]], text_of: Callable[[str], str],
              depth_of: Callable[[str], float], max_text: int = 60) -> str:
    """:func:`tree_lines` joined by newlines: the text of :meth:`MemoryViews.tree`."""
    return "\n".join(tree_lines(tops, children, text_of, depth_of, max_text))


def tree_lines(tops: Sequence[str], children: Mapping[str, Sequence[str]], text_of: Callable[[str], str],
               depth_of: Callable[[str], float], max_text: int = 60) -> Iterator[str]:
    """The lines of :meth:`MemoryViews.tree` for the subtrees of ``tops`` (iterative: a deep
    chain needs no recursion), ``text  [id d=1.50]`` a memory, ``├──`` / ``└──`` before a child;
    a text's newlines as spaces, terminal controls and bidi overrides as escapes (``\\x1b``).
    Past level ``TREE_INDENT_CAP`` the indent stays that of the cap and the line starts
    ``[level N]`` (a line's length is bounded, not proportional to its depth)."""
    def label(i: str) -> str:
        text = text_of(i).replace("\n", " ")
        if len(text) > max_text:
            text = text[: max(0, max_text - 1)] + "…"
        return f"{shown(text)}  [{shown(i)} d={depth_of(i):.2f}]"   # controls as escapes (store.shown_text)

    for top in tops:
        yield label(top)
        kids = children.get(top, ())
        stack = [(c, "", j == len(kids) - 1, 1) for j, c in enumerate(kids)][::-1]
        while stack:
            node, prefix, last, level = stack.pop()
            tag = f"[level {level}] " if level > TREE_INDENT_CAP else ""
            yield prefix + ("└── " if last else "├── ") + tag + label(node)
            kids = children.get(node, ())
            child_prefix = prefix + ("    " if last else "│   ") if level < TREE_INDENT_CAP else prefix
            stack.extend((c, child_prefix, j == len(kids) - 1, level + 1) for j, c in reversed(list(enumerate(kids))))
