"""Argument checks of the memory store: numbers, metadata, times and ``add_many`` batches."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import torch

from ..embed import check_texts, embed_checked
from ..embed.base import check_utf8, utf8_problem
from ..geometry import PoincareBall
from ..geometry.numerics import max_radius
from ..temporal.clock import to_utc
from .caller_warning import warn_caller
from .records import MemoryRecord
from .validation import SQLITE_READ_ERRORS, check_json_depth, short

MODES = ("nearest", "subtree", "children", "ancestors", "siblings", "cone")
METRICS = ("shell", "hyperbolic")
ADD_KEYS = frozenset({"text", "parent", "t", "id", "meta", "valid_from", "valid_until", "embedding", "point"})
CONE_TOL = 1e-9


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()

Filter = Mapping[str, Any] | Callable[[MemoryRecord], bool] | None


def check_finite(name: str, value: Any, *, positive: bool = False, lo: float | None = None,
            hi: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if positive and v <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if lo is not None and v < lo or hi is not None and v > hi:
        raise ValueError(f"{name} must be in [{lo}, {hi}], got {value!r}")
    return v


def max_depth(curvature: float) -> float:
    r"""The deepest radius a store places a memory at, and the bound of ``base_depth``,
    ``depth_step`` and ``query_depth``: ``(2 / sqrt(c)) artanh(1 - 1e-10)``, about
    ``23.72 / sqrt(c)`` (:func:`hypermem.geometry.numerics.max_radius` of float64).

    A float64 point rounds onto the ball's boundary at ``2 artanh(1 - 2**-53) / sqrt(c)``,
    about ``37.4 / sqrt(c)``; the store keeps its points the float64 margin ``1e-10`` inside
    (:func:`hypermem.geometry.poincare.project`), so a point stops moving outward at this
    radius: a deeper depth would no longer be the depth of the memory's point.  A level
    whose ``base_depth + level * depth_step`` lies beyond it, and an explicit ``point=``
    beyond the margin, are placed at this radius (clamped, see
    :mod:`hypermem.store.placement`)."""
    return max_radius(torch.float64, curvature)


def check_depth_settings(base_depth: Any, depth_step: Any, curvature: float) -> tuple[float, float]:
    """``base_depth`` and ``depth_step``: positive finite numbers, each at most
    :func:`max_depth` of the curvature (beyond it a root's point cannot hold its depth, the
    shell scale ``sinh(sqrt(c) depth)`` overflows near 710 and hyperbolic distances become
    infinite); a ``ValueError`` naming the setting and the bound otherwise."""
    top = max_depth(curvature)
    out = []
    for name, value in (("base_depth", base_depth), ("depth_step", depth_step)):
        v = check_finite(name, value, positive=True)
        if v > top:
            raise ValueError(f"{name} must be at most {top:.6g} (the deepest radius a float64 point in the ball "
                             f"of curvature {curvature:g} can hold: 2 artanh(1 - 1e-10) / sqrt(c)), got {value!r}")
        out.append(v)
    return out[0], out[1]


def check_has_direction(emb: torch.Tensor, texts: list, where: Callable[[int], str], embedder: Any = None) -> None:
    """Refuse an embedding (a row of ``emb``) that is all zeros: a memory's direction is its
    unit embedding, and a zero vector has none (no file could hold the memory).  ``embedder``:
    the one that gave ``emb`` (None: the caller's ``embedding=``).  One norm per row; a row
    whose norm is 0 is looked at exactly (tiny entries can underflow the norm)."""
    if emb.shape[0] == 1 and bool(emb.any()):  # one row (an add()) with a non-zero entry: one reduction
        return
    norms = torch.linalg.vector_norm(emb, dim=1)
    if bool((norms > 0).all()):
        return
    for i in (norms == 0).nonzero().flatten().tolist():
        if bool((emb[i] != 0).any()):
            continue
        if embedder is None:
            why = "its embedding is all zeros"
        elif type(embedder).__name__ == "HashingEmbedder":
            why = "the hashing embedder found no word in its text and gave the zero vector"
        else:
            why = f"the embedder {type(embedder).__name__} gave the zero vector for its text"
        named = "" if texts[i] is None else f" (text {short(texts[i])})"   # None: update(embedding=) alone
        raise ValueError(f"{where(i)}{named}: {why}, so the memory would have no direction "
                         f"in the ball; give it an embedding with a non-zero entry")


def embed_for_store(embedder: Any, texts: list, where: Callable[[int], str], return_owned: bool = False):
    """:func:`hypermem.embed.embed_checked` for texts a store keeps: also refuses an all-zero
    row (:func:`check_has_direction`), ``where(i)`` naming text ``i``."""
    emb, owned = embed_checked(embedder, texts, return_owned=True)
    check_has_direction(emb, texts, where, embedder)
    return (emb, owned) if return_owned else emb


_FLAT = (str, int, bool, type(None))
"""Types of a metadata value that always survive a JSON round trip unchanged."""


def check_meta(meta: Any, where: str) -> dict:
    """Metadata must survive a JSON round trip unchanged (so every store can be saved):
    string keys, JSON values, no NaN, no tuples or sets, no string UTF-8 cannot encode (a lone
    surrogate, :func:`hypermem.embed.base.check_utf8`).  Returns the store's own copy (the
    caller's dict and the lists and dicts inside it are not kept)."""
    if meta is None or (type(meta) is dict and not meta):
        return {}
    if not isinstance(meta, Mapping):
        raise TypeError(f"{where}: meta must be a dict, got {type(meta).__name__}")
    meta = dict(meta)
    for k, v in meta.items():   # flat (string keys, scalar values: the common case) round-trips as it is
        if type(k) is not str:
            break
        if not k.isascii():   # one O(1) test for an ASCII key or value; an encode for the others
            check_utf8(k, f"{where}: the meta key {k!r}")
        t = type(v)
        if t is str:
            if not v.isascii():
                check_utf8(v, f"{where}: meta[{k!r}]")
        elif not (t is int or t is bool or v is None or t is float and math.isfinite(v)):
            break
    else:
        return meta
    check_json_depth(meta, f"{where}: meta")  # before json.dumps, which recurses
    try:
        text = json.dumps(meta, allow_nan=False, ensure_ascii=False)
        if not text.isascii():
            text.encode("utf-8")
        back = json.loads(text)
    except UnicodeEncodeError:   # a lone surrogate: where it is
        raise ValueError(f"{where}: in meta, {json_problem(meta)}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: meta must be JSON-serialisable ({json_problem(meta) or exc})") from exc
    if back != meta:
        raise ValueError(f"{where}: meta must be plain JSON (string keys; lists, not tuples): it does not "
                         f"survive a JSON round trip unchanged")
    return back   # a copy all the way down: the caller's nested lists and dicts stay the caller's


def json_problem(value: Any) -> str | None:
    """Where ``value`` (a dict or list) is not plain JSON, in words (``'f' is nan, and NaN and
    infinity are not JSON: ...``; nested places as ``'a'['b'][1]``), or ``None`` when it is.
    Iterative, the first problem in document order: a deep value raises no RecursionError."""
    todo: list[tuple[Any, str]] = [(value, "")]
    while todo:
        v, path = todo.pop()
        here = path or "the value"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{here} is {v!r}, and NaN and infinity are not JSON: store a finite number, a string or None"
        if isinstance(v, str) and not v.isascii() and (bad := utf8_problem(v)):
            return f"{here} {bad}"
        if v is None or isinstance(v, (str, bool, int, float)):
            continue
        if isinstance(v, Mapping):
            bad = next((k for k in v if not isinstance(k, str)), None)
            if bad is not None:
                return f"{here} has the key {bad!r}: JSON keys are strings"
            bad = next((k for k in v if not k.isascii() and utf8_problem(k)), None)
            if bad is not None:
                return f"{here} has the key {bad!r}, which {utf8_problem(bad)}"
            todo.extend((x, f"{path}[{k!r}]" if path else repr(k)) for k, x in reversed(list(v.items())))
        elif isinstance(v, list):
            todo.extend((x, f"{path}[{n}]" if path else f"[{n}]") for n, x in reversed(list(enumerate(v))))
        else:
            hint = " (store a list)" if isinstance(v, tuple) else ""
            return f"{here} is a {type(v).__name__}, which is not JSON{hint}"
    return None


NANOSECONDS_WARNED = False
"""Whether :func:`plain_datetime` has warned (once a process) that nanoseconds were dropped."""


def plain_datetime(value: datetime) -> datetime:
    """A ``datetime`` subclass (a ``pandas.Timestamp``) as a plain ``datetime`` of the same
    instant and zone, as the store keeps a time: to the microsecond, the resolution that
    ``save``/``load`` and ``to_json`` keep, so the record in memory equals the one loaded.
    Non-zero nanoseconds are dropped (truncated, as ``Timestamp.to_pydatetime`` does) with a
    ``UserWarning`` once a process."""
    global NANOSECONDS_WARNED
    if getattr(value, "nanosecond", 0) and not NANOSECONDS_WARNED:
        NANOSECONDS_WARNED = True
        warn_caller(f"a time with nanoseconds ({value}) is stored to the microsecond: the store keeps "
                    "microseconds (as datetime, save/load and to_json do); its nanoseconds are dropped "
                    "(warned once)")
    return datetime(value.year, value.month, value.day, value.hour, value.minute, value.second,
                    value.microsecond, value.tzinfo, fold=getattr(value, "fold", 0))


def check_time(value: Any, name: str, where: str | int) -> datetime | None:
    """``value`` as an aware UTC datetime (``None`` stays ``None``); ``where`` names the
    call or, as an int, the ``add_many`` item (formatted only for an error)."""
    if value is None:
        return None
    if type(value) is datetime and value.tzinfo is timezone.utc:
        return value
    if not isinstance(value, datetime):
        where = f"item #{where}" if isinstance(where, int) else where
        raise TypeError(f"{where}: {name} must be a datetime or None, got {type(value).__name__}")
    if type(value) is not datetime and value == value:   # a pandas Timestamp (NaT: to_utc names it)
        value = plain_datetime(value)
    try:
        return to_utc(value)
    except (ValueError, OverflowError):   # again, naming the argument (built only on an error)
        return to_utc(value, f"{f'item #{where}' if isinstance(where, int) else where}: {name}")


class Batch:
    """The columns of an ``add_many`` call, checked (all or nothing: nothing is stored if
    any item is bad)."""

    __slots__ = ("texts", "ids", "parents", "times", "valid_from", "valid_until", "metas", "embeddings", "points",
                 "single", "first")

    @classmethod
    def check(cls, items: list, dim: int, ball: PoincareBall, single: bool = False) -> Batch:
        """``single``: the batch of one ``add()`` call (errors then name ``add()``, not an item)."""
        b = cls()
        b.single, b.first = single, 0
        at = _at_add if single else _at_item
        n = len(items)
        texts, ids, parents = [None] * n, [None] * n, [None] * n
        times, vfrom, vuntil, metas = [None] * n, [None] * n, [None] * n, [None] * n
        b.embeddings, b.points = {}, {}
        # One pass; the common cases (str, None, no metadata) cost no call.
        for i, it in enumerate(items):
            if not isinstance(it, Mapping):
                raise TypeError(f"item #{i} must be a dict of add() arguments, got {type(it).__name__}")
            if not it.keys() <= ADD_KEYS:
                raise ValueError(f"item #{i} has unknown keys {sorted(it.keys() - ADD_KEYS)}; "
                                 f"allowed: {sorted(ADD_KEYS)}")
            get = it.get
            text = get("text")
            if type(text) is not str or not text.strip():
                if "text" not in it:
                    raise ValueError(f"{at(i)} has no 'text'")
                if not isinstance(text, str):
                    raise TypeError(f"{at(i)}: text must be a string, got {type(text).__name__}")
                if not text.strip():
                    raise ValueError(f"{at(i)}: text is blank: a memory's text must be a non-empty string")
            if not text.isascii():   # O(1) for ASCII text
                check_utf8(text, f"{at(i)}: text")
            texts[i] = text
            id_ = get("id")
            if id_ is not None:
                if not isinstance(id_, str) or not id_.strip():
                    raise ValueError(f"{at(i)}: id must be a non-empty string, got {id_!r}")
                if not id_.isascii():
                    check_utf8(id_, f"{at(i)}: id {id_!r}")
                ids[i] = id_
            par = get("parent")
            if par is not None:
                if not isinstance(par, str):
                    if isinstance(par, float) and par != par:   # a DataFrame's root (pandas gives NaN)
                        raise TypeError(f"{at(i)}: parent is a missing parent (NaN): use None for a root")
                    raise TypeError(f"{at(i)}: parent must be a memory id (str), got {type(par).__name__}")
                if not par.isascii():
                    check_utf8(par, f"{at(i)}: parent {par!r}")
                parents[i] = par
            t = get("t")
            if t is not None:
                times[i] = check_time(t, "t", at(i) if single else i)
            vf, vu = get("valid_from"), get("valid_until")
            if vf is not None or vu is not None:  # validity windows are rare: no calls without one
                vf = vfrom[i] = check_time(vf, "valid_from", at(i) if single else i)
                vu = vuntil[i] = check_time(vu, "valid_until", at(i) if single else i)
                if vf is not None and vu is not None and vu < vf:
                    raise ValueError(f"{at(i)}: valid_until ({vu}) is before valid_from ({vf})")
            meta = get("meta")
            metas[i] = {} if meta is None else check_meta(meta, at(i))
            if get("embedding") is not None:
                b.embeddings[i] = check_embedding(it["embedding"], dim, text, at(i))
            if get("point") is not None:
                p = torch.as_tensor(it["point"], dtype=torch.float64).detach().cpu()
                if p.shape != (dim,):
                    raise ValueError(f"{at(i)}: point must have shape ({dim},), got {tuple(p.shape)}")
                ball.check_inside(p, name=f"{at(i)} point")
                b.points[i] = p
        b.texts, b.ids, b.parents, b.times = texts, ids, parents, times
        b.valid_from, b.valid_until, b.metas = vfrom, vuntil, metas
        return b

    def part(self, lo: int, hi: int) -> Batch:
        """Items ``lo .. hi-1`` as a batch of their own (already checked)."""
        b = Batch()
        for name in set(Batch.__slots__) - {"embeddings", "points", "single", "first"}:  # the per-item lists
            setattr(b, name, getattr(self, name)[lo:hi])
        b.single, b.first = self.single, self.first + lo
        b.embeddings = {i - lo: e for i, e in self.embeddings.items() if lo <= i < hi}
        b.points = {i - lo: p for i, p in self.points.items() if lo <= i < hi}
        return b

    def at(self, i: int) -> str:
        """How errors name item ``i`` of this batch (``add()`` for a single add)."""
        return _at_add(i) if self.single else _at_item(self.first + i)

    def embed(self, embedder, dim: int) -> tuple[torch.Tensor, bool]:
        """The batch's embeddings ``(m, dim)`` float64: the embedder's (one call) for the items
        without ``embedding=``, the given ones for the rest.  ``owned``: the tensor is fresh
        (nobody else holds it), so a store may keep it as its column without a copy."""
        todo = [i for i in range(len(self.texts)) if i not in self.embeddings]
        if len(todo) == len(self.texts):
            return embed_for_store(embedder, self.texts, self.at, return_owned=True)
        emb = torch.empty(len(self.texts), dim, dtype=torch.float64)
        if todo:
            emb[todo] = embed_for_store(embedder, [self.texts[i] for i in todo], lambda j: self.at(todo[j]))
        for i, e in self.embeddings.items():
            emb[i] = e
        return emb, True


def check_ids(ids: Any, call: str) -> list:
    """``ids`` as a list; a single string (a common slip for ``[id]``) or a non-iterable is a
    ``TypeError`` naming ``call``; an id UTF-8 cannot encode (a lone surrogate) a ``ValueError``."""
    if isinstance(ids, str) or not isinstance(ids, Iterable):
        raise TypeError(f"{call} takes a list of ids, got {type(ids).__name__} {ids!r:.60}")
    out = list(ids)
    for i in out:
        if type(i) is str and not i.isascii():
            check_utf8(i, f"{call}: id {i!r}")
    return out


def check_embedding(embedding: Any, dim: int, text: str | None, where: str) -> torch.Tensor:
    """A precomputed embedding given for ``text`` (``add_many``'s ``embedding``, ``update``'s):
    a finite, non-zero vector of shape ``(dim,)``, returned as a float64 CPU tensor."""
    try:
        e = torch.as_tensor(embedding, dtype=torch.float64).detach().cpu()
    except (TypeError, ValueError, RuntimeError) as exc:
        raise TypeError(f"{where}: embedding must be a vector of {dim} numbers ({exc})") from exc
    if e.shape != (dim,):
        raise ValueError(f"{where}: embedding must have shape ({dim},), got {tuple(e.shape)}")
    if not bool(torch.isfinite(e).all()):
        raise ValueError(f"{where}: embedding has non-finite values")
    check_has_direction(e[None], [text], lambda _: where)
    return e


def embedding_for_update(embedder: Any, dim: int, text: str | None, embedding: Any, where: str):
    """The new embedding of ``update(id, text=, embedding=)``: the given one (checked as
    :func:`check_embedding`), else the embedder's for the new text, else ``None`` (no move)."""
    if embedding is not None:
        return check_embedding(embedding, dim, text, where)
    return None if text is None else embed_for_store(embedder, [text], lambda _: where)[0]


def check_update(id: str, text: str | None, meta: Any, t: Any, valid_from: Any, valid_until: Any):
    """The checked arguments of ``update(id, ...)``: ``(where, meta, t, valid_from,
    valid_until)`` (``UNSET`` kept for a bound not given); ``text`` must be non-blank."""
    where = f"update({id!r})"
    if isinstance(id, str) and not id.isascii():
        check_utf8(id, f"{where}: id")
    if text is not None:
        check_texts([text], what="text")
    new_meta = None if meta is None else check_meta(meta, where)
    vf = valid_from if valid_from is UNSET else check_time(valid_from, "valid_from", where)
    vu = valid_until if valid_until is UNSET else check_time(valid_until, "valid_until", where)
    return where, new_meta, check_time(t, "t", where), vf, vu


def check_window(rec: MemoryRecord, valid_from: Any, valid_until: Any, where: str) -> None:
    """Refuse an update that would leave ``rec``'s validity window ending before it starts."""
    lo = rec.valid_from if valid_from is UNSET else valid_from
    hi = rec.valid_until if valid_until is UNSET else valid_until
    if lo is not None and hi is not None and hi < lo:
        raise ValueError(f"{where}: valid_until ({hi}) is before valid_from ({lo})")


def _at_item(i: int) -> str:
    return f"item #{i}"


def _at_add(i: int) -> str:
    return "add()"


def usable_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device, or a ``ValueError`` saying why tensors cannot live there
    (``"cuda"`` on a machine without CUDA raises a bare ``AssertionError`` in torch)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a torch device ({exc})") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available here (torch.cuda.is_available() is "
                         f"False; torch {torch.__version__}); use device='cpu'")
    try:
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError) as exc:
        raise ValueError(f"device={device!r} cannot hold tensors here: {exc}") from exc
    return dev


