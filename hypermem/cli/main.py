"""The ``hypermem`` command line: :func:`main` (the subcommands and their options:
:mod:`hypermem.cli.parser`; the list is :data:`hypermem.cli.parser.EPILOG`).

MEMORY is a file written by ``Memory.save`` (SQLite) or ``Memory.to_json`` (JSON), a SQLite
database of ``Memory.open`` or a ``postgresql://`` URL (both opened read-only).
Mistakes (a missing file, an unknown id, a bad option) print one line and exit non-zero
(set HYPERMEM_DEBUG=1 to get the traceback instead); a warning is one ``warning: ...`` line
on stderr, or, where the warnings filter makes it an exception (``PYTHONWARNINGS=error``), one
``error:`` line and status 1; Ctrl-C stops any command with status 130, the one line
``hypermem COMMAND: interrupted`` on stderr and no traceback (while the package loads too: the
console script's ``_hypermem_console``), SIGTERM and SIGHUP with 143 and 129 and ``stopped by
SIGTERM`` (:mod:`hypermem.cli.stop_signals`), a half-written output's temporary file removed.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from ..store.backends.pg_errors import redact_text
from ..store.file_access import may_not_read
from ..store.shown_text import shown
from .inputs import UserError, stdout_takes_unicode
from .outputs import STDOUT_CLOSED, writes_stdout
from .parser import build_parser
from .stop_signals import SIGNALS, stopped_status, stopping_on_signals

__all__ = ["build_parser", "main"]


def _error_line(exc: BaseException) -> str | None:
    """The one-line message for a user mistake, or None for an unexpected error (a bug)."""
    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, Warning):   # PYTHONWARNINGS=error or -W error made a warning an exception
        return f"{exc} ({type(exc).__name__}, an error by the warnings filter)"
    from ..embed.choice import EmbedderMissing
    from ..store.backends.durable import StorageError
    from ..store.persistence import MemoryFileError

    if isinstance(exc, (EmbedderMissing, StorageError)):
        return str(exc)
    if isinstance(exc, MemoryFileError):
        return f"bad memory file: {exc}"
    if isinstance(exc, PermissionError) and exc.filename is not None:
        told = may_not_read(exc.filename)   # another user's file: the remedy, not only the errno's words
        if told is not None:
            return told
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {exc.filename}"
    if isinstance(exc, OSError) and exc.strerror:   # OSError(errno, message): the message, no "[Errno N]"
        return exc.strerror
    if isinstance(exc, KeyError):
        return str(exc.args[0]) if exc.args else "unknown key"
    if isinstance(exc, (ValueError, TypeError, ImportError, OSError)):
        return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 on a bad option, 130 on
    Ctrl-C, 141 when the reader of the output went away: :func:`_reader_gone`)."""
    _quiet_matplotlib_cache()
    try:
        try:
            formatwarning, warnings.formatwarning = warnings.formatwarning, _format_warning
            tolerant = _tolerant_stdout()
            try:
                return _run(argv)
            finally:
                warnings.formatwarning = formatwarning
                if tolerant:
                    sys.stdout.reconfigure(errors="strict")
        finally:
            if sys.stdout is not None:
                sys.stdout.flush()  # a reader gone shows here, not in Python's flush at exit
    except BrokenPipeError:
        if os.environ.get("HYPERMEM_DEBUG"):
            raise
        return _reader_gone()
    except KeyboardInterrupt as exc:   # anywhere: building the parser, loading, writing
        if os.environ.get("HYPERMEM_DEBUG"):
            raise
        return stopped_status(exc, None)   # 143 / 129 for SIGTERM / SIGHUP (stop_signals.Stopped)
    except OSError as exc:   # the last flush, of what no command wrote (--help onto a full disk)
        if os.environ.get("HYPERMEM_DEBUG") or not _stdout_failed():
            raise
        print(f"hypermem: error: {_stdout_error(exc)}", file=sys.stderr)
        return 1


def _tolerant_stdout() -> bool:
    """Where stdout's encoding cannot write every character (``PYTHONIOENCODING=cp1252``, or
    Windows' ``hypermem search m.db q > out.txt``), make it write those as escapes (``\\u6771``,
    the ``backslashreplace`` error handler) rather than stop the command with a
    ``UnicodeEncodeError``; ``--json`` output is ASCII there (:func:`hypermem.cli.inputs.print_json`)
    and ``export - `` writes UTF-8 bytes (:func:`hypermem.cli.outputs.write_text`).  True when
    stdout was changed (``main`` changes it back)."""
    out = sys.stdout
    if stdout_takes_unicode() or getattr(out, "errors", None) != "strict" or not hasattr(out, "reconfigure"):
        return False
    out.reconfigure(errors="backslashreplace")
    return True


