"""The ``hypermem`` console script (``[project.scripts]`` in pyproject.toml): quiet on Ctrl-C from
its first instant, and ``hypermem --version`` without importing torch.

A module outside the ``hypermem`` package on purpose, with the standard library only: importing
any ``hypermem.x`` first runs ``hypermem/__init__.py`` (torch, geoopt: seconds on a loaded
machine), and a Ctrl-C in those seconds raised ``KeyboardInterrupt`` before
:func:`hypermem.cli.main.main`, whose handler gives the documented status 130 without a
traceback, existed.  Here, where Python's own handler is in place (not where the parent had
SIGINT ignored: a background job keeps ignoring it), a Ctrl-C until that import is done ends the
process at once with status 130: nothing has been read or written yet, and an exception raised
inside an import could be caught by the library being imported.  ``HYPERMEM_DEBUG=1`` keeps
Python's handler, the traceback included.  Once the import is done, Python's handler is back and
``main`` handles Ctrl-C as before.

``python -m hypermem.cli`` runs the same commands, but Python imports the package before any of
its code runs, so a Ctrl-C in its first seconds gives Python's traceback there.
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]

DISTRIBUTION = "hypermem-torch"
"""The distribution whose version ``--version`` names (``hypermem.__version__``, read without
importing the package)."""


def main(argv: list[str] | None = None) -> int:
    """Run the ``hypermem`` command line (:func:`hypermem.cli.main.main`), ``--version`` alone
    answered from the installed distribution's metadata."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        version = _installed_version()
        if version is not None:
            print(f"hypermem {version}")
            return 0
    quiet = signal.getsignal(signal.SIGINT) is signal.default_int_handler and not os.environ.get("HYPERMEM_DEBUG")
    if quiet:
        try:
            signal.signal(signal.SIGINT, _stop_at_once)
        except ValueError:   # not the main thread: no handler of ours
            quiet = False
    try:
        from hypermem.cli.main import main as run
    finally:
        if quiet:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run(argv)
    except KeyboardInterrupt as exc:   # between Python's handler coming back and run's own
        if os.environ.get("HYPERMEM_DEBUG"):
            raise
        return getattr(exc, "status", 130)


def _stop_at_once(signum: int, frame: object) -> None:
    """Ctrl-C while the package loads: status 130 at once (``os._exit``: no exception that the
    library being imported could catch, and nothing written yet to flush or remove)."""
    os._exit(128 + signum)


def _installed_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:   # not installed: the package's own --version answers
        return None


if __name__ == "__main__":
    sys.exit(main())
