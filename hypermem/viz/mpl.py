"""A matplotlib drawing of a memory in the Poincaré disk (the ``viz`` extra)."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import torch

from .export import coordinates
from .payload import memory_labels
from .snapshot import snapshot

__all__ = ["plot", "geodesic_arc", "geodesic_arcs", "pick_labels", "tree_levels", "MAX_LABELS"]

LEVEL_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
MAX_LABELS = 40
"""Default most labels :func:`plot` writes (the shallowest, then heaviest, that have room)."""


def geodesic_arc(a: tuple[float, float], b: tuple[float, float], samples: int = 24) -> list[tuple[float, float]]:
    r"""Points along the hyperbolic geodesic between ``a`` and ``b`` in the unit disk.

    The geodesic is the arc of the circle orthogonal to the boundary through ``a`` and
    ``b`` (its centre ``c`` solves ``2 c.a = |a|^2 + 1``, ``2 c.b = |b|^2 + 1``), or the
    straight segment when ``a``, ``b`` and the origin are collinear.

    >>> pts = geodesic_arc((0.5, 0.0), (0.0, 0.5))
    >>> pts[0], pts[-1]
    ((0.5, 0.0), (0.0, 0.5))
    """
    arcs = geodesic_arcs(np.array([a], dtype=np.float64), np.array([b], dtype=np.float64), samples)
    pts = [(float(x), float(y)) for x, y in arcs[0]]
    pts[0], pts[-1] = (float(a[0]), float(a[1])), (float(b[0]), float(b[1]))
    return pts


def geodesic_arcs(a: np.ndarray, b: np.ndarray, samples: int = 24) -> np.ndarray:
    """:func:`geodesic_arc` for many pairs at once: ``a``, ``b`` of shape ``(m, 2)`` give
    ``(m, samples + 1, 2)`` points (vectorised; collinear pairs are straight segments)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 2)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 2)
    ax, ay, bx, by = a[:, 0], a[:, 1], b[:, 0], b[:, 1]
    f = np.linspace(0.0, 1.0, samples + 1)
    out = a[:, None, :] + (b - a)[:, None, :] * f[None, :, None]  # straight by default
    det = ax * by - ay * bx
    curved = np.abs(det) >= 1e-9
    if curved.any():
        ax, ay, bx, by, det = ax[curved], ay[curved], bx[curved], by[curved], det[curved]
        ka, kb = (ax * ax + ay * ay + 1) / 2, (bx * bx + by * by + 1) / 2
        cx, cy = (ka * by - kb * ay) / det, (ax * kb - bx * ka) / det
        r = np.sqrt(np.maximum(cx * cx + cy * cy - 1, 0.0))
        t0, t1 = np.arctan2(ay - cy, ax - cx), np.arctan2(by - cy, bx - cx)
        d = (t1 - t0 + math.pi) % (2 * math.pi) - math.pi
        t = t0[:, None] + d[:, None] * f[None, :]
        out[curved] = np.stack([cx[:, None] + r[:, None] * np.cos(t), cy[:, None] + r[:, None] * np.sin(t)], axis=2)
        out[curved, 0], out[curved, -1] = a[curved], b[curved]
    return out


def tree_levels(parent: np.ndarray) -> np.ndarray:
    """Each row's hierarchy level (0 for a root) from its parent row (``-1`` for a root),
    vectorised by pointer jumping (``log2`` of the depth steps, deep chains included).

    >>> tree_levels(np.array([-1, 0, 1, 0])).tolist()
    [0, 1, 2, 1]
    """
    parent = np.asarray(parent, dtype=np.int64)
    anc = parent.copy()  # pointer jumping: dist[i] links from i up to anc[i]; log(depth) steps
    dist = (parent >= 0).astype(np.int64)
    while (anc >= 0).any():
        has = np.flatnonzero(anc >= 0)
        up = anc[has]
        new_dist, new_anc = dist.copy(), anc.copy()
        new_dist[has] += dist[up]
        new_anc[has] = anc[up]
        dist, anc = new_dist, new_anc
    return dist


