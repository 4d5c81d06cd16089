"""Time conversion: aware datetimes at the API, float64 POSIX seconds in tensors."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import torch

HOUR = 3600.0


def utcnow() -> datetime:
    """The current time as an aware UTC datetime."""
    return datetime.now(timezone.utc)


class TimeRangeError(ValueError, OverflowError):
    """An aware time that falls outside years 1..9999 once moved to UTC: a ``ValueError``,
    and an ``OverflowError`` for callers that catch what ``astimezone`` raises."""


def to_utc(t: datetime, name: str | None = None) -> datetime:
    """Aware UTC datetime; a naive datetime is taken to be UTC already.  ``name``: the
    argument's name for the error (``at_time``).  A pandas ``NaT`` is a ``ValueError``; a time
    outside the datetime range in UTC a :class:`TimeRangeError`."""
    if type(t) is datetime and t.tzinfo is timezone.utc:
        return t
    if not isinstance(t, datetime):
        hint = " (parse it first: datetime.fromisoformat(...))" if isinstance(t, str) else ""
        if name is None and not isinstance(t, str):   # unnamed: most often what a Memory's clock= returned
            hint = (" (a Memory's clock= must return a datetime: for a clock of POSIX seconds, "
                    "clock=lambda: datetime.fromtimestamp(seconds(), timezone.utc))")
        raise TypeError(f"{name or 'the time'} must be a datetime, got {type(t).__name__}{hint}")
    if t != t:  # pandas NaT: a datetime subclass unequal to itself
        raise ValueError(f"{name or 'the time'} is NaT (not a time); pass a datetime or leave it out")
    if t.tzinfo is None:
        return t.replace(tzinfo=timezone.utc)
    try:
        return t.astimezone(timezone.utc)
    except OverflowError:
        raise TimeRangeError(f"{name or 'the time'} {t.isoformat()} is outside the range datetime can hold "
                             f"in UTC (years 1..9999)") from None


def now_of(at_time: datetime | None, clock: Callable[[], datetime]) -> datetime:
    """The time a read is asked at: ``at_time`` in UTC, or ``clock()``'s when it is None (each
    named in :func:`to_utc`'s error); a store's searches and the inspector's snapshot agree on it."""
    return to_utc(at_time, "at_time") if at_time is not None else to_utc(clock(), "the clock's time")


def to_seconds(t: datetime | float | int | None, default: float = math.nan) -> float:
    """POSIX seconds of ``t`` (a datetime or a number); ``None`` gives ``default``."""
    if t is None:
        return default
    if type(t) is datetime and t.tzinfo is timezone.utc:
        return t.timestamp()
    if isinstance(t, datetime):
        return to_utc(t).timestamp()
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return float(t)
    raise TypeError(f"expected a datetime or POSIX seconds, got {type(t).__name__}")


_LAST = datetime.max.replace(tzinfo=timezone.utc)
_LAST_S = _LAST.timestamp()   # 253402300800.0: year 10000, rounded up from 9999-12-31T23:59:59.999999


def from_seconds(s: float) -> datetime:
    """Aware UTC datetime from POSIX seconds.  ``datetime.max`` stored as float seconds rounds
    up to year 10000, which ``datetime`` cannot hold: exactly that float gives ``datetime.max``
    back; seconds beyond it (or before year 1) are a ``ValueError``/``OverflowError``."""
    s = float(s)
    if s == _LAST_S:
        return _LAST
    return datetime.fromtimestamp(s, tz=timezone.utc)


def seconds_tensor(values: Any, default: float, *, device=None) -> torch.Tensor:
    """float64 tensor of POSIX seconds from a tensor, or a list of datetimes/None."""
    if isinstance(values, torch.Tensor):
        return values.to(dtype=torch.float64, device=device)
    return torch.tensor([to_seconds(v, default) for v in values], dtype=torch.float64, device=device)


def now_seconds(now: datetime | float | torch.Tensor) -> float | torch.Tensor:
    """``now`` as POSIX seconds (:func:`to_seconds`), a 0-d float64 tensor of seconds
    (:func:`seconds_scalar`) as it is: how the decay policies take "now" without reading a
    tensor on the host."""
    return now if isinstance(now, torch.Tensor) else to_seconds(now)


def seconds_scalar(t: torch.Tensor, name: str = "at_time") -> torch.Tensor:
    """A 0-d tensor of POSIX seconds as float64 (how a deployed model takes "now" as an input).

    float64 and integer tensors are taken (int64 seconds are exact); float32 / half tensors are
    a ``TypeError``: float32 spaces the seconds of 2026 (~1.7e9) 128 s apart, so "now" would be
    off by up to a minute.  A non-finite value is a ``ValueError`` when it can be read without a
    host sync (a CPU tensor outside ``torch.compile`` / ``torch.export``)."""
    if t.dim() != 0:
        raise ValueError(f"{name} as a tensor must be 0-d POSIX seconds, got shape {tuple(t.shape)}")
    if t.is_floating_point() and t.dtype != torch.float64:
        raise TypeError(f"{name} is a {t.dtype} tensor: {t.dtype} rounds POSIX seconds of today (~1.7e9) to "
                        f"128 s or worse; pass torch.tensor(seconds, dtype=torch.float64)")
    if t.dtype == torch.bool or t.is_complex():
        raise TypeError(f"{name} must hold POSIX seconds (float64), got a {t.dtype} tensor")
    t = t.to(torch.float64)
    if t.device.type == "cpu" and not torch.compiler.is_compiling() and not math.isfinite(float(t)):
        raise ValueError(f"{name} must be a finite time, got {float(t)}")
    return t
