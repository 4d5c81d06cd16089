"""Snapshots of a memory for drawing and analysis: a JSON-able dict, the decay weights on
a grid of times (for the inspector's time slider), and a NetworkX graph.  The layouts'
coordinates (``disk_coordinates``, ``structural_coordinates``) are here too, where
poincare-memory 0.1.4 documents them (``poincare_memory.viz.export``); they live in
:mod:`hypermem.viz.layout`."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import torch

from ..embed.spec import embedder_spec
from ..temporal import policy_spec
from ..temporal.clock import from_seconds, to_seconds, to_utc
from .layout import disk_coordinates, has_hierarchy, projection_coordinates, structural_coordinates
from .snapshot import as_snapshot, consistent, snapshot

LAYOUTS = ("auto", "structural", "projection")
HOUR = 3600.0

__all__ = ["LAYOUTS", "check_layout", "resolve_layout", "coordinates", "to_dict", "weight_timeline", "to_networkx",
           "disk_coordinates", "structural_coordinates"]


def check_layout(layout: str) -> None:
    """A ``ValueError`` naming ``layout`` unless it is one of :data:`LAYOUTS` (checked before any read)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose one of {LAYOUTS}")


def resolve_layout(memory, layout: str = "auto") -> str:
    """``"structural"`` or ``"projection"``; ``"auto"`` is structural when any memory has a parent."""
    check_layout(layout)
    if layout == "auto":
        return "structural" if has_hierarchy(memory) else "projection"
    return layout


def coordinates(memory, layout: str = "auto") -> tuple[torch.Tensor, str]:
    """Unit-disk coordinates ``(n, 2)`` of the chosen layout, and the layout used; ``memory``
    may be a :class:`~.snapshot.Snapshot` (drawn as it is, no new read)."""
    check_layout(layout)
    snap = as_snapshot(memory)
    used = resolve_layout(snap, layout)
    xy = structural_coordinates(snap) if used == "structural" else projection_coordinates(snap)
    return xy, used


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def to_dict(memory, at_time: datetime | None = None, layout: str = "auto") -> dict[str, Any]:
    """A JSON-able snapshot: config (with the ``layout`` used, as the NumPy reference records
    it), stats, one node per memory (id, text, parent,
    children, level, depth, disk coordinates ``x``/``y``, time, weight at ``at_time``,
    access count, validity, meta) and the ``edges`` parent -> child.

    poincare-memory's keys are all there: ``edges`` (``{"source", "target"}``), the config's
    ``now_ms`` and ``count``, the nodes' ``t_ms`` (milliseconds since the epoch, as ``now_ms``)
    and ``accesses``, next to hypermem's ``now``, ``time`` (seconds) and ``access_count``.

    >>> from hypermem import Memory
    >>> mem = Memory(); root = mem.add("animals", id="a"); _ = mem.add("dogs", parent="a", id="d")
    >>> snap = to_dict(mem)
    >>> snap["layout"], [n["id"] for n in snap["nodes"]], snap["nodes"][1]["parent"]
    ('structural', ['a', 'd'], 'a')
    """
    now = to_utc(at_time) if at_time is not None else to_utc(memory.clock())
    check_layout(layout)
    with consistent(memory) as snap:  # one state: no read below catches up again
        levels = [memory.views.level(i) for i in snap.ids]
        children = {i: memory.views.children(i) for i in snap.ids}
        stats = memory.views.stats(at_time=now)
    xy, used = coordinates(snap, layout)
    records = snap.records
    weights = snap.weights(now).tolist() if records else []
    depths = snap.depths.tolist()
    xy_l = xy.tolist()
    nodes = []
    for i, r in enumerate(records):
        nodes.append({
            "id": r.id, "text": r.text, "parent": r.parent_id, "children": children[r.id], "level": levels[i],
            "depth": depths[i], "x": xy_l[i][0], "y": xy_l[i][1], "t": _iso(r.t), "time": to_seconds(r.t),
            "t_ms": to_seconds(r.t) * 1000.0, "weight": weights[i], "access_count": int(r.access_count),
            "accesses": int(r.access_count), "last_accessed": _iso(r.last_accessed),
            "valid_from": _iso(r.valid_from), "valid_until": _iso(r.valid_until), "meta": dict(r.meta),
        })
    return {
        "layout": used,
        "now": now.isoformat(),
        "config": {"curvature": memory.curvature, "dim": memory.dim, "base_depth": memory.base_depth,
                   "depth_step": memory.depth_step, "metric": memory.metric, "decay": policy_spec(memory.decay),
                   "embedder": embedder_spec(memory.embedder), "layout": used,
                   "now_ms": to_seconds(now) * 1000.0, "count": len(records)},
        "stats": stats,
        "nodes": nodes,
        "edges": [{"source": r.parent_id, "target": r.id} for r in records if r.parent_id is not None],
    }


