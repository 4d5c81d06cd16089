"""Turning user input into tensors, and the checks every public function shares.

Conventions (all of :mod:`hypermem.geometry`):

* inputs may be torch tensors, NumPy arrays or nested lists;
* torch floating tensors keep their dtype and device; NumPy floating arrays keep their
  dtype (float16, float32 or float64) and go to the CPU; lists, scalars and integer
  arrays become float64; next to a torch tensor, everything takes that tensor's dtype
  and device (torch tensors decide, then NumPy arrays);
* points have their coordinates in the last dimension and may carry any number of
  leading batch dimensions, which broadcast.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np
import torch


def _is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def as_tensor(x: Any, *, dtype: torch.dtype | None = None, device: torch.device | str | None = None,
              name: str = "input") -> torch.Tensor:
    """Convert ``x`` to a floating tensor following the package conventions."""
    if _is_tensor(x):
        t = x
        if not t.is_floating_point():
            t = t.to(torch.float64 if dtype is None else dtype)
        if dtype is not None and t.dtype != dtype:
            t = t.to(dtype)
        if device is not None and t.device != torch.device(device):
            t = t.to(device)
        return t
    if dtype is None:
        dtype = numpy_float_dtype(x) or torch.float64
    try:
        arr = np.asarray(x, dtype=_NP_OF[dtype] if dtype in _NP_OF else np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a tensor, an array or a nested list of numbers, "
                        f"got {type(x).__name__}") from exc
    return torch.as_tensor(arr, dtype=dtype, device=device)


_NP_FLOATS = {np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32,
              np.dtype(np.float64): torch.float64}
_NP_OF = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}


def numpy_float_dtype(x: Any) -> torch.dtype | None:
    """The torch dtype of a NumPy floating array or scalar (float16/32/64), else None."""
    if isinstance(x, (np.ndarray, np.generic)):
        return _NP_FLOATS.get(x.dtype)
    return None


def as_tensors(*xs: Any, names: tuple[str, ...] | None = None) -> tuple[torch.Tensor, ...]:
    """Convert several inputs together.

    Torch tensors among the inputs decide the dtype (promoted between them) and the
    device (the first one's); array-likes follow them.  Without any torch tensor, NumPy
    floating arrays decide the dtype (promoted between them, so two float32 arrays stay
    float32), on the CPU; lists and scalars alone become float64.
    """
    names = names or tuple(f"input {i}" for i in range(len(xs)))
    tensors = [x for x in xs if _is_tensor(x)]
    if tensors:
        dtype = None
        for t in tensors:
            td = t.dtype if t.is_floating_point() else torch.float64
            dtype = td if dtype is None else torch.promote_types(dtype, td)
        device = tensors[0].device
        for t in tensors[1:]:
            if t.device != device:
                raise ValueError(f"inputs are on different devices: {device} and {t.device}")
    else:
        dtype, device = None, None
        for x in xs:
            nd = numpy_float_dtype(x)
            if nd is not None:
                dtype = nd if dtype is None else torch.promote_types(dtype, nd)
        dtype = dtype or torch.float64
    return tuple(as_tensor(x, dtype=dtype, device=device, name=n) for x, n in zip(xs, names))


def as_points(*xs: Any, names: tuple[str, ...] | None = None, core_dims: int = 1) -> tuple[torch.Tensor, ...]:
    """Like :func:`as_tensors`, then check that the inputs are points with matching dimension.

    The batch shapes ``shape[:-core_dims]`` must broadcast (``core_dims=2`` for sets of
    points such as ``(..., n, d)`` against ``(..., m, d)``; 0 to skip the check).
    """
    names = names or tuple("xyzw"[: len(xs)])
    ts = as_tensors(*xs, names=names)
    dim = None
    for t, n in zip(ts, names):
        if t.dim() == 0:
            raise ValueError(f"{n} must have at least one dimension (the coordinates), got a scalar")
        if t.shape[-1] == 0:
            raise ValueError(f"{n} has zero coordinates (shape {tuple(t.shape)})")
        if dim is None:
            dim = t.shape[-1]
        elif t.shape[-1] != dim:
            raise ValueError(f"dimension mismatch: {names[0]} has {dim} coordinates but {n} has "
                             f"{t.shape[-1]} (shapes {[tuple(u.shape) for u in ts]})")
    if len(ts) > 1 and core_dims > 0:
        try:
            torch.broadcast_shapes(*(t.shape[:-core_dims] for t in ts))
        except RuntimeError as exc:
            raise ValueError(f"batch shapes do not broadcast: {[tuple(u.shape) for u in ts]}") from exc
    return ts


def check_curvature(curvature: Any) -> float:
    """Return ``curvature`` as a float, or raise ``ValueError`` unless finite and positive."""
    if isinstance(curvature, torch.Tensor):
        if curvature.numel() != 1:
            raise ValueError(f"curvature must be a single number, got shape {tuple(curvature.shape)}")
        curvature = float(curvature.detach())
    if isinstance(curvature, bool) or not isinstance(curvature, Real):
        raise ValueError(f"curvature must be a finite positive number, got {curvature!r}")
    value = float(curvature)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"curvature must be a finite positive number, got {curvature!r}")
    return value
