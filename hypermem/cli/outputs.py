"""Where the command line writes (hypermem.cli): the overwrite rule, ``-`` for stdout, pipes and devices.

The rule (docs/cli.md, "Output files"): a command never writes over its own input; ``export``,
``import`` and ``fit-reranker`` refuse an existing output without ``--force``; ``inspect`` and
``demo`` regenerate their artifacts, so they replace a file of the kind hypermem writes there (an
inspector page, the demo's memory) and refuse any other existing file without ``--force``.  A
symlink is written through (its target is replaced, the link kept).  An existing named pipe or
device (``/dev/stdout``) is written to directly, and ``-`` is stdout, where a command streams.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from ..embed.file_modes import normal_file_mode
from ..store.page_file import PAGE_HEAD
from .inputs import UserError, stdout_takes_unicode

__all__ = ["PAGE_HEAD", "check_output", "head_of", "is_page", "is_stream", "report", "same_file", "save_new",
           "write_durable", "write_text"]

def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` name one existing file (through symlinks and other spellings)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def is_stream(path: str) -> bool:
    """``-`` (stdout), or an existing named pipe, device or socket (followed through symlinks):
    written to directly, never replaced."""
    if path == "-":
        return True
    try:
        p = Path(path)
        if path.startswith("/dev/") and p.exists():   # /dev/stdout: the shell's file, whatever it is
            return True
        return p.exists() and not p.is_file() and not p.is_dir()
    except (OSError, ValueError):
        return False


def head_of(path: Path, n: int = 256) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def is_page(path: Path) -> bool:
    """An inspector page that hypermem wrote."""
    return head_of(path).startswith(PAGE_HEAD)


def check_output(output: str, *, inputs: tuple[str, ...] = (), force: bool = False,
                 replaceable: Callable[[Path], bool] | None = None, what: str = "OUTPUT") -> None:
    """Refuse an output that is one of the ``inputs``, a folder, or an existing file that is neither
    ``replaceable`` (a file of the kind the command writes there) nor allowed by ``force``."""
    if output == "-":
        return
    for source in inputs:
        if same_file(output, source):
            raise UserError(f"{output} is the input {source}: writing it would destroy the input; give another "
                            f"{what}")
    p = Path(output)
    if p.is_dir():
        raise UserError(f"{output} is a folder: give a file as {what}")
    if is_stream(output) or not p.exists():
        return
    if not force and not (replaceable is not None and replaceable(p)):
        kind = "" if replaceable is None else " and is not a file hypermem writes there"
        raise UserError(f"{output} exists{kind}; pass --force to replace it")


def write_text(output: str, text) -> None:
    """``text`` (a string, or an iterable of string chunks written as they come) to ``-``
    (stdout; as UTF-8 bytes where stdout's encoding is a legacy code page, so that
    ``export m.db - --format csv > x.csv`` writes what ``export m.db x.csv`` writes), straight into a pipe or device, or atomically to a file
    (:func:`hypermem.store.atomic.atomic_write_chunks`; a symlink is written through)."""
    chunks = (text,) if isinstance(text, str) else text
    if output == "-":
        raw = None if stdout_takes_unicode() else getattr(sys.stdout, "buffer", None)
        if raw is not None:   # a legacy code page (Windows' "> out.csv"): the file's UTF-8 bytes, as a file gets
            sys.stdout.flush()
        for chunk in chunks:
            if raw is None:
                sys.stdout.write(chunk)
            else:
                raw.write(chunk.encode("utf-8"))
        (sys.stdout if raw is None else raw).flush()
        return
    if is_stream(output):
        with open(output, "w", encoding="utf-8") as f:
            for chunk in chunks:
                f.write(chunk)
        return
    from ..store.atomic import atomic_write_chunks

    atomic_write_chunks(output, chunks)


def save_new(memory, output: str) -> None:
    """``Memory.save`` to ``output``, a name that did not exist when the command began (no
    ``--force``): written to a hidden file beside it, then hard-linked to the name, which fails
    when another process created it meanwhile (two imports to one new name: the later one is
    refused, not the earlier result replaced).  Where the folder takes no hard link, the name is
    checked once more and the file moved there (the window is then the move's)."""
    import errno
    import tempfile

    from ..store.atomic import fsync_path
    from ..store.checks import check_sqlite_name
    from ..store.persistence import save

    check_sqlite_name(output)   # the name's own mistake, before the hidden one is made
    target = Path(output)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".new.db", dir=target.parent)
    except OSError:   # no such folder, or not writable: save names the file asked for, not the hidden one
        save(memory, output)
        return
    os.close(fd)
    try:
        os.chmod(tmp, normal_file_mode())   # save keeps the mode of the file it replaces: not mkstemp's 0o600
        save(memory, tmp)   # an empty file: replaced
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise UserError(f"{output} was created by another process while this command ran; pass --force to "
                            "replace it, or give another name") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            check_output(output)   # no hard links here: the name is checked again right before the move
            os.replace(tmp, target)
        fsync_path(target.parent, directory=True)
    finally:
        Path(tmp).unlink(missing_ok=True)


def report(output: str, line: str) -> None:
    """The ``wrote ...`` line: on stderr when the output itself went to a stream (stdout, a pipe)."""
    print(line, file=sys.stderr if is_stream(output) or output == "-" else sys.stdout)


def write_durable(memory, output: str) -> None:
    """``memory`` as a new durable store (:meth:`Memory.open`, what ``hypermem mcp --store``
    serves) at ``output``, written beside it and moved over it when complete (a symlink is
    written through).  An existing durable store is never replaced: its ``-wal`` file, or a
    server that has it open, would not follow the swap.  A PostgreSQL ``output`` (a URL or libpq
    string) is copied into directly: a database that already holds memories is refused."""
    from ..integrations.snapshots import durable_copy
    from ..store.atomic import atomic_path
    from ..store.backends.opening import is_durable_file, is_url
    from ..store.checks import check_sqlite_name

    if is_url(output):
        durable_copy(memory, output).close()
        return
    if is_stream(output):
        raise UserError(f"{output} is not a regular file: a durable store needs a file name such as agent.db")
    check_sqlite_name(output)
    if Path(output).is_file() and is_durable_file(output):
        raise UserError(f"{output} is a durable store (Memory.open): import into a new name, or remove it first "
                        "(with its -wal and -shm files)")
    with atomic_path(output) as tmp:
        try:
            durable_copy(memory, tmp).close()
        finally:
            for suffix in ("-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)
