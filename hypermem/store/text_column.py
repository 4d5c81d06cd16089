"""A store's texts as one column: UTF-8 bytes end to end, with the offsets where each ends.

A Python ``str`` costs 49 bytes of header beside its characters, and a list slot 8 more: a
text of 40 ASCII characters takes about 100 bytes held as a list of strings, 48 held here
(40 bytes in one ``bytearray`` and an 8-byte end offset in an ``array('q')``).  At a million
memories that is 50 MB, a tenth of what a memory costs beside its vector.

:class:`TextColumn` is a read-only :class:`~collections.abc.Sequence` of ``str`` that also
appends (:meth:`append`, :meth:`extend`), rewrites one row (``column[i] = text``: the new
text waits in a small overlay until the overlay is worth folding back in) and selects rows
(:meth:`take`; :meth:`keep_from` for a store that removes memories).  Reading a row decodes its bytes: a new
``str`` each time, equal to the one stored.  Any ``str`` round-trips, lone surrogates
included (``surrogatepass``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, islice

import numpy as np

__all__ = ["TextColumn"]

_ENCODING, _ERRORS = "utf-8", "surrogatepass"
_FOLD_AT = 1024
"""Rewritten rows kept apart before the overlay is folded back (also when it passes 1/8 of
the rows)."""


class TextColumn(Sequence):
    """Texts stored as one UTF-8 buffer and the end offset of each (module docstring)."""

    __slots__ = ("_blob", "_ends", "_over")

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._blob = bytearray()
        self._ends = array("q")
        self._over: dict[int, str] = {}
        self.extend(texts)

    def __len__(self) -> int:
        return len(self._ends)

    def _row(self, i: int) -> int:
        n = len(self._ends)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {i} out of range for {n} texts")
        return i

    def _decode(self, i: int) -> str:
        ends = self._ends
        return self._blob[ends[i - 1] if i else 0:ends[i]].decode(_ENCODING, _ERRORS)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = self._row(i.__index__())
        if self._over:
            s = self._over.get(i)
            if s is not None:
                return s
        return self._decode(i)

    def __iter__(self) -> Iterator[str]:
        blob, over, start = self._blob, self._over, 0
        for i, end in enumerate(self._ends):
            s = over.get(i) if over else None
            yield s if s is not None else blob[start:end].decode(_ENCODING, _ERRORS)
            start = end

    def append(self, text: str) -> None:
        self.extend((text,))

    def extend(self, texts: Iterable[str]) -> None:
        """Append ``texts`` (each a ``str``) as new rows."""
        encoded = []
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"a text must be a str, got {type(t).__name__}")
            encoded.append(t.encode(_ENCODING, _ERRORS))
        base = len(self._blob)
        self._blob += b"".join(encoded)
        self._ends.extend(islice(accumulate(map(len, encoded), initial=base), 1, None))

    def __setitem__(self, i: int, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a text must be a str, got {type(text).__name__}")
        i = self._row(i.__index__())
        self._over[i] = text
        if len(self._over) > max(_FOLD_AT, len(self._ends) // 8):
            self._fold()

    def many(self, rows: Iterable[int]) -> list[str]:
        """The texts of ``rows`` (valid row numbers), in that order: ``[column[r] for r in
        rows]`` without the per-row call (a search's results read thousands at once)."""
        blob, ends, over, n = self._blob, self._ends, self._over, len(self._ends)
        out = []
        for r in rows:
            if not 0 <= r < n:
                r = self._row(r)
            s = over.get(r) if over else None
            out.append(s if s is not None else blob[ends[r - 1] if r else 0:ends[r]].decode(_ENCODING, _ERRORS))
        return out

    def take(self, rows: Iterable[int]) -> TextColumn:
        """A new column of the texts of ``rows``, in that order."""
        out = TextColumn()
        blob, ends, over = self._blob, self._ends, self._over
        parts, lengths = [], []
        for r in rows:
            r = self._row(r)
            s = over.get(r) if over else None
            b = s.encode(_ENCODING, _ERRORS) if s is not None else blob[ends[r - 1] if r else 0:ends[r]]
            parts.append(b)
            lengths.append(len(b))
        out._blob = bytearray(b"".join(parts))
        out._ends = array("q", accumulate(lengths))
        return out

    def keep_from(self, first: int, rows: Sequence[int]) -> None:
        """Keep rows ``0 .. first-1`` and then ``rows`` (increasing, each at least ``first``),
        in place: a store's removal rewrites only the buffer after its first removed row."""
        blob, ends, over = self._blob, self._ends, self._over
        tail = [over[r].encode(_ENCODING, _ERRORS) if over and r in over else blob[ends[r - 1] if r else 0:ends[r]]
                for r in rows]
        base = ends[first - 1] if first else 0
        del blob[base:]
        del ends[first:]
        blob += b"".join(tail)
        ends.extend(islice(accumulate(map(len, tail), initial=base), 1, None))
        if over:
            new_row = {r: first + j for j, r in enumerate(rows)}
            self._over = {r if r < first else new_row[r]: t for r, t in over.items() if r < first or r in new_row}

    def delete_blocks(self, blocks: Sequence[tuple[int, int]]) -> None:
        """Delete the rows of ``blocks`` (increasing ``[a, b)`` ranges), in place: the bytes
        after each block move down once and the later end offsets shift by its length."""
        blob, ends, over = self._blob, self._ends, self._over
        offsets = np.frombuffer(ends, dtype=np.int64) if len(ends) else None
        for a, b in reversed(blocks):
            start, stop = (ends[a - 1] if a else 0), ends[b - 1]
            del blob[start:stop]
            if offsets is not None:
                offsets[b:] -= stop - start
        del offsets  # the array may resize once no buffer view is held
        for a, b in reversed(blocks):
            del ends[a:b]
        if over:
            starts = [a for a, _ in blocks]
            shifts = list(accumulate(b - a for a, b in blocks))

            def moved(r: int) -> int | None:  # the row's new number (None: removed)
                j = bisect_right(starts, r) - 1
                return r if j < 0 else (None if r < blocks[j][1] else r - shifts[j])
            self._over = {k: t for r, t in over.items() if (k := moved(r)) is not None}

    def _fold(self) -> None:
        """Write the rewritten rows back into the buffer."""
        folded = self.take(range(len(self)))
        self._blob, self._ends, self._over = folded._blob, folded._ends, {}

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffer and the offsets (the overlay's strings apart)."""
        return len(self._blob) + self._ends.itemsize * len(self._ends)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (TextColumn, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TextColumn(n={len(self)}, bytes={self.nbytes:,})"

    def __getstate__(self):
        return {"blob": bytes(self._blob), "ends": self._ends.tobytes(), "over": dict(self._over)}

    def __setstate__(self, state) -> None:
        self._blob = bytearray(state["blob"])
        self._ends = array("q")
        self._ends.frombytes(state["ends"])
        self._over = dict(state["over"])


def as_text_column(texts: Sequence[str] | TextColumn) -> TextColumn:
    """``texts`` as a :class:`TextColumn` (a list from a table pickled before the column)."""
    return texts if isinstance(texts, TextColumn) else TextColumn(texts)
