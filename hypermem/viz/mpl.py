"""A matplotlib drawing of a memory in the Poincaré disk (the ``viz`` extra)."""

from __future__ import annotations

import math
from datetime import datetime

import torch

from .export import coordinates
from .payload import memory_labels

__all__ = ["plot", "geodesic_arc"]

LEVEL_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")


def geodesic_arc(a: tuple[float, float], b: tuple[float, float], samples: int = 24) -> list[tuple[float, float]]:
    r"""Points along the hyperbolic geodesic between ``a`` and ``b`` in the unit disk.

    The geodesic is the arc of the circle orthogonal to the boundary through ``a`` and
    ``b`` (its centre ``c`` solves ``2 c.a = |a|^2 + 1``, ``2 c.b = |b|^2 + 1``), or the
    straight segment when ``a``, ``b`` and the origin are collinear.

    >>> pts = geodesic_arc((0.5, 0.0), (0.0, 0.5))
    >>> pts[0], pts[-1]
    ((0.5, 0.0), (0.0, 0.5))
    """
    (ax, ay), (bx, by) = a, b
    det = ax * by - ay * bx
    if abs(det) < 1e-9:
        return [(ax + (bx - ax) * k / samples, ay + (by - ay) * k / samples) for k in range(samples + 1)]
    ka, kb = (ax * ax + ay * ay + 1) / 2, (bx * bx + by * by + 1) / 2
    cx, cy = (ka * by - kb * ay) / det, (ax * kb - bx * ka) / det
    r = math.sqrt(max(cx * cx + cy * cy - 1, 0.0))
    t0, t1 = math.atan2(ay - cy, ax - cx), math.atan2(by - cy, bx - cx)
    d = (t1 - t0 + math.pi) % (2 * math.pi) - math.pi
    pts = [(cx + r * math.cos(t0 + d * k / samples), cy + r * math.sin(t0 + d * k / samples))
           for k in range(samples + 1)]
    pts[0], pts[-1] = (ax, ay), (bx, by)
    return pts


def plot(memory, ax=None, labels: bool = False, at_time: datetime | None = None, layout: str = "auto",
         max_label: int = 24):
    """Draw ``memory`` in the Poincaré disk with matplotlib and return the axes.

    Radii are the exact depths (see :mod:`hypermem.viz.layout`), parent links are
    geodesics, colour is the hierarchy level, size and opacity the time weight at
    ``at_time``.  ``labels`` writes each memory's short label (as in the inspector: meta ``label``,
    ``name``, ``lemma`` or ``title``, else the first words; cut to ``max_label`` characters).

    >>> import matplotlib; matplotlib.use("Agg")
    >>> from hypermem import Memory
    >>> mem = Memory(); root = mem.add("animals"); _ = mem.add("dogs", parent=root)
    >>> ax = plot(mem, labels=True)
    >>> len(ax.collections[0].get_offsets())
    2
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError('plot needs matplotlib: pip install "hypermem-torch[viz]"') from exc
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 6))
    xy, used = coordinates(memory, layout)
    with memory.state.lock:
        records = list(memory)
        weights = memory.time_weights(at_time=at_time) if records else torch.zeros(0, dtype=torch.float64)
        levels = [memory.level(r.id) for r in records]
        row = {r.id: i for i, r in enumerate(records)}
    ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="#444", lw=1.2))
    xs, ys = xy[:, 0].tolist(), xy[:, 1].tolist()
    for i, r in enumerate(records):
        if r.parent_id is not None:
            j = row[r.parent_id]
            arc = geodesic_arc((xs[j], ys[j]), (xs[i], ys[i]))
            ax.plot([p[0] for p in arc], [p[1] for p in arc], color="#888", lw=0.7, alpha=0.6, zorder=1)
    w = weights.detach().to("cpu", torch.float64).tolist()
    colors = [LEVEL_COLORS[lv % len(LEVEL_COLORS)] for lv in levels]
    ax.scatter(xs, ys, s=[12 + 40 * v for v in w], c=[_rgba(c, 0.25 + 0.75 * v) for c, v in zip(colors, w)],
               zorder=2, edgecolors="none")
    if labels:
        for i, name in enumerate(memory_labels(records)):
            text = name if len(name) <= max_label else name[: max_label - 1] + "…"
            ax.annotate(text, (xs[i], ys[i]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(f"{len(records)} memories ({used} layout)", fontsize=10)
    return ax


def _rgba(hex_color: str, alpha: float) -> tuple[float, float, float, float]:
    h = hex_color.lstrip("#")
    return (int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255, max(0.0, min(1.0, alpha)))
