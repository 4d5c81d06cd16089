"""Where ``Memory.inspect(path)`` may write its page: the overwrite rule of ``hypermem inspect``.

An inspector page that hypermem wrote (it begins with :data:`hypermem.viz.html.PAGE_HEAD`) is
regenerated in place, and a new or empty (0 bytes) file is written; any other existing file (a
snapshot, a durable store, notes) is refused unless ``force=True``.  The memory's own durable
file (and its ``-wal``, ``-shm`` and ``-journal`` files) is refused even with ``force``: the
command line never writes over its own input either (docs/cli.md, "Output files").
"""

from __future__ import annotations

import os
from pathlib import Path

from ..viz.html import PAGE_HEAD

__all__ = ["PAGE_HEAD", "check_page_path", "is_page"]


def is_page(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file that begins like an inspector page hypermem wrote."""
    try:
        with open(path, "rb") as f:
            return f.read(len(PAGE_HEAD)) == PAGE_HEAD
    except OSError:
        return False


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_page_path(path: str | os.PathLike, own: str | os.PathLike | None = None, force: bool = False) -> None:
    """Refuse to write an inspector page over ``own`` (the memory's durable file, or one of its
    SQLite side files) or, without ``force``, over an existing non-empty regular file that is no
    inspector page.  A folder, a device or a pipe is left to :func:`hypermem.store.atomic.atomic_path`."""
    if own is not None:
        for name in (own, *(f"{os.fspath(own)}{s}" for s in ("-wal", "-shm", "-journal"))):
            if _same_file(path, name):
                raise FileExistsError(f"cannot write the inspector page to {os.fspath(path)!r}: it is this memory's "
                                      f"own durable store {os.fspath(name)!r}, which the page would destroy; "
                                      "give another path (such as page.html)")
    target = Path(path)
    if force or not target.is_file() or target.stat().st_size == 0 or is_page(target):
        return
    raise FileExistsError(f"cannot write the inspector page to {os.fspath(path)!r}: the file exists and is not an "
                          "inspector page that hypermem wrote; give another path (such as page.html), or pass "
                          "force=True to replace it")
