"""Removing rows from a store's columns in place, moving only what lies after them.

A store keeps its memories in insertion order, one row each, in column tensors and
row-aligned lists (:mod:`hypermem.store.state`).  Removing memories closes the gaps: every
row after a removed one moves down by the number of removed rows before it.  Rows before
the first removed one are not touched, so removing a recent memory costs little however
large the store is; removing an old one moves the rest of the store once.

The removed rows come as a few *blocks* (half-open ``[a, b)`` row ranges): one for a memory
without children, a handful for a small subtree.  Each kept run between two blocks moves as
one slice: ``del`` on a Python list (a ``memmove``), ``memmove`` on a contiguous CPU
tensor too, and on any other tensor a copy through a small reused buffer
(:func:`shift_rows`), since torch refuses a copy between overlapping slices and a fresh
copy of the whole tail would page in as many new bytes.  Blocks so many
that their runs are short (:func:`moves_runs`) fall back to one gather of the kept rows.
"""

from __future__ import annotations

import ctypes

import torch

__all__ = ["BUFFER_BYTES", "MIN_ROWS_PER_BLOCK", "RUN_BYTES", "delete_blocks", "moves_column", "moves_runs", "removed_blocks", "shift_rows"]

MIN_ROWS_PER_BLOCK = 256
"""A removal moves runs while it has at most ``max(64, rows after its first block / 256)``
blocks (each run costs a few slicing calls per column); past that it gathers the kept rows."""


def moves_runs(blocks: list[tuple[int, int]], n: int) -> bool:
    """Whether removing ``blocks`` from ``n`` rows moves runs (else: one gather)."""
    return len(blocks) <= max(64, (n - blocks[0][0]) // MIN_ROWS_PER_BLOCK)

RUN_BYTES = 2048
"""A contiguous CPU column moves its runs (one ``memmove`` each, about a microsecond) while it
has at most one block per ``RUN_BYTES`` bytes after the first block; past that, a gather of
its kept rows (which reads and writes every byte twice) costs less."""


def moves_column(t: torch.Tensor, blocks: list[tuple[int, int]], end: int) -> bool:
    """Whether rows ``0 .. end-1`` of column ``t`` close the gaps of ``blocks`` by moving runs
    even where the lists gather (:func:`moves_runs`): a contiguous CPU tensor of wide rows."""
    row_bytes = t[:1].numel() * t.element_size()
    return t.device.type == "cpu" and t.is_contiguous() and len(blocks) * RUN_BYTES <= (end - blocks[0][0]) * row_bytes


BUFFER_BYTES = 1 << 20
"""The size of the buffer a run of tensor rows moves through (fits the cache)."""


def removed_blocks(drop: torch.Tensor) -> list[tuple[int, int]]:
    """The maximal runs ``[a, b)`` of consecutive rows in ``drop`` (increasing row numbers):
    a run breaks where ``drop[k] != drop[k-1] + 1``."""
    if drop.numel() == 0:
        return []
    brk = (drop[1:] != drop[:-1] + 1).nonzero().squeeze(1) + 1
    starts = torch.cat([drop[:1], drop[brk]]).tolist()
    ends = (torch.cat([drop[brk - 1], drop[-1:]]) + 1).tolist()
    return list(zip(starts, ends))


def shift_rows(t: torch.Tensor, blocks: list[tuple[int, int]], end: int) -> int:
    """Close the gaps of ``blocks`` in rows ``0 .. end-1`` of ``t``, in place: each kept run
    moves down by the removed rows before it.  Returns the number of rows kept below
    ``end``.  Rows at and past that number are left as they were (spare capacity).

    A contiguous CPU column moves each run with one ``memmove`` (overlap allowed, one read
    and one write of each byte); any other tensor through a small reused buffer."""
    flat = t.device.type == "cpu" and t.is_contiguous()
    row_bytes = max(1, t[:1].numel() * t.element_size())
    step = max(1, BUFFER_BYTES // row_bytes)
    buf = None
    shift = 0
    for j, (a, b) in enumerate(blocks):
        if a >= end:
            break
        shift += min(b, end) - a
        src, stop = min(b, end), min(blocks[j + 1][0] if j + 1 < len(blocks) else end, end)
        if flat:
            if stop > src:
                base = t.data_ptr()
                ctypes.memmove(base + (src - shift) * row_bytes, base + src * row_bytes, (stop - src) * row_bytes)
            continue
        i = src
        while i < stop:
            c = min(step, stop - i)
            if c <= shift:  # source and destination do not overlap
                t[i - shift: i - shift + c] = t[i: i + c]
            else:
                if buf is None:
                    buf = t.new_empty((step, *t.shape[1:]))
                buf[:c] = t[i: i + c]
                t[i - shift: i - shift + c] = buf[:c]
            i += c
    return end - shift


def delete_blocks(values: list, blocks: list[tuple[int, int]]) -> None:
    """Delete the rows of ``blocks`` from a row-aligned list, in place (last block first)."""
    for a, b in reversed(blocks):
        del values[a:b]
