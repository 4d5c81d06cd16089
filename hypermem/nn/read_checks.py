"""What :class:`~hypermem.nn.HyperbolicMemory` and :class:`~hypermem.nn.BallEncoder` are given,
checked: the layer's numbers, a read's ``k``, and the values of queries and features.

**``k``** is a Python, NumPy or 0-d torch integer (``np.int64(3)`` and ``torch.tensor(3)`` are
integers; ``True``, ``3.0`` and float tensors are not), at least 1 and **at most the number
of slots**: a larger ``k`` is refused (``ValueError``), not clamped, because a read of ``k``
slots returns ``(batch, k)`` tensors and a silent clamp would change that shape, while
padding with ``-1`` would hide what is almost always a ``k`` meant for another memory.  Read
every slot with ``k=None``.  (Exclusions can still leave fewer than ``k`` slots: those
entries are ``-1`` with weight 0, see :class:`~hypermem.nn.hyperbolic_memory.Readout`.)

**Values** are checked in this order and named as such: NaN or inf coordinates ("query #3
has NaN coordinates"), then a point outside the ball.  These checks read a tensor's value
on the host.  Under ``torch.compile`` that would break the graph (``Tensor.item()``), so
there (``torch.compiler.is_compiling()``) they become ``torch._assert_async`` on CPU (the
compiled graph raises ``RuntimeError`` with a shorter message) and are skipped on other
devices, where a failed device-side assert would leave the CUDA context unusable: check
inputs with one eager call, or call these functions outside the compiled region.  Under
``torch.func.vmap`` there is no single value to read: the ``RuntimeError`` says to build the
layer with ``check_finite=False`` there (for a loss of :mod:`hypermem.nn.losses`: to call it
with ``check_finite=False``); slot indices batched by vmap (``exclude``, ``targets``) are not
range-checked.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from ..geometry import poincare as P
from ..store.checks import METRICS
from .func_transforms import is_vmapped


def check_metric(metric: Any) -> str:
    """``metric`` if it is one of :data:`METRICS` (exactly: ``"Shell"`` is refused), else
    ``ValueError``; what :class:`~hypermem.nn.HyperbolicMemory` checks at construction and on
    every assignment of ``memory.metric``."""
    if not isinstance(metric, str) or metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
    return metric


def as_float(name: str, value: Any, positive: bool = False) -> float:
    """``value`` as a float: a finite Python number (``positive``: above 0), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


def check_k(k, n_slots: int) -> int:
    """``k`` as a Python ``int`` in ``[1, n_slots]`` (see the module docstring)."""
    bad = isinstance(k, bool) or (isinstance(k, torch.Tensor) and (k.dim() != 0 or k.dtype == torch.bool
                                                                   or k.is_floating_point() or k.is_complex()))
    try:
        value = None if bad else operator.index(k)
    except TypeError:
        value = None
    if value is None or value < 1:
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    if value > n_slots:
        raise ValueError(f"k={value} is more than the memory's {n_slots} slots: ask for at most {n_slots}, "
                         "or read every slot with k=None")
    return value


def refuse_empty_mean(name: str, batch: int, reduction: str, what: str = "queries") -> None:
    """An empty batch has no mean: ``ValueError`` (torch's ``cross_entropy`` returns NaN, and its
    backward puts NaN in every gradient).  ``"sum"`` gives 0 with zero gradients, ``"none"`` an
    empty tensor.  A shape, not a value: no host sync, and no graph break under ``torch.compile``.
    The check of every loss of :mod:`hypermem.nn` (:mod:`~hypermem.nn.losses`,
    :meth:`~hypermem.nn.LatentRetrievalReader.loss`)."""
    if batch == 0 and reduction == "mean":
        raise ValueError(f"{name} got an empty batch (0 {what}): its mean is undefined (NaN); "
                         "skip the batch, or pass reduction='sum' (0 for an empty batch)")


LAYER_FIX = "build the layer with check_finite=False (or set layer.check_finite = False)"
"""What :func:`host_check`'s ``RuntimeError`` under ``torch.func.vmap`` tells a layer's user to do."""


def host_check(ok: torch.Tensor, message: Callable[[], str], short: str, fix: str = LAYER_FIX) -> None:
    """Raise ``ValueError(message())`` unless every entry of the boolean ``ok`` is true; under
    ``torch.compile``: ``torch._assert_async(ok.all(), short)`` on CPU, nothing elsewhere.
    Under ``torch.func.vmap``: ``RuntimeError`` saying to ``fix`` it (:data:`LAYER_FIX` for a
    layer; a function names its own ``check_finite=False`` argument)."""
    if torch.compiler.is_compiling():
        if ok.device.type == "cpu":
            torch._assert_async(ok.all(), short)
        return
    try:
        passed = bool(ok.all())
    except RuntimeError as e:  # torch.func.vmap: a batched tensor has no single value to read
        if "vmap" not in str(e):
            raise
        raise RuntimeError(f"check_finite=True reads a value on the host to refuse bad input ('{short}'), "
                           f"which torch.func.vmap cannot: {fix} to run it under vmap, and check inputs "
                           f"outside it ({e})") from None
    if not passed:
        raise ValueError(message())