class MatplotlibCacheLines(logging.Filter):
    """Drops matplotlib's lines about its config folder (``mkdir -p failed for path
    ~/.config/matplotlib``, ``Matplotlib created a temporary cache directory at /tmp/...``): under
    a HOME it cannot write (a container, a service user) matplotlib uses a temporary folder, removed
    at exit, and says so in two lines on stderr.  Lightning imports it (``lightning.pytorch`` ->
    ``torchmetrics.utilities.plot`` -> ``matplotlib.pyplot``) for ``train``, ``train --help`` and
    ``demo``, none of which draws with it: those lines are no concern of the command's user."""

    LINES = ("mkdir -p failed for path ", "%s is not a writable directory", "Matplotlib created a temporary cache "
             "directory")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.LINES)


_MATPLOTLIB_CACHE_LINES = MatplotlibCacheLines()


def _quiet_matplotlib_cache() -> None:
    """Install :class:`MatplotlibCacheLines` on matplotlib's logger, before anything imports it; not
    where ``MPLCONFIGDIR`` is set: a folder the user chose that does not work is theirs to hear of."""
    if "MPLCONFIGDIR" not in os.environ:
        logging.getLogger("matplotlib").addFilter(_MATPLOTLIB_CACHE_LINES)


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """A Python warning as one ``warning: ...`` line (not Python's file:line format); a test's
    ``catch_warnings(record=True)`` still records the warning itself."""
    return f"warning: {shown(' '.join(str(message).split()))}\n"


def _reader_gone() -> int:
    """The reader of stdout closed it early (``hypermem tree notes.db | head -1``): stop without
    a word, as a Unix tool does when SIGPIPE ends it.  Stdout now points at ``os.devnull``, so
    Python's own flush at exit finds no closed pipe either (the recipe of the Python docs, "Note
    on SIGPIPE").  The status is 141 (128 + SIGPIPE), what a shell reports for ``seq 1e6 | head``'s
    ``seq``: a script with ``set -o pipefail`` sees a cut output as it does for any Unix tool, and
    a plain pipeline's status is its last command's anyway.  Not 0, which would say that
    everything was written; not 1, this command's status for a mistake it printed."""
    _stdout_to_devnull()
    return 141


def _stdout_to_devnull() -> None:
    """Point stdout's file descriptor at ``os.devnull``: what its buffer still holds, and Python's
    own flush at exit, then go nowhere instead of raising again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (stdout replaced in-process)
        pass


def _stdout_failed() -> bool:
    """Whether stdout cannot take what was written to it (a full disk, an I/O error: its flush
    fails again); then it is pointed at ``os.devnull`` (:func:`_stdout_to_devnull`), so that the
    one error line is all the user sees, not a second error and Python's "Exception ignored"."""
    if sys.stdout is None:
        return False
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _stdout_to_devnull()
        return True
    return False


def _stdout_error(exc: OSError) -> str:
    return f"cannot write to stdout: {exc.strerror or exc}"


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # train and the mammals demo (Lightning: its resume line) and mcp (mcp_app.install_signals) handle
    # SIGTERM themselves, and Lightning sets its own handler only where none is set: left to them
    own = args.command in ("train", "mcp") or (args.command == "demo" and args.dataset == "mammals")
    signals = () if own else SIGNALS
    try:
        if sys.stdout is None and writes_stdout(args):
            raise UserError(STDOUT_CLOSED)
        with stopping_on_signals(signals):
            status = int(args.func(args) or 0)
            if sys.stdout is not None:
                sys.stdout.flush()   # a full disk under stdout is this command's error, named as such
            return status
    except KeyboardInterrupt as exc:
        if os.environ.get("HYPERMEM_DEBUG"):
            raise
        return stopped_status(exc, args.command)
    except BrokenPipeError:
        raise   # not a mistake of the user's: main stops quietly
    except Exception as exc:
        line = None if os.environ.get("HYPERMEM_DEBUG") else _error_line(exc)
        if line is None:
            raise
        if isinstance(exc, OSError) and exc.filename is None and _stdout_failed():
            line = _stdout_error(exc)
        line = "; ".join(part.strip() for part in line.splitlines() if part.strip())  # one line, as promised
        line = redact_text(line)   # a PostgreSQL URL's password never reaches the terminal
        print(f"hypermem {args.command}: error: {shown(line)}", file=sys.stderr)
        return 1


