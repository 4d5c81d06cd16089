r"""The inspector's embedded data: a compact, typed snapshot of a memory.

Instead of one JSON object per memory (~800 bytes each), the page gets column arrays:

* ``ids``, ``texts`` and ``labels`` as JSON string lists (a label is ``""`` where it is
  the text itself);
* ``parent`` (``int32`` row of the parent, ``-1`` for a root), ``radius`` (``float32``:
  the drawn point's hyperbolic distance from the origin of the curvature ``-1`` disk,
  ``sqrt(c) r``), ``angle`` (``uint32``: the drawn angle quantised to ``2 pi / 2^32``),
  ``time`` (``float32`` seconds after the oldest memory) and ``access`` (``uint32``, left
  out when all are 0), each as base64 of its little-endian bytes;
* ``born`` (``uint16``): for each memory the first of the slider's times at or after its
  creation time; before it the memory did not exist yet, so the page hides it (a decay
  policy gives a negative age the weight 1, which would show it at full weight); all ``0``
  for :class:`~hypermem.temporal.NoDecay` (the page hides the slider there: a memory dated
  after now is shown, not hidden for good);
* ``weights``: the decay policy's weights **computed in Python** by the memory's own
  policy (custom policies work, the page never re-implements a formula) at
  ``timeline_steps`` equal times from the oldest memory to now (plus ``future`` beyond
  now when asked), as ``uint16`` thousandths (``round(1000 w)``, :data:`WEIGHT_SCALE`: the
  page prints 3 decimals, the digits :meth:`~hypermem.Memory.table`'s weights round to),
  memory by memory and only from the
  memory's ``born`` step on (memory ``i``'s weight at step ``t >= born_i`` is at
  ``sum_{j<i} (steps - born_j) + t - born_i``); left out for
  :class:`~hypermem.temporal.NoDecay`, where time does not count;
* ``meta``, ``valid`` and ``last_accessed`` only for the rows that have them;
* ``suggested``: for each memory placed by ``add(text, parent="auto")``, the rows and scores
  of the parents its hierarchy encoder suggested (those still stored), best first;
  ``config["placed_by"]`` says when a ball hierarchy encoder placed the points (their depths
  are the encoder's, not the declared levels').

The drawn position of row ``i`` is ``tanh(radius_i / 2) * exp(i * angle_i)`` in the unit
disk: the exact depth of the layout, with an angle error below ``1.5e-9`` rad.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import torch

from ..embed.encoder_kind import AUTO_PARENT_KEY, places_points
from ..embed.spec import embedder_spec
from ..temporal import policy_spec
from ..temporal.clock import HOUR, from_seconds, to_seconds, to_utc
from .export import check_layout, coordinates
from .snapshot import consistent

__all__ = ["LABEL_KEYS", "WEIGHT_SCALE", "first_words", "memory_labels", "describe_decay", "time_grid", "suggested_rows", "pack"]

WEIGHT_SCALE = 1000
"""The page's weights are ``uint16`` multiples of ``1 / WEIGHT_SCALE``: exactly the 3 decimals it prints."""

LABEL_KEYS = ("label", "name", "lemma", "title")
"""Metadata keys read for a memory's short label, in this order."""


def first_words(text: str, words: int = 5, chars: int = 40) -> str:
    """The first ``words`` words of ``text``, at most ``chars`` characters (``…`` when cut).

    >>> first_words("any warm-blooded vertebrate having the skin more or less covered with hair")
    'any warm-blooded vertebrate having the…'
    """
    parts = text.split(None, words)
    out = " ".join(parts[:words])
    cut = len(parts) > words
    if len(out) > chars:
        out, cut = out[: chars - 1].rstrip(), True
    return out + "…" if cut else out


def memory_labels(records: list, label: Callable[[Any], Any] | None = None) -> list[str]:
    """Short labels: ``label(record)`` when given, else the first of the meta keys
    :data:`LABEL_KEYS` that is a non-empty string, else :func:`first_words` of the text."""
    if label is not None and not callable(label):
        raise TypeError(f"label must be a callable taking a MemoryRecord, got {type(label).__name__}")
    out = []
    for r in records:
        if label is not None:
            v = label(r)
            if not isinstance(v, str):
                raise TypeError(f"label({r.id!r}) returned {type(v).__name__}, expected a string")
            out.append(v)
            continue
        meta, v = r.meta, None
        if meta:
            v = next((meta[k] for k in LABEL_KEYS if isinstance(meta.get(k), str) and meta[k].strip()), None)
        out.append(v if v is not None else first_words(r.text))
    return out


def _hours(h: float) -> str:
    return f"{h:.4g} h"


def describe_decay(spec: dict) -> str:
    """The decay policy in words, from :func:`~hypermem.temporal.policy_spec`.

    >>> describe_decay({"type": "half_life", "hours": 72.0})
    'half-life 72 h'
    """
    t = spec.get("type")
    if t == "none":
        return "no decay"
    if t == "half_life":
        return f"half-life {_hours(spec['hours'])}"
    if t == "ebbinghaus":
        return (f"Ebbinghaus forgetting, stability {_hours(spec['stability_hours'])} "
                f"(+{spec['boost_per_access'] * 100:g} % per access)")
    if t == "validity":
        return f"validity window (weight {spec['outside_weight']:g} outside)"
    if t == "product":
        return " × ".join(describe_decay(p) for p in spec["policies"])
    return f"custom policy {t}"