def _first_bad(ok: torch.Tensor) -> int:
    return int((~ok).nonzero()[0, 0])


def nonfinite_kind(row: torch.Tensor) -> str:
    """``"NaN"``, ``"inf"`` or ``"NaN and inf"``: what a row's non-finite coordinates are."""
    nan, inf = bool(torch.isnan(row).any()), bool(torch.isinf(row).any())
    return "NaN and inf" if nan and inf else ("NaN" if nan else "inf")


def key_error(keys: torch.Tensor, bad: int, ball, emptied: bool = False) -> str:
    """Why key ``bad`` is not a point of ``ball``: NaN / inf coordinates (a diverged step,
    whatever the optimizer; with a learned curvature, its value now), or a finite key on or
    beyond the boundary (an optimizer that ignores the geometry moved it).  ``emptied``: the
    layer was allocated by ``to_empty()`` and no ``load_state_dict()`` filled it since, so the
    likely cause is memory that was never initialised."""
    norm, c = float(keys[bad].norm()), ball.curvature
    if emptied:
        what = (f"has {nonfinite_kind(keys[bad])} coordinates (norm {norm})" if not math.isfinite(norm)
                else f"is not inside the Poincaré ball of curvature {c:g} (norm {norm:.6g})")
        return (f"key #{bad} {what}: the memory may be uninitialised: it was allocated by .to_empty(), which "
                "keeps no values, and no load_state_dict() has filled it since; load its checkpoint "
                "(load_state_dict) or set the keys before reading")
    if not math.isfinite(norm):
        moved = f"; the curvature is learned and is now {c:g}" if ball.learnable else ""
        return (f"key #{bad} has {nonfinite_kind(keys[bad])} coordinates (norm {norm}): an optimizer step "
                f"diverged{moved}; lower the learning rate, or look for NaN in the loss and gradients")
    return (f"key #{bad} has left the Poincaré ball of curvature {c:g} (norm {norm:.6g}, radius "
            f"{ball.radius:.6g}): an optimizer that ignores the geometry (torch.optim.SGD/Adam) moved it; "
            "optimise the keys with geoopt.optim.RiemannianAdam (or RiemannianSGD), which keeps them inside")


def check_finite_rows(x: torch.Tensor, what: str) -> None:
    """``ValueError`` naming the first row of ``x`` ``(..., d)`` with NaN or inf coordinates
    (``what`` names the rows, e.g. ``"query"``)."""
    ok = torch.isfinite(x).all(-1).reshape(-1)
    flat = x.reshape(-1, x.shape[-1])

    def message() -> str:
        bad = _first_bad(ok)
        return f"{what} #{bad} has {nonfinite_kind(flat[bad])} coordinates"

    host_check(ok, message, f"a {what} has NaN or inf coordinates")


def check_query_values(queries: torch.Tensor, c: float | torch.Tensor, what: str = "query",
                       fix: str = LAYER_FIX) -> None:
    """Every query finite (named first) and strictly inside the ball of curvature ``-c`` (a
    float, or the tensor of a learnable curvature): one host sync for both.  ``queries`` is
    ``(B, d)`` or ``(..., d)`` (rows numbered as flattened); ``what`` names a row in the message
    (the losses pass their argument's name); ``fix``: see :func:`host_check`."""
    q = queries.detach().reshape(-1, queries.shape[-1])
    finite = torch.isfinite(q).all(-1)
    inside = P.is_inside(q, c.detach() if isinstance(c, torch.Tensor) else c)

    def message() -> str:
        if not bool(finite.all()):
            bad = _first_bad(finite)
            return f"{what} #{bad} has {nonfinite_kind(q[bad])} coordinates"
        bad, cf = _first_bad(inside), float(c)
        return (f"{what} #{bad} is not inside the Poincaré ball of curvature {cf:g} (norm "
                f"{float(q[bad].norm()):.6g}, radius {cf ** -0.5:.6g})")

    host_check(finite & inside, message, f"a {what} has NaN or inf coordinates or is not inside the Poincaré ball",
               fix)


def check_slot_range(idx: torch.Tensor, n_slots: int, what: str = "slot indices") -> None:
    """Slot indices in ``[-1, n_slots - 1]`` (``-1``: a missing slot); ``IndexError`` naming
    ``what`` and the first entry out of range (an async assert under ``torch.compile``; no
    check of indices batched by ``torch.func.vmap``, which have no value to read: there an
    index out of range fails in the op that uses it)."""
    ok = (idx >= -1) & (idx < n_slots)
    if torch.compiler.is_compiling():
        host_check(ok, str, f"{what} out of range")
    elif not is_vmapped(ok) and not bool(ok.all()):
        bad = int(idx.reshape(-1)[_first_bad(ok.reshape(-1))])
        raise IndexError(f"{what} must be slot indices in [-1, {n_slots - 1}] (-1: none), got {bad}")
