"""The hierarchy tools' progress bar: one place that decides whether to show one and makes it.

A bar shows on a terminal only (standard error a TTY), never in a log file, a pipe or a test,
unless the caller forces it with ``progress=True`` (``False`` hides it).  It is a
``tqdm.auto`` bar; without tqdm (it ships with transformers) nothing shows.
"""

from __future__ import annotations

import sys

__all__ = ["progress_bar", "show_progress"]


def show_progress(progress: bool | None, large: bool = True) -> bool:
    """Whether to show a bar: ``progress`` when given, else when standard error is a
    terminal and the work is ``large`` (worth a bar)."""
    if progress is not None:
        return bool(progress)
    return large and sys.stderr.isatty()


def progress_bar(total: int | None, desc: str, unit: str = "it", show: bool = True):
    """A ``tqdm`` bar of ``total`` steps on standard error, or ``None`` when not ``show``n
    (or tqdm is missing): callers do ``if bar is not None: bar.update(k)`` and close it."""
    if not show:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with transformers
        return None
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)
