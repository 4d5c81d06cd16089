"""A Poincaré-disk picture of a hierarchy embedding (matplotlib), for TensorBoard.

Points of dimension above 2 are shown by their first two principal axes, rescaled so
every point keeps its Euclidean norm (the hyperbolic depth stays readable: the boundary
circle is the ideal boundary, general nodes sit near the centre).  Tree edges are drawn
as straight segments, and the ``n_labels`` nodes nearest the origin get their names.

A name with characters the default font lacks (CJK, say) is drawn with an installed font
that has them (:func:`hypermem.viz.fonts.label_fonts`; nothing is downloaded); when none has,
the characters are boxes, matplotlib's per-glyph warnings are silenced and one line on
stderr says so, once per process.
"""

from __future__ import annotations

import sys

import torch

from ..viz.fonts import label_fonts, missing_glyph_note, quiet_missing_glyphs

_NOTED: set[str] = set()


def principal_plane_coordinates(points: torch.Tensor) -> torch.Tensor:
    """``(n, 2)`` coordinates: the points themselves in 2-D; otherwise the projection on the
    two leading principal directions, rescaled to each point's original norm."""
    x = points.detach().to("cpu", torch.float64)
    if x.shape[1] == 2:
        return x
    if x.shape[1] == 1:
        return torch.cat([x, torch.zeros_like(x)], dim=1)
    centred = x - x.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)
    y = x @ v[:2].T
    scale = x.norm(dim=1, keepdim=True) / y.norm(dim=1, keepdim=True).clamp_min(1e-12)
    return y * scale


def poincare_disk_figure(points: torch.Tensor, nodes: list, edges: list | None = None, n_labels: int = 12,
                         title: str = ""):
    """A matplotlib ``Figure`` of the embedding in the unit disk (``c = 1`` scale); draw it inside
    :func:`~hypermem.viz.fonts.quiet_missing_glyphs` (labels without glyphs are noted here, once)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    xy = principal_plane_coordinates(points)
    fig, ax = plt.subplots(figsize=(6, 6), dpi=80)
    ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="0.5", lw=1))
    if edges:
        index = {n: i for i, n in enumerate(nodes)}
        segs = [(index[a], index[b]) for a, b in edges if a in index and b in index]
        for a, b in segs[:20000]:
            ax.plot([xy[a, 0], xy[b, 0]], [xy[a, 1], xy[b, 1]], color="0.8", lw=0.3, zorder=1)
    ax.scatter(xy[:, 0], xy[:, 1], s=3, c="tab:blue", zorder=2)
    order = torch.argsort(xy.norm(dim=1))[:n_labels].tolist()
    texts = [str(nodes[i]).split(".")[0] for i in order]
    families, missing = label_fonts(texts)
    if missing and missing not in _NOTED:   # once per process for the same characters
        _NOTED.add(missing)
        print(missing_glyph_note(missing, "the TensorBoard disk picture (embedding/disk)"), file=sys.stderr,
              flush=True)
    for i, text in zip(order, texts):
        ax.annotate(text, (float(xy[i, 0]), float(xy[i, 1])), fontsize=7, zorder=3, fontfamily=families)
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=9)
    with quiet_missing_glyphs():   # the layout draws the labels: said once above, not per glyph
        fig.tight_layout()
    return fig