_OTHER_FORMATS = {".json": "to_json", ".jsonl": "to_json", ".csv": "to_dataframe().to_csv", ".html": "inspect",
                  ".htm": "inspect"}


def check_sqlite_name(path: str | os.PathLike, call: str = "save()") -> None:
    """``ValueError`` when ``path`` ends in another format's extension (``.json``, ``.csv``,
    ``.html``...): ``call`` (``save()``, ``Memory.open()``) writes SQLite, whatever the name."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    if suffix in _OTHER_FORMATS:
        raise ValueError(f"{call} writes a SQLite file, but {os.fspath(path)!r} names a {suffix} file: use "
                         f"memory.{_OTHER_FORMATS[suffix]}(path) for that format, or a .db name for SQLite")


def sqlite_tables(path: str | os.PathLike) -> set[str] | None:
    """The table names of the SQLite file ``path`` (opened read-only, nothing written: no
    ``-wal`` / ``-shm`` file appears); None when it is no file or no SQLite database.

    With no write-ahead log or journal beside it the file is all there is, and it is read
    ``immutable=1`` (SQLite opens no other file).  Beside a live log (another process has the
    store open) it is read ``mode=ro``, which sees the log, and ``immutable=1`` where that fails
    (a folder this process cannot write: WAL cannot open its ``-shm`` file there)."""
    import sqlite3

    from .sqlite_paths import connect

    if not os.path.isfile(path):
        return None
    name = os.path.abspath(path)
    logged = any(os.path.exists(name + s) and os.path.getsize(name + s) > 0 for s in ("-wal", "-journal"))
    for query in ("mode=ro", "immutable=1") if logged else ("immutable=1",):
        try:
            con = connect(name, query)
            try:
                return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            finally:
                con.close()
        except sqlite3.OperationalError:  # mode=ro in a folder it cannot write: try immutable
            continue
        except SQLITE_READ_ERRORS:  # a corrupt schema can raise UnicodeDecodeError too
            return None
    return None


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


def _sqlite_header(path: str | os.PathLike) -> bool:
    """Whether ``path`` starts with SQLite's 16-byte header (``SQLite format 3\\0``): a database,
    readable or not."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_HEADER
    except OSError:
        return False


