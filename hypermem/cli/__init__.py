"""The ``hypermem`` command line (the commands and their options: :mod:`hypermem.cli.main`)."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