def _round(w: float) -> float:
    return float(f"{w:.4g}")


_FIRST = datetime(1, 1, 1, tzinfo=timezone.utc).timestamp()  # the datetime range in POSIX seconds
_LAST = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()  # whole seconds: no rounding past it


def weight_timeline(memory, steps: int = 61, at_time: datetime | None = None) -> dict[str, Any]:
    """The decay policy's weights of every memory on a grid of times, computed in Python
    with the memory's own policy (so custom policies work too).

    The grid runs from the oldest memory's time to ``max(now, newest) + span / 4``
    (``span`` at least one hour; both ends kept inside years 1..9999 UTC) in ``steps`` equal
    steps, plus ``now`` itself (``at_time`` or the memory's clock).  Access counts are today's.  Weights are rounded to 4
    significant digits.  Returns ``{"seconds", "labels", "weights" (one list per time),
    "index" (the position of now)}``.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps must be an integer >= 2, got {steps!r}")
    now = to_seconds(to_utc(at_time) if at_time is not None else to_utc(memory.clock()))
    now = min(now, _LAST)  # 9999-12-31T23:59:59.999999 rounds to year 10000 as float seconds
    snap = snapshot(memory)  # one state for every time of the grid
    n = snap.n
    times = snap.time.tolist()
    lo = min(times, default=now)
    hi = max(max(times, default=now), now)
    span = max(hi - lo, HOUR)
    hi = min(hi + span / 4, _LAST)  # the padding stops at what a datetime can hold
    lo = max(min(lo, hi - span / 4), _FIRST)  # unchanged unless hi was cut
    grid = sorted({min(max(lo + (hi - lo) * k / (steps - 1), _FIRST), _LAST) for k in range(steps)} | {now})
    weights = []
    for s in grid:
        w = snap.weights(from_seconds(s)).tolist() if n else []
        weights.append([_round(v) for v in w])
    return {"seconds": grid, "labels": [from_seconds(s).isoformat(timespec="minutes") for s in grid],
            "weights": weights, "index": grid.index(now)}


def to_networkx(memory, at_time: datetime | None = None, layout: str = "auto"):
    """A ``networkx.DiGraph``: one node per memory (attributes ``text``, ``parent``, ``level``,
    ``depth``, disk coordinates ``x``/``y`` of ``layout`` (as :func:`to_dict`), ``t`` (a
    datetime), ``t_ms`` (milliseconds since the epoch), ``weight``, ``access_count`` and
    ``accesses`` (the same count), ``meta``), an edge parent -> child.

    >>> from hypermem import Memory
    >>> mem = Memory(); _ = mem.add("animals", id="a"); _ = mem.add("dogs", parent="a", id="d")
    >>> sorted(to_networkx(mem).edges())
    [('a', 'd')]
    """
    try:
        import networkx as nx
    except ImportError as exc:
        raise ImportError('to_networkx needs networkx: pip install networkx') from exc
    g = nx.DiGraph(curvature=memory.curvature, dim=memory.dim)
    check_layout(layout)
    with consistent(memory) as snap:  # one state: no read below catches up again
        levels = [memory.views.level(i) for i in snap.ids]
    records = snap.records
    weights = snap.weights(at_time).tolist() if records else []
    xy = coordinates(snap, layout)[0].tolist()
    depths = snap.depths.tolist()
    for i, r in enumerate(records):
        g.add_node(r.id, text=r.text, parent=r.parent_id, level=levels[i], depth=depths[i],
                   x=xy[i][0], y=xy[i][1], t=r.t, t_ms=to_seconds(r.t) * 1000.0, weight=weights[i],
                   access_count=int(r.access_count), accesses=int(r.access_count), meta=dict(r.meta))
    for r in records:
        if r.parent_id is not None:
            g.add_edge(r.parent_id, r.id)
    return g