def check_replaceable(path: str | os.PathLike, *, force: bool = False) -> None:
    """``FileExistsError`` when ``save(path)`` would replace a file that is not a file of
    ``Memory.save``: a file that is no SQLite database (a user's ``edges.tsv``; replaced only with
    ``force``, the CLI's ``--force``), a folder, or an SQLite database of another kind (a durable
    store of ``Memory.open``, an episodic memory, another application's database; never
    replaced).  A snapshot replaces a snapshot (tables ``config`` and ``records``, what the
    loader reads), a database too corrupt to list its tables (SQLite's header, an unreadable
    schema), an empty file or a new name."""
    tables = sqlite_tables(path)
    where = repr(os.fspath(path))
    if tables is None:
        if os.path.isdir(path):
            raise IsADirectoryError(f"save() writes a file, but {where} is a folder: give a file name such as "
                                    "memory.db")
        if force or not os.path.exists(path) or _sqlite_header(path):   # a corrupt database is replaced
            return
        raise FileExistsError(f"save() would replace {where}, which is not a hypermem memory file (no SQLite "
                              "database): save to another name, or remove that file first")
    if not tables or ("records" in tables and "config" in tables and "hm_config" not in tables):
        return
    if "hm_config" in tables:
        what = "a durable store of Memory.open (every call is written through to it)"
    elif "memories" in tables and "config" in tables:
        what = "an episodic memory file (MemoryStorage.save)"
    else:
        what = f"another SQLite database (tables: {sorted(tables)[:8]})"
    raise FileExistsError(f"save() would replace {where}, {what}: save to another name, or remove that file first")
