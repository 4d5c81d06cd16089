"""The result of the tree layouts: a ``node -> point`` dict with the whole table and extras."""

from __future__ import annotations

import torch


class Layout(dict):
    """``node -> point`` mapping returned by :func:`~hypermem.hierarchy.sarkar.sarkar_layout`
    and :func:`~hypermem.hierarchy.shadows.shadow_layout`, with extras.

    Attributes: ``points`` (``(n, d)`` tensor in the order of ``nodes``), ``nodes``,
    ``tau`` (the scale used) and ``info`` (a dict: ``tau``, ``tau_chosen``, ``eps_bound``,
    ``min_angle``, ``max_degree``, ``depth``, ``max_radius``, ``dim``).
    """

    points: torch.Tensor
    nodes: list
    tau: float
    info: dict
