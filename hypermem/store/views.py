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
        return list(self.state.ids)

    @property
    def points(self) -> torch.Tensor:
        """All points ``(n, dim)`` in insertion order (computed from directions and depths)."""
        with self.state.lock:
            n = self.state.n
            return P.point_at(self.state.direction[:n], self.state.depth[:n], self.curvature)

    @property
    def directions(self) -> torch.Tensor:
        """Unit directions ``(n, dim)`` (a view of the store's tensor; do not modify)."""
        return self.state.direction[: self.state.n]

    @property
    def depths(self) -> torch.Tensor:
        """Hyperbolic radii ``(n,)`` (a view; do not modify)."""
        return self.state.depth[: self.state.n]

    @property
    def embeddings(self) -> torch.Tensor:
        """Raw embeddings ``(n, dim)``, float64 on the CPU (a view; do not modify)."""
        return self.state.embedding[: self.state.n]

    # ------------------------------------------------------------------ navigation
    def parent(self, id: str) -> str | None:
        return self.state.record(id).parent_id

    def children(self, id: str) -> list[str]:
        self.state.record(id)
        return list(self.state.children.get(id, ()))

    def ancestors(self, id: str) -> list[str]:
        """Ancestors from the parent up to the root."""
        out: list[str] = []
        cur = self.state.record(id).parent_id
        while cur is not None:
            out.append(cur)
            cur = self.state.records[cur].parent_id
        return out

    def descendants(self, id: str) -> list[str]:
        """All descendants, breadth first."""
        self.state.record(id)
        out: list[str] = []
        frontier = list(self.state.children.get(id, ()))
        while frontier:
            out.extend(frontier)
            frontier = [c for p in frontier for c in self.state.children.get(p, ())]
        return out

    def siblings(self, id: str) -> list[str]:
        p = self.state.record(id).parent_id
        pool = self.state.children.get(p, ()) if p is not None else self.roots()
        return [i for i in pool if i != id]

    def roots(self) -> list[str]:
        return [i for i in self.state.ids if self.state.records[i].parent_id is None]

    def level(self, id: str) -> int:
        self.state.record(id)
        return self.state.levels[self.state.row[id]]

    def depth(self, id: str) -> float:
        """Hyperbolic distance of ``id``'s point from the origin."""
        self.state.record(id)
        return float(self.state.depth[self.state.row[id]])

    def point(self, id: str) -> torch.Tensor:
        """The point ``(dim,)`` of ``id``."""
        self.state.record(id)
        r = self.state.row[id]
        return P.point_at(self.state.direction[r], self.state.depth[r], self.curvature)

    def embedding(self, id: str) -> torch.Tensor:
        self.state.record(id)
        return self.state.embedding[self.state.row[id]].clone()

    # ------------------------------------------------------------------ views
    def stats(self, at_time: datetime | None = None) -> dict[str, Any]:
        """Summary numbers: counts, levels, depths, timestamps, mean temporal weight."""
        with self.state.lock:
            n = self.state.n
            hist: dict[int, int] = {}
            for lv in self.state.levels:
                hist[lv] = hist.get(lv, 0) + 1
            w = self._weights_all(at_time) if n else None
            d = self.state.depth[:n]
            t = self.state.time[:n]
            return {
                "count": n,
                "roots": sum(1 for i in self.state.ids if self.state.records[i].parent_id is None),
                "max_level": max(self.state.levels, default=0),
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
                "accesses": int(self.state.access[:n].sum()) if n else 0,
                "dtype": str(self.dtype).replace("torch.", ""),
                "device": str(self.device),
            }

    def table(self, at_time: datetime | None = None) -> list[dict[str, Any]]:
        """Plain rows: id, text, parent, level, depth, time, weight, accesses, meta."""
        with self.state.lock:
            w = self._weights_all(at_time).tolist() if self.state.n else []
            dep = self.state.depth[: self.state.n].tolist()
            rows = []
            for r, i in enumerate(self.state.ids):
                rec = self.state.records[i]
                rows.append({"id": i, "text": rec.text, "parent": rec.parent_id, "level": self.state.levels[r],
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
        with self.state.lock:
            tops = [root] if root is not None else self.roots()
            if root is not None:
                self.state.record(root)
            lines: list[str] = []

            def label(i: str) -> str:
                text = self.state.records[i].text.replace("\n", " ")
                if len(text) > max_text:
                    text = text[: max(0, max_text - 1)] + "…"
                return f"{text}  [{i}]"

            for top in tops:
                lines.append(label(top))
                stack = [(c, "", j == len(self.state.children.get(top, ())) - 1)
                         for j, c in enumerate(self.state.children.get(top, ()))][::-1]
                while stack:
                    node, prefix, last = stack.pop()
                    lines.append(prefix + ("└── " if last else "├── ") + label(node))
                    kids = self.state.children.get(node, ())
                    child_prefix = prefix + ("    " if last else "│   ")
                    stack.extend((c, child_prefix, j == len(kids) - 1) for j, c in reversed(list(enumerate(kids))))
            return "\n".join(lines)
