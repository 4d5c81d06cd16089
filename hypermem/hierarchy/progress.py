"""The hierarchy tools' progress bar: one place that decides whether to show one and makes it.

A bar shows where someone watches: standard error a terminal, or a Jupyter notebook
(:func:`hypermem.embed.progress.interactive`), never in a log file, a pipe or a test, unless the
caller forces it with ``progress=True`` (``False`` hides it).  It is tqdm's notebook widget in a
notebook with ``ipywidgets`` (the ``notebook`` extra), else tqdm's text bar
(:func:`hypermem.embed.progress.tqdm_class`); without tqdm (it ships with transformers) nothing
shows.  A long job's inner passes (a training run's validations) run under
:func:`~hypermem.embed.progress.quiet_progress`, so that only the job's own bar shows and reports them.
"""

from __future__ import annotations

from ..embed.progress import interactive, quiet_progress, tqdm_class

__all__ = ["progress_bar", "quiet_progress", "show_progress"]


def show_progress(progress: bool | None, large: bool = True) -> bool:
    """Whether to show a bar: ``progress`` when given, else when the work is ``large`` (worth a
    bar) and standard error is a terminal or this is a notebook."""
    if progress is not None:
        return bool(progress)
    return large and interactive()


def progress_bar(total: int | None, desc: str, unit: str = "it", show: bool = True):
    """A ``tqdm`` bar of ``total`` steps (on standard error, or a widget in a notebook), or
    ``None`` when not ``show``n (or tqdm is missing): callers do ``if bar is not None:
    bar.update(k)`` and close it."""
    if not show:
        return None
    tqdm = tqdm_class()
    if tqdm is None:  # pragma: no cover - tqdm ships with transformers
        return None
    return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True)
