"""Read-only views of the memory store: hierarchy navigation, summaries, table, tree."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import torch

from ..geometry import poincare as P
from ..temporal import policy_spec
from ..temporal.clock import from_seconds


class ViewsMixin:
    """Navigation (``parent``, ``children``, ``ancestors``...) and summaries of a store."""

    # ------------------------------------------------------------------ columns
    @property
    def ids(self) -> list[str]:
        """Ids in insertion order."""
        return list(self._ids)

    @property
    def points(self) -> torch.Tensor:
        """All points ``(n, dim)`` in insertion order (computed from directions and depths)."""
        with self._lock:
            n = self._n
            return P.point_at(self._dir[:n], self._depth[:n], self.curvature)

    @property
    def directions(self) -> torch.Tensor:
        """Unit directions ``(n, dim)`` (a view of the store's tensor; do not modify)."""
        return self._dir[: self._n]

    @property
    def depths(self) -> torch.Tensor:
        """Hyperbolic radii ``(n,)`` (a view; do not modify)."""
        return self._depth[: self._n]

    @property
    def embeddings(self) -> torch.Tensor:
        """Raw embeddings ``(n, dim)``, float64 on the CPU (a view; do not modify)."""
        return self._emb[: self._n]

    # ------------------------------------------------------------------ navigation
    def parent(self, id: str) -> str | None:
        return self._rec(id).parent_id

    def children(self, id: str) -> list[str]:
        self._rec(id)
        return list(self._children.get(id, ()))

    def ancestors(self, id: str) -> list[str]:
        """Ancestors from the parent up to the root."""
        out: list[str] = []
        cur = self._rec(id).parent_id
        while cur is not None:
            out.append(cur)
            cur = self._records[cur].parent_id
        return out

    def descendants(self, id: str) -> list[str]:
        """All descendants, breadth first."""
        self._rec(id)
        out: list[str] = []
        frontier = list(self._children.get(id, ()))
        while frontier:
            out.extend(frontier)
            frontier = [c for p in frontier for c in self._children.get(p, ())]
        return out

    def siblings(self, id: str) -> list[str]:
        p = self._rec(id).parent_id
        pool = self._children.get(p, ()) if p is not None else self.roots()
        return [i for i in pool if i != id]

    def roots(self) -> list[str]:
        return [i for i in self._ids if self._records[i].parent_id is None]

    def level(self, id: str) -> int:
        self._rec(id)
        return self._levels[self._row[id]]

    def depth(self, id: str) -> float:
        """Hyperbolic distance of ``id``'s point from the origin."""
        self._rec(id)
        return float(self._depth[self._row[id]])

    def point(self, id: str) -> torch.Tensor:
        """The point ``(dim,)`` of ``id``."""
        self._rec(id)
        r = self._row[id]
        return P.point_at(self._dir[r], self._depth[r], self.curvature)

    def embedding(self, id: str) -> torch.Tensor:
        self._rec(id)
        return self._emb[self._row[id]].clone()

    # ------------------------------------------------------------------ views
    def stats(self, at_time: datetime | None = None) -> dict[str, Any]:
        """Summary numbers: counts, levels, depths, timestamps, mean temporal weight."""
        with self._lock:
            n = self._n
            hist: dict[int, int] = {}
            for lv in self._levels:
                hist[lv] = hist.get(lv, 0) + 1
            w = self._weights_all(at_time) if n else None
            d = self._depth[:n]
            t = self._time[:n]
            return {
                "count": n,
                "roots": sum(1 for i in self._ids if self._records[i].parent_id is None),
                "max_level": max(self._levels, default=0),
                "levels": dict(sorted(hist.items())),
                "dim": self.dim,
                "curvature": self.curvature,
                "metric": self.metric,
                "decay": policy_spec(self.decay),
                "depth_min": float(d.min()) if n else None,
                "depth_max": float(d.max()) if n else None,
                "oldest": from_seconds(float(t.min())).isoformat() if n else None,
                "newest": from_seconds(float(t.max())).isoformat() if n else None,
                "mean_time_weight": float(w.mean()) if n else None,
                "accesses": int(self._access[:n].sum()) if n else 0,
                "dtype": str(self.dtype).replace("torch.", ""),
                "device": str(self.device),
            }

    def table(self, at_time: datetime | None = None) -> list[dict[str, Any]]:
        """Plain rows: id, text, parent, level, depth, time, weight, accesses, meta."""
        with self._lock:
            w = self._weights_all(at_time).tolist() if self._n else []
            dep = self._depth[: self._n].tolist()
            rows = []
            for r, i in enumerate(self._ids):
                rec = self._records[i]
                rows.append({"id": i, "text": rec.text, "parent": rec.parent_id, "level": self._levels[r],
                             "depth": dep[r], "time": rec.t.isoformat(), "weight": w[r],
                             "accesses": rec.access_count, "meta": dict(rec.meta)})
            return rows

    def to_dataframe(self, at_time: datetime | None = None):
        """:meth:`table` as a ``pandas.DataFrame`` (the ``pandas`` extra)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError('to_dataframe needs pandas: pip install "hypermem-torch[pandas]"') from exc
        return pd.DataFrame(self.table(at_time),
                            columns=["id", "text", "parent", "level", "depth", "time", "weight", "accesses", "meta"])

    def tree(self, root: str | None = None, max_text: int = 60) -> str:
        """The hierarchy as indented text (all roots, or the subtree of ``root``)."""
        with self._lock:
            tops = [root] if root is not None else self.roots()
            if root is not None:
                self._rec(root)
            lines: list[str] = []

            def label(i: str) -> str:
                text = self._records[i].text.replace("\n", " ")
                if len(text) > max_text:
                    text = text[: max(0, max_text - 1)] + "…"
                return f"{text}  [{i}]"

            for top in tops:
                lines.append(label(top))
                stack = [(c, "", j == len(self._children.get(top, ())) - 1)
                         for j, c in enumerate(self._children.get(top, ()))][::-1]
                while stack:
                    node, prefix, last = stack.pop()
                    lines.append(prefix + ("└── " if last else "├── ") + label(node))
                    kids = self._children.get(node, ())
                    child_prefix = prefix + ("    " if last else "│   ")
                    stack.extend((c, child_prefix, j == len(kids) - 1) for j, c in reversed(list(enumerate(kids))))
            return "\n".join(lines)
