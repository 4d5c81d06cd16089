"""Where the command line writes (hypermem.cli): the overwrite rule, ``-`` for stdout, pipes and devices.

The rule (docs/cli.md, "Output files"): a command never writes over its own input; ``export``,
``import`` and ``fit-reranker`` refuse an existing output without ``--force``; ``inspect`` and
``demo`` regenerate their artifacts, so they replace a file of the kind hypermem writes there (an
inspector page, the demo's memory) and refuse any other existing file without ``--force``.  A
symlink is written through (its target is replaced, the link kept).  An existing named pipe,
device or socket, and a name of an open descriptor (``/dev/stdout``), is written to directly, and
``-`` is stdout, where a command streams; a regular file is replaced atomically wherever it lies
(``/dev/shm`` too), and ``import``'s new file is published without replacing a file made meanwhile.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..store.atomic import atomic_new_path, atomic_path, atomic_write_chunks
from ..store.page_file import PAGE_HEAD
from .inputs import UserError, path_text, stdout_takes_unicode

__all__ = ["PAGE_HEAD", "STDOUT_CLOSED", "check_output", "head_of", "is_page", "is_stream", "names_descriptor", "new_file", "report",
           "same_file", "save_new", "write_durable", "write_text", "writes_stdout"]

def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` name one existing file (through symlinks and other spellings)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def is_stream(path: str) -> bool:
    """``-`` (stdout), a name of an open descriptor (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``: the shell's file, whatever it is), or an existing named pipe, device or
    socket (``os.stat``, through symlinks): written to directly, never replaced.  A regular file is
    no stream wherever it lies (``/dev/shm/x.csv`` too): it gets the overwrite rule and the atomic write."""
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    if names_descriptor(path):
        return True
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


DESCRIPTOR = re.compile(r"/dev/(stdout|stderr|stdin|fd/\d+)|/proc/(self|thread-self|\d+)/(task/\d+/)?fd/\d+")
"""Names that stand for a file descriptor this process holds (what the shell's ``>`` opened)."""


def names_descriptor(path: str, hops: int = 40) -> bool:
    """Whether ``path``, or a symlink on the way from it (``out -> /dev/stdout``), names an open
    descriptor (:data:`DESCRIPTOR`).  Symlinks are followed one at a time: ``realpath`` would go
    on to the descriptor's file (``/dev/stdout`` -> ``/tmp/out.csv``) and lose what it was."""
    current = os.path.abspath(path)
    for _ in range(hops):
        if DESCRIPTOR.fullmatch(current):
            return True
        try:
            link = os.readlink(current)
        except (OSError, ValueError):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), link))
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
        raise UserError(f"{path_text(output)} exists{kind}; pass --force to replace it")


def write_text(output: str, text) -> None:
    """``text`` (a string, or an iterable of string chunks written as they come) to ``-``
    (stdout; as UTF-8 bytes where stdout's encoding is a legacy code page, so that
    ``export m.db - --format csv > x.csv`` writes what ``export m.db x.csv`` writes), straight into a pipe or device, or atomically to a file
    (:func:`hypermem.store.atomic.atomic_write_chunks`; a symlink is written through)."""
    chunks = (text,) if isinstance(text, str) else text
    if output == "-":
        if sys.stdout is None:
            raise UserError(STDOUT_CLOSED)
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
    if os.path.lexists(output):   # --force, or a symlink written through: replaced atomically
        atomic_write_chunks(output, chunks)
        return
    with new_file(output) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        for chunk in chunks:    # a new name: a file another process created meanwhile is refused, not replaced
            f.write(chunk)


STDOUT_CLOSED = ("stdout is closed (the command was started with >&-): give an output file, or > /dev/null to "
                 "discard the output")


def writes_stdout(args) -> bool:
    """Whether the command's result goes to stdout (``tree``, ``search``, ``stats``, ``export -``,
    ``inspect -o -``): refused with :data:`STDOUT_CLOSED` before anything is read where stdout is
    closed.  A command that writes a file says only ``wrote ...`` there, which a closed stdout drops."""
    if args.command in ("tree", "search", "stats"):
        return True
    return args.command in ("export", "inspect") and args.output == "-"


def save_new(memory, output: str) -> None:
    """``Memory.save`` to ``output``, a name that did not exist when the command began (no
    ``--force``), published with :func:`hypermem.store.atomic.atomic_new_path`: a file another
    process created there meanwhile (two imports to one new name) is refused, never replaced."""
    from ..store.checks import check_sqlite_name
    from ..store.persistence import save

    check_sqlite_name(output)   # the name's own mistake, before the hidden one is made
    with new_file(output) as tmp:
        save(memory, tmp)   # an empty file: replaced


@contextmanager
def new_file(output: str) -> Iterator[Path]:
    """:func:`~hypermem.store.atomic.atomic_new_path` with its ``FileExistsError`` as the CLI's one line."""
    try:
        with atomic_new_path(output) as tmp:
            yield tmp
    except FileExistsError:
        raise UserError(f"{output} was created by another process while this command ran; pass --force to "
                        "replace it, or give another name") from None


def report(output: str, line: str) -> None:
    """The ``wrote ...`` line: on stderr when the output itself went to a stream (stdout, a pipe)."""
    print(line, file=sys.stderr if is_stream(output) or output == "-" else sys.stdout)


def write_durable(memory, output: str) -> None:
    """``memory`` as a new durable store (:meth:`Memory.open`, what ``hypermem mcp --store``
    serves) at ``output``, written beside it and published when complete: a new name with
    :func:`new_file` (a file created there meanwhile is refused, not replaced), a name allowed to
    exist (``--force``) moved over (a symlink is written through).  An existing durable store is never replaced: its ``-wal`` file, or a
    server that has it open, would not follow the swap.  A PostgreSQL ``output`` (a URL or libpq
    string) is copied into directly: a database that already holds memories is refused."""
    from ..integrations.snapshots import durable_copy
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
    # a name allowed to exist (--force, a dangling symlink) is replaced; a new one must stay new
    with atomic_path(output) if os.path.lexists(output) else new_file(output) as tmp:
        try:
            durable_copy(memory, tmp).close()
        finally:
            for suffix in ("-wal", "-shm", "-journal"):
                Path(f"{tmp}{suffix}").unlink(missing_ok=True)