def time_grid(oldest: float, now: float, steps: int, future: float = 0.0) -> list[float]:
    """``steps`` equal times (POSIX seconds) from ``oldest`` to ``now + future``, ``now``
    among them; the span is at least an hour."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
        raise ValueError(f"steps must be an integer >= 2, got {steps!r}")
    if not math.isfinite(future) or future < 0:
        raise ValueError(f"future must be a duration >= 0, got {future!r}")
    lo = min(oldest, now - HOUR)
    hi = now + future
    grid = {lo + (hi - lo) * k / (steps - 1) for k in range(steps)}
    return sorted(grid | {now})


def suggested_rows(records: list, row: dict[str, int]) -> dict[str, list[list[float]]]:
    """``{row: [[parent row, score], ...]}`` of the auto-placed memories (their meta's
    ``auto_parent.suggested``, the stored parents only)."""
    out = {}
    for i, r in enumerate(records):
        info = r.meta.get(AUTO_PARENT_KEY) if r.meta else None
        sug = info.get("suggested") if isinstance(info, dict) else None
        if isinstance(sug, list):
            out[str(i)] = [[row[s["id"]], s["score"]] for s in sug if isinstance(s, dict) and s.get("id") in row]
    return out


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode("ascii")


def _future_seconds(future: timedelta | None) -> float:
    if future is None:
        return 0.0
    if not isinstance(future, timedelta):
        raise TypeError(f"future must be a timedelta, got {type(future).__name__}")
    return future.total_seconds()


def pack(memory, at_time: datetime | None = None, layout: str = "auto", label: Callable | None = None,
         timeline_steps: int = 41, future: timedelta | None = None) -> dict[str, Any]:
    """The page's data (see the module docstring), JSON-able."""
    fut = _future_seconds(future)
    now_dt = to_utc(at_time) if at_time is not None else to_utc(memory.clock())
    now = to_seconds(now_dt)
    check_layout(layout)
    with consistent(memory) as snap:  # one refresh, one state: no read below catches up again
        stats = memory.views.stats(at_time=now_dt)
    xy, used = coordinates(snap, layout)
    n, ids, records, row, parent = snap.n, snap.ids, snap.records, snap.row, snap.parent.astype("<i4")
    depths = snap.depths
    times = snap.time.detach().to("cpu", torch.float64)
    access = snap.access.detach().to("cpu", torch.float64).numpy()
    spec = policy_spec(memory.decay)
    oldest = float(times.min()) if n else now
    grid = time_grid(oldest, now, timeline_steps, fut)
    if len(grid) > 65535:
        raise ValueError(f"timeline_steps must be at most 65534, got {timeline_steps}")
    constant = spec.get("type") == "none"
    # The first grid time at or after each creation time (exact, in float64 seconds).
    born = np.searchsorted(np.asarray(grid), times.numpy(), side="left")
    if constant:   # time changes nothing, and the page hides the slider: every memory shows at every step
        born[:] = 0
    weights = None
    if n and not constant:
        w = torch.stack([snap.weights(from_seconds(s)).to("cpu", torch.float64) for s in grid])
        w16 = (w.clamp(0, 1) * WEIGHT_SCALE).round().numpy().astype("<u2")
        weights = w16.T[np.arange(len(grid))[None, :] >= born[:, None]]  # memory-major, from birth on
    sc = math.sqrt(memory.curvature)
    xy64 = xy.to(torch.float64)
    rho = xy64.norm(dim=1)
    s = sc * depths
    if n and float((torch.tanh(s / 2) - rho).abs().max()) > 1e-9:  # a layout with its own radii
        s = 2 * torch.atanh(rho.clamp(max=1 - 1e-16))
    theta = torch.atan2(xy64[:, 1], xy64[:, 0]).numpy() % (2 * math.pi)
    angle = np.round(theta / (2 * math.pi) * 2.0**32).astype(np.uint64) % (2**32)
    labels = memory_labels(records, label)
    texts = [r.text for r in records]
    out: dict[str, Any] = {
        "format": 2, "n": n, "weight_scale": WEIGHT_SCALE, "layout": used, "now": now_dt.isoformat(), "now_s": now, "t0": oldest,
        "config": {"curvature": memory.curvature, "dim": memory.dim, "base_depth": memory.base_depth,
                   "depth_step": memory.depth_step, "metric": memory.metric, "decay": spec,
                   "embedder": embedder_spec(memory.embedder),
                   "placed_by": "hierarchy encoder" if places_points(memory.embedder) else None},
        "stats": stats,
        "decay": {"words": describe_decay(spec), "constant": constant},
        "ids": ids, "texts": texts, "labels": ["" if a == b else a for a, b in zip(labels, texts)],
        "parent": _b64(parent), "radius": _b64(s.numpy().astype("<f4")), "angle": _b64(angle.astype("<u4")),
        "time": _b64((times.numpy() - oldest).astype("<f4")), "born": _b64(born.astype("<u2")),
        "timeline": {"seconds": grid, "labels": [from_seconds(g).isoformat(timespec="minutes") for g in grid],
                     "index": grid.index(now)},
        "meta": {str(i): dict(r.meta) for i, r in enumerate(records) if r.meta},
        "valid": {str(i): [None if r.valid_from is None else r.valid_from.isoformat(),
                           None if r.valid_until is None else r.valid_until.isoformat()]
                  for i, r in enumerate(records) if r.valid_from is not None or r.valid_until is not None},
        "last_accessed": {str(i): r.last_accessed.isoformat() for i, r in enumerate(records)
                          if r.last_accessed is not None},
        "suggested": suggested_rows(records, row),
    }
    if access.any():
        out["access"] = _b64(access.astype("<u4"))
    if weights is not None:
        out["weights"] = _b64(weights)
    return out
