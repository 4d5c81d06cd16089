"""Checks of a loaded memory document (SQLite rows or JSON records), shared by
:func:`hypermem.store.persistence.load` and :func:`~hypermem.store.persistence.from_payload`:
the format version, the saved count, the declared dimension, the vectors, every field of
every record and the parent links (unknown parents and cycles, walked iteratively).  Each
raises :class:`~hypermem.store.validation.MemoryFileError` naming the file and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sized
from datetime import datetime
from typing import Any

import torch

from .records import MemoryRecord
from .validation import (
    MAX_JSON_DEPTH,
    MemoryFileError,
    check_dim,
    is_int,
    is_number,
    iso_time,
    json_depth_over,
    load_json,
    short,
    stack_vectors,
)

FORMAT_VERSION = 1


def boundary_depth(curvature: float) -> float:
    r"""The depth at which a float64 point reaches the boundary of the ball of curvature
    ``c``: ``2 artanh(1 - 2**-53) / sqrt(c)`` (about ``37.4 / sqrt(c)``).  A point at depth
    ``r`` has norm ``tanh(sqrt(c) r / 2) / sqrt(c)`` (Ganea et al., *Hyperbolic Entailment
    Cones*, ICML 2018, eq. 3 with the exponential map at the origin), and ``1 - 2**-53`` is
    the largest float64 below 1: deeper, ``tanh`` rounds to 1 and no float64 point has that
    depth.  The bound a stored depth must keep (looser than
    :func:`hypermem.store.checks.max_depth`, so that depths recorded before the store clamped
    them to it still load)."""
    return 2.0 * math.atanh(1.0 - 2.0**-53) / math.sqrt(curvature)


def check_format(config: Mapping, where: str) -> None:
    fmt = config.get("format")
    if fmt is None:
        raise MemoryFileError(f"{where} has no format version: not a memory file")
    if isinstance(fmt, bool) or not isinstance(fmt, int):
        raise MemoryFileError(f"{where}: format version must be an integer, got {fmt!r}")
    if fmt != FORMAT_VERSION:
        newer = " (written by a newer version?)" if fmt > FORMAT_VERSION else ""
        raise MemoryFileError(f"{where} has format version {fmt}{newer}; this hypermem reads format "
                              f"{FORMAT_VERSION}")


def check_count(config: Mapping, rows: Sized, where: str) -> None:
    count = config.get("count")
    if count is not None and not is_int(count):
        raise MemoryFileError(f"{where}: the saved count is {short(count)}, not an integer")
    if count is not None and count != len(rows):
        raise MemoryFileError(f"{where} holds {len(rows)} records but was saved with {count}: truncated file")


def config_dim(config: Mapping, where: str) -> int:
    dim = check_dim(config.get("dim"), where, "config dim")
    spec = config.get("embedder")
    if isinstance(spec, Mapping) and spec.get("dim") not in (None, dim):
        raise MemoryFileError(f"{where}: the embedder spec says dim {spec.get('dim')} but the config says {dim}")
    return dim


def stack_rows(values: list, dim: int, what: str, rows: list[dict], where: str) -> torch.Tensor:
    """``(n, dim)`` float64 tensor from blobs or lists (:func:`~hypermem.store.validation.stack_vectors`)."""
    return stack_vectors(values, dim, what, [r.get("id") for r in rows], where)


def floats(values: list, what: str, rows: list[dict], where: str) -> torch.Tensor:
    for i, v in enumerate(values):
        if not is_number(v):
            raise MemoryFileError(f"{where}: the {what} of memory {rows[i].get('id')!r} is {short(v)}, not a finite "
                                  f"number")
    return torch.tensor([float(v) for v in values], dtype=torch.float64)


def parse_time(value: Any, what: str, rid: Any, where: str, required: bool = False,
               datetimes: bool = False) -> datetime | None:
    if value is None and not required:   # most optional times are unset: no label to build
        return None
    return iso_time(value, f"{where}: the {what} of memory {rid!r}", required=required, datetimes=datetimes)


def parse_records(rows: list, where: str, seen: set | None = None, parent: str = "parent",
                  datetimes: bool = False, meta_text: bool = False) -> list[MemoryRecord]:
    """The records of ``rows`` (mappings), every field checked; ``seen``: the ids of earlier
    chunks of the same file (a duplicate of one of them is refused too), extended with these.
    ``parent``: the key of the parent id; ``meta_text``: a meta given as text (a SQLite
    column) is JSON, parsed by :func:`~hypermem.store.validation.load_json` (in a parsed
    document a string is no object); ``datetimes``: times may be ``datetime`` values (a
    database's timestamp columns) as well as ISO 8601 text."""
    records, seen, parent_key = [], set() if seen is None else seen, parent
    for r in rows:
        rid = r.get("id")
        if not isinstance(rid, str) or not rid:
            raise MemoryFileError(f"{where}: record at position {r.get('pos', r.get('seq'))} has a bad id "
                                  f"{short(rid)}")
        if rid in seen:
            raise MemoryFileError(f"{where}: duplicate id {rid!r}")
        seen.add(rid)
        text = r.get("text")
        if not isinstance(text, str):
            raise MemoryFileError(f"{where}: the text of memory {rid!r} is not a string")
        parent = r.get(parent_key)
        if parent is not None and not isinstance(parent, str):
            raise MemoryFileError(f"{where}: the parent of memory {rid!r} is not an id: {parent!r}")
        meta = r.get("meta")
        text_meta = meta_text and isinstance(meta, (str, bytes, bytearray))   # NaN, Infinity, depth refused as read
        meta = load_json(meta, where, f"the meta of memory {rid!r}") if text_meta else meta
        meta = {} if meta is None else meta
        if not isinstance(meta, dict):
            raise MemoryFileError(f"{where}: the meta of memory {rid!r} is not an object")
        if not text_meta:
            if json_depth_over(meta, MAX_JSON_DEPTH):
                raise MemoryFileError(f"{where}: the meta of memory {rid!r} nests deeper than {MAX_JSON_DEPTH} "
                                      f"levels")
            try:  # a parsed document passed as a dict may hold what no JSON file can (NaN, sets, objects)
                json.dumps(meta, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise MemoryFileError(f"{where}: the meta of memory {rid!r} is not plain finite JSON ({exc})") from None
        acc = r.get("access_count")
        acc = 0 if acc is None else acc
        if not is_int(acc) or not 0 <= acc < 2**63:
            raise MemoryFileError(f"{where}: the access count of memory {rid!r} is {short(acc)}")
        vf = parse_time(r.get("valid_from"), "valid_from", rid, where, datetimes=datetimes)
        vu = parse_time(r.get("valid_until"), "valid_until", rid, where, datetimes=datetimes)
        if vf is not None and vu is not None and vu < vf:
            raise MemoryFileError(f"{where}: memory {rid!r} has valid_until before valid_from")
        t = parse_time(r.get("t"), "time", rid, where, required=True, datetimes=datetimes)
        last = parse_time(r.get("last_accessed"), "last_accessed", rid, where, datetimes=datetimes)
        records.append(MemoryRecord(id=rid, text=text, parent_id=parent, t=t, meta=meta, valid_from=vf,
                                    valid_until=vu, access_count=acc, last_accessed=last))
    return records


def hierarchy_levels(records: list[MemoryRecord], where: str) -> list[int]:
    """Hierarchy level of every record; refuses unknown parents and cycles."""
    parent = {r.id: r.parent_id for r in records}
    level: dict[str, int] = {}
    for r in records:
        chain, cur = [], r.id
        while cur is not None and cur not in level:
            if cur in chain:
                raise MemoryFileError(f"{where}: the parents of memory {cur!r} form a cycle")
            chain.append(cur)
            p = parent[cur]
            if p is not None and p not in parent:
                raise MemoryFileError(f"{where}: memory {cur!r} has an unknown parent {p!r}")
            cur = p
        base = -1 if cur is None else level[cur]
        for j, node in enumerate(reversed(chain)):
            level[node] = base + 1 + j
    return [level[r.id] for r in records]
