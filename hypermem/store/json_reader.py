"""Reading a memory JSON document (:func:`hypermem.store.persistence.to_json`) a record at a time.

``json.loads`` of a whole document holds the text, every parsed record and one Python float
object (32 bytes with its list slot) per number at once: about 60 KB a memory at dim 256,
6 GB at 100,000 memories.  :func:`read_document` instead decodes the file in blocks
(:data:`BLOCK_CHARS`), parses one record at a time with the standard library's own scanner
(``json.JSONDecoder.raw_decode``, so each value parses exactly as ``json.loads`` parses it)
and moves the vectors of every :data:`CHUNK_ROWS` records into float64 arrays, after which
their floats are freed.  What stays is the arrays, the records' other fields and one block
of text.

It is a fast path for documents laid out as :func:`to_json` writes them (``config`` before
``records``, each key once) whose every vector is a list of ``dim`` finite numbers.  Anything
else it could read differently or whose error it could name differently (malformed JSON, a
record that is no object or lacks a field, a bad vector, a depth that is not a number,
records before the config, a repeated key, text that is not UTF-8) makes it return ``None``:
the caller then reads the document whole (``json.loads``) and checks it exactly as before,
so every error message and its precedence is unchanged.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from itertools import chain
from typing import IO, Any

import numpy as np
import torch

from .gc_pause import gc_paused
from .load_checks import check_format, config_dim
from .validation import MAX_JSON_DEPTH, is_number, json_depth_over

BLOCK_CHARS = 1 << 23
"""Characters decoded per read of the file (8 Mi); a value longer than a block reads on."""
CHUNK_ROWS = 1024
"""Records whose vectors become one block of an array at a time."""
_WHITESPACE = " \t\n\r"
_NUMBER_TYPES = {int, float}


class _Unusual(Exception):
    """The document is not one the fast path reads as ``json.loads`` would: read it whole."""


def _no_constant(name: str):
    raise _Unusual(name)   # NaN / Infinity: load_json refuses them with its own message


_DECODER = json.JSONDecoder(parse_constant=_no_constant)


class _Text:
    """The document's text, decoded a block at a time from a binary file (or whole, from a string)."""

    def __init__(self, source: str | IO[bytes]):
        if isinstance(source, str):
            self.buf, self.file, self.eof = source, None, True
        else:
            self.buf, self.file, self.eof = "", source, False
            self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.pos = 0

    def more(self) -> None:
        """Read another block (as long as what is held, so that a long value is not re-read often)."""
        if self.eof:
            raise _Unusual("the end of the text")
        size = max(BLOCK_CHARS, len(self.buf) - self.pos)
        data = self.file.read(size)
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError:
            raise _Unusual("not UTF-8") from None
        self.buf = self.buf[self.pos:] + text
        self.pos = 0
        self.eof = not data

    def peek(self) -> str:
        """The next character after whitespace ("" at the end of the text)."""
        while True:
            buf, pos = self.buf, self.pos
            while pos < len(buf) and buf[pos] in _WHITESPACE:
                pos += 1
            self.pos = pos
            if pos < len(buf) or self.eof:
                return buf[pos] if pos < len(buf) else ""
            self.more()

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise _Unusual(char)
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, parsed by ``json``'s scanner; one that reaches the end of what is
        read so far (a number may go on) is parsed again with more text."""
        self.peek()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except (ValueError, RecursionError):
                self.more()
                continue
            if end < len(self.buf) or self.eof:
                self.pos = end
                return obj
            self.more()


class _Columns:
    """Vectors gathered ``CHUNK_ROWS`` records at a time into ``(n, dim)`` float64 arrays."""

    def __init__(self, dim: int, count: int, names: tuple[str, ...]):
        self.dim, self.names, self.n = dim, names, 0
        self.arrays = {k: np.empty((count, dim), dtype=np.float64) for k in names}
        self.pending: dict[str, list] = {k: [] for k in names}

    def add(self, vectors: tuple) -> None:
        for k, v in zip(self.names, vectors):
            if type(v) is not list or len(v) != self.dim:
                raise _Unusual(k)
            self.pending[k].append(v)
        if len(self.pending[self.names[0]]) >= CHUNK_ROWS:
            self.flush()

    def flush(self) -> None:
        """The pending lists as rows of the arrays: exact ``int``/``float`` values only, finite
        (what :func:`~hypermem.store.validation.stack_vectors` accepts, converted the same way)."""
        rows = len(self.pending[self.names[0]])
        if not rows:
            return
        lists = [self.pending[k] for k in self.names]
        if not set(map(type, chain.from_iterable(chain.from_iterable(lists)))) <= _NUMBER_TYPES:
            raise _Unusual("a value that is no number")
        for k in self.names:
            array = self.arrays[k]
            if self.n + rows > len(array):   # more records than the saved count (or none saved)
                self.arrays[k] = array = np.concatenate([array, np.empty((max(len(array), rows), self.dim))])
            block = array[self.n:self.n + rows]
            try:
                for i, v in enumerate(self.pending[k]):   # row by row: faster than a nested list at once
                    block[i] = v
            except OverflowError:
                raise _Unusual("an integer beyond float64") from None
            if not np.isfinite(block).all():
                raise _Unusual("a non-finite value")
            self.pending[k] = []
        self.n += rows

    def tensors(self) -> dict[str, torch.Tensor]:
        self.flush()
        return {k: torch.from_numpy(a if len(a) == self.n else a[:self.n].copy()) for k, a in self.arrays.items()}


def _config(text: _Text) -> tuple[dict, int]:
    value = text.value()
    if not isinstance(value, Mapping) or json_depth_over(value, MAX_JSON_DEPTH):
        raise _Unusual("config")
    config = dict(value)
    try:
        check_format(config, "")
        dim = config_dim(config, "")
    except ValueError:
        raise _Unusual("config") from None
    return config, dim


def _records(text: _Text, dim: int, count: Any, size_bound: int) -> tuple[list[dict], dict, list, list]:
    """The records after ``"records":``, their vectors moved into arrays (point, embedding and,
    when the first record has one, direction)."""
    text.expect("[")
    rows: list[dict] = []
    columns = depths = siblings = None
    if text.peek() == "]":
        text.pos += 1
        return rows, {}, [], []
    while True:
        rec = text.value()
        if type(rec) is not dict or not {"id", "text", "point", "embedding"} <= rec.keys():
            raise _Unusual("record")
        if columns is None:   # a saved count that the file could hold sizes the arrays (else they grow)
            names = ("point", "embedding", "direction") if "direction" in rec else ("point", "embedding")
            fits = type(count) is int and 0 < count <= size_bound // (2 * len(names) * dim)
            columns, depths, siblings = _Columns(dim, count if fits else CHUNK_ROWS, names), [], []
        if ("direction" in rec) != (len(columns.names) == 3):
            raise _Unusual("direction")
        columns.add(tuple(rec.pop(k) for k in columns.names))
        if len(columns.names) == 3:
            depth = rec.get("depth")
            if not is_number(depth):
                raise _Unusual("depth")
            depths.append(float(depth))
            siblings.append(rec.get("sibling_index", 0))
        rec["pos"] = len(rows)
        rows.append(rec)
        char = text.peek()
        text.pos += 1
        if char == "]":
            return rows, columns.tensors(), depths, siblings
        if char != ",":
            raise _Unusual("records")


def _document(text: _Text, size_bound: int) -> tuple:
    text.expect("{")
    config = rows = None
    seen: set = set()
    while True:
        key = text.value()
        if not isinstance(key, str) or key in seen:
            raise _Unusual("key")
        seen.add(key)
        text.expect(":")
        if key == "config":
            config, dim = _config(text)
        elif key == "records":
            if config is None:
                raise _Unusual("records before the config")
            rows, vectors, depths, siblings = _records(text, dim, config.get("count"), size_bound)
        else:
            text.value()
        char = text.peek()
        text.pos += 1
        if char == "}":
            break
        if char != ",":
            raise _Unusual("document")
    if rows is None or text.peek() != "":   # no records, or text after the document
        raise _Unusual("document")
    geometry = None
    if "direction" in vectors:
        geometry = (vectors["direction"], torch.tensor(depths, dtype=torch.float64), siblings)
    empty = torch.zeros(0, dim, dtype=torch.float64)
    return config, rows, vectors.get("point", empty), vectors.get("embedding", empty), geometry


def read_document(source: str | IO[bytes], size: int | None = None):
    """``(config, rows, points, embeddings, geometry)`` of a memory JSON document, as
    :func:`~hypermem.store.persistence.from_payload` computes them before ``check_count``
    (``rows`` without their vectors; ``geometry`` is ``(directions, depths, sibling indices)``
    or ``None``), or ``None`` when the document must be read whole (see the module docstring).
    ``source`` is the text or a binary file of ``size`` bytes (which bounds the arrays)."""
    text = _Text(source)
    bound = len(source) if isinstance(source, str) else (size or 0)
    try:
        with gc_paused():   # the parsed records hold no cycles (hypermem.store.gc_pause)
            return _document(text, bound)
    except _Unusual:
        return None
