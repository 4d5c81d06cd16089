"""Warnings that point at the user's line, not at one of hypermem's own frames.

A store's warning is raised a varying number of calls deep (``Memory.search`` hands the call to
its searcher through :mod:`hypermem.store.delegation`; an adapter adds its own frames), so a
fixed ``stacklevel`` names hypermem's code for some callers.  :func:`warn_caller` counts the
frames up to the first one outside the package, as Python 3.12's ``skip_file_prefixes`` does.

It sits below every layer of the package (``[tool.importlinter]`` in ``pyproject.toml``) and imports
nothing of it, so the store and the layers under it (the hierarchy files of :mod:`hypermem.data`:
a header-like line, two ids of one text, read through ``read_hierarchy``) warn at the caller's line
alike; :mod:`hypermem.store.caller_warning` re-exports it for the store's modules.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn_caller"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the first frame outside hypermem."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