def pick_labels(px: np.ndarray, py: np.ndarray, widths: np.ndarray, height: float, order: np.ndarray,
                max_labels: int = MAX_LABELS, bounds: tuple[float, float, float, float] | None = None,
                gap: float = 3.0) -> list[tuple[int, int]]:
    """Choose labels that do not overlap, in screen space (pixels, y up): for each row of
    ``order`` in turn, a box of ``widths[i]`` x ``height`` to the right of its point, else to
    the left, is kept when it overlaps no kept box (a grid of cells the size of a label's
    height finds the neighbours) and lies inside ``bounds`` (x0, y0, x1, y1); at most
    ``max_labels`` (and only the first ``max(600, 20 max_labels)`` rows are tried).  Returns ``[(row, side)]``, ``side`` +1 right, -1 left.

    >>> pick_labels(np.array([0.0, 1.0, 0.0]), np.array([0.0, 0.0, 50.0]), np.array([40.0] * 3), 10.0,
    ...             np.array([0, 1, 2]))
    [(0, 1), (1, -1), (2, 1)]
    """
    cell = max(float(height), 1.0)
    grid: dict[tuple[int, int], list[tuple[float, float, float, float]]] = {}
    kept: list[tuple[int, int]] = []
    for i in order[: max(600, 20 * max_labels)].tolist():  # the first candidates only: bounded time
        if len(kept) >= max_labels:
            break
        for side in (1, -1):
            x0 = px[i] + gap if side > 0 else px[i] - gap - widths[i]
            box = (x0, py[i] - height / 2, x0 + widths[i], py[i] + height / 2)
            if bounds is not None and (box[0] < bounds[0] or box[1] < bounds[1] or box[2] > bounds[2]
                                       or box[3] > bounds[3]):
                continue
            cells = [(gx, gy) for gx in range(int(box[0] // cell), int(box[2] // cell) + 1)
                     for gy in range(int(box[1] // cell), int(box[3] // cell) + 1)]
            if any(box[0] < o[2] and o[0] < box[2] and box[1] < o[3] and o[1] < box[3]
                   for c in cells for o in grid.get(c, ())):
                continue
            for c in cells:
                grid.setdefault(c, []).append(box)
            kept.append((int(i), side))
            break
    return kept


def plot(memory, ax=None, labels: bool = False, at_time: datetime | None = None, layout: str = "auto",
         max_label: int = 24, max_labels: int = MAX_LABELS):
    """Draw ``memory`` in the Poincaré disk with matplotlib and return the axes.

    Radii are the exact depths (see :mod:`hypermem.viz.layout`), parent links are
    geodesics (one ``LineCollection``), colour is the hierarchy level, size and opacity the
    time weight at ``at_time``.  ``labels`` writes short labels (as in the inspector: meta
    ``label``, ``name``, ``lemma`` or ``title``, else the first words; cut to ``max_label``
    characters) for at most ``max_labels`` memories: the shallowest first (then the
    heaviest), each to the right of its point or else to the left, skipped where it would
    overlap a label already written.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> from hypermem import Memory
    >>> mem = Memory(); root = mem.add("animals"); _ = mem.add("dogs", parent=root)
    >>> ax = plot(mem, labels=True)
    >>> len(ax.collections[0].get_offsets()), len(ax.texts)
    (2, 2)
    """
    try:
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
    except ImportError as exc:
        raise ImportError('plot needs matplotlib: pip install "hypermem-torch[viz]"') from exc
    if isinstance(max_labels, bool) or not isinstance(max_labels, int) or max_labels < 0:
        raise ValueError(f"max_labels must be an integer >= 0, got {max_labels!r}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 6))
    snap = snapshot(memory)  # one state: records, weights and layout agree
    xy, used = coordinates(snap, layout)
    records, parent = snap.records, snap.parent
    weights = snap.weights(at_time) if records else torch.zeros(0, dtype=torch.float64)
    levels = tree_levels(parent)
    ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="#444", lw=1.2))
    pts = xy.to("cpu", torch.float64).numpy().reshape(-1, 2)
    kids = np.flatnonzero(parent >= 0)
    arcs = geodesic_arcs(pts[parent[kids]], pts[kids]) if kids.size else np.zeros((0, 2, 2))
    w = weights.detach().to("cpu", torch.float64).clamp(0, 1).numpy()
    palette = np.array([_rgba(c, 1.0) for c in LEVEL_COLORS]).reshape(-1, 4)
    colors = palette[levels % len(LEVEL_COLORS)] if len(records) else np.zeros((0, 4))
    colors[:, 3] = np.clip(0.25 + 0.75 * w, 0, 1)
    ax.scatter(pts[:, 0], pts[:, 1], s=12 + 40 * w, c=colors, zorder=2, edgecolors="none")
    # The points stay collections[0], as before the links were one collection.
    ax.add_collection(LineCollection(arcs, colors="#888", linewidths=0.7, alpha=0.6, zorder=1))
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(f"{len(records)} memories ({used} layout)", fontsize=10)
    if labels and records and max_labels:
        _write_labels(ax, pts, memory_labels(records), levels, w, max_label, max_labels)
    return ax


def _write_labels(ax, pts, names, levels, w, max_label, max_labels, fontsize=7):
    texts = [n if len(n) <= max_label else n[: max_label - 1] + "…" for n in names]
    fig = ax.figure
    ax.apply_aspect()
    screen = ax.transData.transform(pts)
    px_per_pt = fig.dpi / 72
    widths = np.array([0.62 * fontsize * px_per_pt * max(len(t), 1) for t in texts])
    height = 1.35 * fontsize * px_per_pt
    order = np.lexsort((np.arange(len(texts)), -w, levels))
    box = ax.get_window_extent()
    bounds = (box.x0, box.y0, box.x1, box.y1)
    for i, side in pick_labels(screen[:, 0], screen[:, 1], widths, height, order, max_labels, bounds,
                               gap=3 * px_per_pt):
        ax.annotate(texts[i], (pts[i, 0], pts[i, 1]), fontsize=fontsize, xytext=(3 * side, 0),
                    textcoords="offset points", ha="left" if side > 0 else "right", va="center",
                    annotation_clip=True, bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none",
                                                "alpha": 0.6})


def _rgba(hex_color: str, alpha: float) -> tuple[float, float, float, float]:
    h = hex_color.lstrip("#")
    return (int(h[0:2], 16) / 255, int(h[2:4], 16) / 255, int(h[4:6], 16) / 255, max(0.0, min(1.0, alpha)))
