"""The checks of a :class:`~hypermem.train.hierarchy_module.HierarchyModule` checkpoint, run by its
``on_load_checkpoint`` (``HierarchyModule.load_from_checkpoint(path)`` and ``--ckpt_path``).

A checkpoint is read with ``torch.load(weights_only=True)`` (no code runs), but its fields can
still disagree with each other: ``hyper_parameters`` ``dim=3`` beside a ``(1180, 10)`` weight, a
float16 weight for ``dtype: float64``, ``hypermem_nodes="abc"`` (3 names for 1180 rows), a tree
that names no node, NaN points or points outside the ball.  Each such checkpoint is refused with
a ``ValueError`` naming the field, before anything is loaded.
"""

from __future__ import annotations

import math

import torch

__all__ = ["CheckpointError", "check_hierarchy_checkpoint"]

WEIGHT = "embedding.weight"
CURVATURE_KEYS = ("ball.isp_c", "embedding.ball.isp_c")


class CheckpointError(ValueError):
    """A checkpoint whose fields disagree with each other (``hypermem train`` prints it in one line)."""


def _fail(what: str) -> None:
    raise CheckpointError(f"not a consistent HierarchyModule checkpoint: {what}")


def _check_weight(state: dict, hp, dtype: torch.dtype, in_ball: bool) -> torch.Tensor:
    weight = state.get(WEIGHT)
    if not isinstance(weight, torch.Tensor):
        _fail(f"state_dict[{WEIGHT!r}] is missing" if weight is None else
              f"state_dict[{WEIGHT!r}] is a {type(weight).__name__}, not a tensor")
    shape = tuple(weight.shape)
    if weight.dim() != 2 or shape[0] < 1:
        _fail(f"state_dict[{WEIGHT!r}] has shape {shape}, not (nodes, dim)")
    if shape[1] != int(hp.dim):
        _fail(f"state_dict[{WEIGHT!r}] has shape {shape} but hyper_parameters dim is {hp.dim!r}")
    if weight.dtype != dtype:
        _fail(f"state_dict[{WEIGHT!r}] is {str(weight.dtype).replace('torch.', '')} but hyper_parameters "
              f"dtype is {hp.dtype!r}")
    if weight.is_meta:
        return weight
    w = weight.detach()
    if not bool(torch.isfinite(w).all()):
        bad = int((~torch.isfinite(w)).any(dim=1).sum())
        _fail(f"state_dict[{WEIGHT!r}] has {bad} rows with NaN or infinite coordinates")
    if in_ball:
        radius = 1.0 / math.sqrt(float(hp.curvature))
        norms = w.to(torch.float64).norm(dim=1)
        if bool((norms >= radius).any()):
            _fail(f"state_dict[{WEIGHT!r}] has {int((norms >= radius).sum())} points on or outside the ball of "
                  f"curvature {float(hp.curvature):g} (largest norm {float(norms.max()):.6g}, radius {radius:.6g})")
    return weight


def _check_curvature(state: dict, hp) -> None:
    for key in CURVATURE_KEYS:
        isp = state.get(key)
        if isinstance(isp, torch.Tensor) and isp.numel() == 1 and not isp.is_meta:
            c = float(torch.nn.functional.softplus(isp.detach().to(torch.float64)).reshape(()))
            if not math.isclose(c, float(hp.curvature), rel_tol=1e-9):
                _fail(f"state_dict[{key!r}] gives the curvature {c:g} but hyper_parameters curvature is "
                      f"{hp.curvature!r}")


def _check_names(checkpoint: dict, rows: int) -> list[str] | None:
    nodes = checkpoint.get("hypermem_nodes")
    if nodes is None:
        return None  # written before the names were saved: to_memory says so
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(n, str) for n in nodes):
        _fail(f"hypermem_nodes is a {type(nodes).__name__}" + (" holding non-strings" if isinstance(
            nodes, (list, tuple)) else "") + ", not a list of node names")
    if len(nodes) != rows:
        _fail(f"hypermem_nodes has {len(nodes)} names but state_dict[{WEIGHT!r}] {rows} rows")
    if len(set(nodes)) != len(nodes):
        _fail(f"hypermem_nodes repeats {len(nodes) - len(set(nodes))} names")
    return list(nodes)


def _check_tree(checkpoint: dict, names: set[str] | None) -> None:
    tree = checkpoint.get("hypermem_tree")
    if tree is None:
        return
    if not isinstance(tree, (list, tuple)):
        _fail(f"hypermem_tree is a {type(tree).__name__}, not a list of (parent, child) pairs")
    for i, edge in enumerate(tree):
        if not isinstance(edge, (list, tuple)) or len(edge) != 2 or not all(isinstance(x, str) for x in edge):
            _fail(f"hypermem_tree[{i}] is {str(edge)[:60]!r}, not a (parent, child) pair of node names")
        if names is not None and not (edge[0] in names and edge[1] in names):
            missing = edge[0] if edge[0] not in names else edge[1]
            _fail(f"hypermem_tree[{i}] names {missing[:60]!r}, which is not in hypermem_nodes")


def _check_glosses(checkpoint: dict) -> None:
    glosses = checkpoint.get("hypermem_glosses")
    if glosses is None:
        return
    if not isinstance(glosses, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in glosses.items()):
        _fail(f"hypermem_glosses is a {type(glosses).__name__}" + (" holding non-strings" if isinstance(
            glosses, dict) else "") + ", not a dict of node name -> gloss")


def check_hierarchy_checkpoint(checkpoint: dict, hp, dtype: torch.dtype, in_ball: bool) -> list[str] | None:
    """Check ``checkpoint`` (a dict ``torch.load`` returned) against the module's hyperparameters
    ``hp`` (its ``dim``, ``dtype`` as ``dtype``, ``curvature``) and itself; ``in_ball``: the
    points must lie inside the ball of ``hp.curvature`` (Poincaré and cones).  Returns the node
    names (``None`` when the checkpoint has none); raises ``ValueError`` naming the field."""
    state = checkpoint.get("state_dict")
    if not isinstance(state, dict):
        _fail(f"state_dict is a {type(state).__name__}, not a dict")
    schedule = checkpoint.get("hypermem_schedule_epochs")
    if schedule is not None and (isinstance(schedule, bool) or not isinstance(schedule, int) or schedule < 1):
        _fail(f"hypermem_schedule_epochs is {schedule!r}, not a positive integer")
    _check_curvature(state, hp)
    weight = _check_weight(state, hp, dtype, in_ball)
    nodes = _check_names(checkpoint, weight.shape[0])
    _check_tree(checkpoint, None if nodes is None else set(nodes))
    _check_glosses(checkpoint)
    return nodes
