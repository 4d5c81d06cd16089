"""Where a progress bar belongs: the one decision every bar in hypermem asks, and the bar class.

A bar is for a person watching: standard error a terminal (a TTY), or a Jupyter notebook (an
IPython kernel, whose standard error is not a TTY but whose output is shown live under the
cell).  A plain script piped to a file, a test run, a log bridge or a daemon gets none.

* :func:`stderr_is_terminal` — ``sys.stderr.isatty()``, and ``False`` for a stream without
  ``isatty`` (a write/flush-only logging bridge), one whose ``isatty`` raises (closed), or no
  stream at all (``sys.stderr is None`` under ``pythonw`` or a daemon).
* :func:`in_notebook` — running inside an IPython *kernel*: ``ipykernel`` imported and
  ``IPython.get_ipython()`` a shell with a ``kernel`` (the terminal ``ipython`` shell has none,
  and its standard error is a TTY anyway).  It only looks into :data:`sys.modules`, so it
  imports nothing and costs a dictionary look-up outside a notebook.
* :func:`interactive` — either of them: the default of every ``progress=None``; ``False``
  inside :func:`quiet_progress`.
* :func:`quiet_progress` — a block whose default bars stay hidden: the encode passes that a
  longer job (a training run's validations) makes under its own bar, which reports them
  instead.  It is a :class:`contextvars.ContextVar`, so another thread's bars are untouched.
* :func:`tqdm_class` — the bar: tqdm's notebook widget in a notebook with ``ipywidgets``
  installed (the ``notebook`` extra), else tqdm's text bar (which a notebook shows too), never
  ``tqdm.auto``'s fallback with its "IProgress not found" warning.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator

__all__ = ["in_notebook", "interactive", "quiet_progress", "stderr_is_terminal", "tqdm_class"]

_QUIET: contextvars.ContextVar[bool] = contextvars.ContextVar("hypermem_quiet_progress", default=False)


def stderr_is_terminal() -> bool:
    """Whether :data:`sys.stderr` is a terminal; ``False`` when it is ``None``, has no ``isatty``
    or its ``isatty`` raises."""
    isatty = getattr(sys.stderr, "isatty", None)
    if not callable(isatty):
        return False
    try:
        return bool(isatty())
    except Exception:  # noqa: BLE001 - a closed or foreign stream is simply not a terminal
        return False


def in_notebook() -> bool:
    """Whether this process is an IPython kernel (Jupyter, VS Code notebooks, nbclient): ``False``
    in scripts, ``pytest``, pipes and the terminal ``ipython`` shell."""
    if "ipykernel" not in sys.modules:
        return False
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    try:
        shell = get_ipython()
    except Exception:  # noqa: BLE001 - a half-imported IPython is no notebook
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def interactive() -> bool:
    """Whether a progress bar has someone to show to: a terminal or a notebook, outside
    :func:`quiet_progress`."""
    return not _QUIET.get() and (stderr_is_terminal() or in_notebook())


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """Inside, :func:`interactive` is ``False``: the bars left to their default (``progress=None``,
    an encoder's ``show_progress_bar=None``) do not show; a bar forced with ``True`` still does.
    Nests, and restores the previous state on the way out, an error included."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def tqdm_class():
    """The ``tqdm`` class to draw with: ``tqdm.notebook.tqdm`` (a widget) in a notebook where
    ``ipywidgets`` imports, else ``tqdm.std.tqdm`` (text on standard error); ``None`` without tqdm
    (it ships with transformers) or without a standard error to write to (``sys.stderr is None``)."""
    if sys.stderr is None:
        return None
    try:
        from tqdm.std import tqdm
    except ImportError:
        return None
    if in_notebook():
        try:
            import ipywidgets  # noqa: F401
            from tqdm.notebook import tqdm as notebook_tqdm
        except ImportError:
            return tqdm
        return notebook_tqdm
    return tqdm
