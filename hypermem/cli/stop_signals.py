"""SIGTERM and SIGHUP stop a command as Ctrl-C does (hypermem.cli): :func:`stopping_on_signals`.

``timeout``, ``kill``, a CI job's cancel and a closed terminal send SIGTERM or SIGHUP, whose
default action ends Python at once: no ``finally`` runs, so an export or import in progress
left its hidden temporary file (``.out.json.XXXX.tmp``, hundreds of MB at 100,000 memories) and,
for a durable store, its ``-wal``/``-shm`` files.  Raised as :class:`Stopped` instead (a
``KeyboardInterrupt``), the signal unwinds the command through the cleanup that Ctrl-C already
runs (:func:`hypermem.store.atomic.atomic_path` removes its temporary file on any exception,
the existing output untouched), and ``main`` exits ``128 + the signal`` (143, 129) as a shell
reports a command the signal ended.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator

__all__ = ["Stopped", "stopped_status", "stopping_on_signals"]

SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)
"""SIGTERM, and SIGHUP where the platform has it (not Windows)."""


class Stopped(KeyboardInterrupt):
    """A command stopped by SIGTERM or SIGHUP; :attr:`status` is the shell's ``128 + signal``.
    A ``KeyboardInterrupt``, so whatever cleans up after Ctrl-C cleans up after it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
        self.status = 128 + signum


def stopped_status(exc: KeyboardInterrupt, command: str | None) -> int:
    """The exit status of a command that ``exc`` stopped (130 for Ctrl-C, ``128 + signal`` for
    :class:`Stopped`), after one line on stderr saying so -- ``hypermem import: interrupted``,
    ``hypermem export: stopped by SIGTERM`` -- where a traceback would otherwise have been: the
    user sees that the command did not finish, and nothing more (what it was writing is removed
    by the cleanup the exception ran through)."""
    what = str(exc) if isinstance(exc, Stopped) else "interrupted"
    try:
        print(f"hypermem{' ' + command if command else ''}: {what}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):   # stderr closed or gone: the status still tells
        pass
    return getattr(exc, "status", 130)


def _stop(signum: int, frame: object) -> None:
    for s in SIGNALS:   # a second signal must not cut the cleanup of the first short
        with contextlib.suppress(OSError, ValueError):
            signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


@contextlib.contextmanager
def stopping_on_signals(signals: tuple[int, ...] = SIGNALS) -> Iterator[None]:
    """Within the block, each of ``signals`` raises :class:`Stopped` in the main thread; the
    previous handlers come back after it.  A signal that is ignored (``nohup`` ignores SIGHUP)
    stays ignored, and outside the main thread (no handler can be set there) nothing changes."""
    previous = {}
    for s in signals:
        try:
            handler = signal.getsignal(s)
            if handler is signal.SIG_IGN:
                continue
            signal.signal(s, _stop)
        except (OSError, ValueError):   # not the main thread
            continue
        previous[s] = handler
    try:
        yield
    finally:
        for s, handler in previous.items():
            with contextlib.suppress(OSError, ValueError, TypeError):
                signal.signal(s, handler if handler is not None else signal.SIG_DFL)
