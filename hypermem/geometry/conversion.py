"""Turning user input into tensors, and the checks every public function shares.

Conventions (all of :mod:`hypermem.geometry`):

* inputs may be torch tensors, NumPy arrays or nested lists;
* torch floating tensors keep their dtype and device; NumPy floating arrays keep their
  dtype (float16, float32 or float64) and go to the CPU; lists, scalars and integer
  arrays become float64; next to a torch tensor, everything takes that tensor's dtype
  and device (torch tensors decide, then NumPy arrays);
* any array ``np.asarray`` takes is accepted: non-contiguous ones are viewed as they are,
  those with negative strides (``X[::-1]``) or read-only ones are copied;
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
    if not arr.flags.writeable or any(s < 0 for s in arr.strides):
        # torch cannot view negative strides, and a tensor must not alias read-only memory
        # (torch warns that writing it is undefined): these two take a copy, nothing else does.
        arr = np.array(arr)
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


Curvature = float | torch.Tensor
"""A curvature argument: a Python number (checked once) or a tensor (a learnable curvature)."""

MIN_CURVATURE = 1e-30
"""Smallest curvature accepted.  A ball of curvature ``c`` is Euclidean to a relative
``c r^2`` over radius ``r``: at ``1e-30`` that is below float64's rounding up to ``r = 1e7``.
The distance's ``u = 2c ||x - y||^2 / ((1 - c||x||^2)(1 - c||y||^2))`` is a normal float64 for
every pair at this curvature; in float32 it is for pairs further apart than
``1e-4 / sqrt(c / 1e-30)`` (closer pairs lose digits gradually in the subnormals).  Below it
use a Euclidean metric (``2 ||x - y||`` is the ``c -> 0`` limit of the distance)."""


def check_curvature(curvature: Any) -> float:
    """Return ``curvature`` as a float, or raise ``ValueError`` unless finite and at least
    :data:`MIN_CURVATURE` (positive)."""
    if isinstance(curvature, torch.Tensor):
        if curvature.numel() != 1:
            raise ValueError(f"curvature must be a single number, got shape {tuple(curvature.shape)}")
        curvature = float(curvature.detach())
    if isinstance(curvature, bool) or not isinstance(curvature, Real):
        raise ValueError(f"curvature must be a finite positive number, got {curvature!r}")
    value = float(curvature)
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"curvature must be a finite positive number, got {curvature!r}")
    if value < MIN_CURVATURE:
        raise ValueError(f"curvature {value!r} is below the smallest one hypermem computes with, "
                         f"{MIN_CURVATURE:g}: such a ball is Euclidean to float precision; use a Euclidean "
                         "metric (2 ||x - y|| is the c -> 0 limit of the hyperbolic distance)")
    return value


def checked_curvature(c: Any) -> float | torch.Tensor:
    """``c`` as the pure functions of :mod:`hypermem.geometry.poincare` take it, checked by the
    rule of :func:`check_curvature` where that is free.

    A number (Python, NumPy) comes back as a checked float.  A tensor (a learnable curvature)
    comes back itself, keeping its graph and device: bool and complex tensors are refused
    (``TypeError``), and its value is checked only when reading it costs no device sync and
    no graph break: a single element on the CPU, outside ``torch.compile`` and
    ``torch.jit`` tracing.  On an accelerator, or compiled, a tensor curvature is not read
    (a NaN or negative one gives NaN): check it where it is made, as
    :class:`~hypermem.geometry.PoincareBall` and its ``load_state_dict`` do.  Under
    ``torch.compile`` a number is not read either: ``dynamic=True`` traces a float attribute
    as a symbol (``torch.SymFloat``), whose value is not known while tracing (the ball checked
    it when it was made).
    """
    if torch.compiler.is_compiling() and not isinstance(c, torch.Tensor):
        return c  # torch.compile(dynamic=True) traces a float as a symbol: no value to read
    if not isinstance(c, torch.Tensor):
        return check_curvature(c)
    if c.dtype == torch.bool or c.is_complex():
        raise TypeError(f"curvature must be a real tensor, got {c.dtype}")
    if (c.device.type == "cpu" and c.numel() == 1 and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing()):
        check_curvature(c)
    return c


def sqrt_curvature(c: Curvature) -> Curvature:
    """``sqrt(c)`` of a checked curvature: a float for a float, a tensor (differentiable) for a tensor."""
    return c**0.5 if isinstance(c, torch.Tensor) else math.sqrt(c)
