"""Looking at a memory (layer 3): disk layouts, snapshots, the HTML inspector, matplotlib.

* :func:`disk_coordinates`, :func:`structural_coordinates` — 2-D unit-disk layouts that
  keep exact hyperbolic depths (:mod:`hypermem.viz.layout`);
* :func:`to_dict`, :func:`to_networkx`, :func:`weight_timeline` — snapshots
  (:mod:`hypermem.viz.export`);
* :func:`render_html` — the self-contained inspector page (:mod:`hypermem.viz.html`);
* :func:`plot` — matplotlib (:mod:`hypermem.viz.mpl`; matplotlib is imported on use).
"""

from .export import LAYOUTS, to_dict, to_networkx, weight_timeline
from .html import render_html
from .layout import disk_coordinates, projection_coordinates, structural_coordinates
from .mpl import plot

__all__ = [
    "LAYOUTS",
    "disk_coordinates",
    "plot",
    "projection_coordinates",
    "render_html",
    "structural_coordinates",
    "to_dict",
    "to_networkx",
    "weight_timeline",
]
