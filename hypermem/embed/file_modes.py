"""The mode a file written by hypermem gets: ``0o666`` less the process umask, as ``open()``
gives it.

A writer that goes through a private temporary file leaves that file's ``0o600`` on the result:
``safetensors`` (0.6 and later) writes ``model.safetensors`` to a ``mkstemp`` file and renames it,
so a saved encoder or reranker folder held weights only its owner could read (umask ``022``: every
other file ``0o644``).  :func:`give_normal_modes` puts the umask's mode back on every file of a
folder just written; set the umask (``umask 077``) to keep a folder private.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["give_normal_modes", "normal_file_mode", "process_umask"]


def process_umask() -> int:
    """The process umask, read without changing it where the OS tells it (Linux), else by
    setting and restoring it."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def normal_file_mode() -> int:
    """``0o666 & ~umask``: the mode ``open(path, "w")`` gives a new file."""
    return 0o666 & ~process_umask()


def give_normal_modes(folder: str | os.PathLike) -> None:
    """Give every regular file under ``folder`` (a folder a model's ``save`` has just written)
    :func:`normal_file_mode`; symbolic links are neither followed nor changed."""
    mode = normal_file_mode()
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            path = Path(root, name)
            st = path.lstat()
            if stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) != mode:
                os.chmod(path, mode)
