"""``inspect`` / ``_repr_html_`` / ``plot`` for :class:`~hypermem.store.Memory`."""

from __future__ import annotations

import os
import tempfile
import webbrowser
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["InspectMixin"]


class InspectMixin:
    """Looking at a memory: the HTML inspector, the Jupyter view and a matplotlib plot."""

    def inspect(self, path: str | os.PathLike | None = None, open_browser: bool = False, title: str | None = None,
                layout: str = "auto", at_time: datetime | None = None, label: Callable[[Any], str] | None = None,
                future: timedelta | None = None) -> str:
        """The self-contained offline inspector page (a hyperbolic browser of the Poincaré
        disk with focus + context, labels, time slider, table, tree, filter and search; see
        :mod:`hypermem.viz.html`).  ``label`` maps a record to its short label (default: the
        meta keys ``label``, ``name``, ``lemma``, ``title``, else the text's first words);
        ``future`` lets the time slider run past now.  Returns the HTML; writes it
        (atomically) when ``path`` is given; ``open_browser`` opens it (in a temporary file
        when there is no ``path``).

        >>> from hypermem import Memory
        >>> mem = Memory(); _ = mem.add("animals")
        >>> mem.inspect().startswith("<!DOCTYPE html>")
        True
        """
        from ..store.atomic import atomic_write_text
        from .html import render_html

        page = render_html(self, title=title, at_time=at_time, layout=layout, label=label, future=future)
        if path is not None:
            atomic_write_text(path, page)
        if open_browser:
            if path is None:
                fd, name = tempfile.mkstemp(prefix="hypermem-", suffix=".html")
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(page)
                path = name
            webbrowser.open(Path(path).resolve().as_uri())
        return page

    def _repr_html_(self) -> str:
        """Jupyter shows the inspector inline (in a sandboxed iframe)."""
        from .html import iframe_html, render_html

        return iframe_html(render_html(self))

    def plot(self, ax=None, labels: bool = False, at_time: datetime | None = None, layout: str = "auto"):
        """Matplotlib drawing in the Poincaré disk (the ``viz`` extra); returns the axes.
        See :func:`hypermem.viz.plot`."""
        from .mpl import plot

        return plot(self, ax=ax, labels=labels, at_time=at_time, layout=layout)
