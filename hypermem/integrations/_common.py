"""What the framework adapters share: time and metadata conversion, one filter language,
upserts (:mod:`._upserts`, re-exported), query points, relevance scores and maximal marginal relevance over a
:class:`~hypermem.store.Memory`.  Imports no framework."""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import torch

from ..embed import embed_checked
from ..geometry import poincare as P
from ..store import Memory, MemoryRecord, SearchResult
from ..store.backends.pg_errors import redact
from ..store.encoder_points import is_hierarchy_encoder, places_points
from ..store.filters import MISSING, FilterError, check_filter, filter_keys, map_fields
from ..store.filters import compile_filter as _compile_filter
from ..store.validation import MAX_JSON_DEPTH, json_depth_over
from ..temporal.clock import from_seconds, to_utc
from ._upserts import parents_first, remove, upsert  # noqa: F401 - the adapters' C.upsert and C.remove

STORE_KEYS = ("parent", "t", "valid_from", "valid_until")
"""Metadata keys that become :meth:`Memory.add` arguments instead of metadata."""

TIME_KEYS = ("t", "valid_from", "valid_until")
"""The :data:`STORE_KEYS` that hold times: a filter compares them as instants (:func:`instants`)."""


# ---------------------------------------------------------------------------- time
def to_time(value: Any, name: str = "time") -> datetime | None:
    """``value`` (a datetime, an ISO 8601 string or POSIX seconds) as an aware UTC datetime;
    ``None`` stays ``None``.  A naive datetime or string is taken to be UTC."""
    if value is None or isinstance(value, datetime):
        return None if value is None else to_utc(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{name} must be an ISO 8601 time, got {value!r}") from None
        return to_utc(parsed)   # a time outside years 1..9999 in UTC: to_utc's own error
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number of POSIX seconds, got {value!r}")
        return from_seconds(value)
    raise TypeError(f"{name} must be a datetime, an ISO 8601 string or POSIX seconds, got {type(value).__name__}")


def iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


# ---------------------------------------------------------------------------- metadata
def split_metadata(metadata: Mapping[str, Any] | None, where: str = "metadata") -> tuple[dict, dict]:
    """``(store arguments, remaining metadata)``: the :data:`STORE_KEYS` of ``metadata``
    become the ``parent`` / ``t`` / ``valid_from`` / ``valid_until`` of :meth:`Memory.add`
    (times parsed by :func:`to_time`); the rest stays metadata.  ``metadata`` is not changed."""
    if metadata is None:
        return {}, {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"{where} must be a dict, got {type(metadata).__name__}")
    meta = dict(metadata)
    args: dict[str, Any] = {}
    parent = meta.pop("parent", None)
    if parent is not None:
        if not isinstance(parent, str) or not parent:
            raise TypeError(f"{where}: 'parent' must be a memory id (a non-empty str), got {parent!r}")
        args["parent"] = parent
    for key in ("t", "valid_from", "valid_until"):
        t = to_time(meta.pop(key, None), f"{where}: {key!r}")
        if t is not None:
            args[key] = t
    return args, meta


def record_metadata(rec: MemoryRecord, include_time: bool = False) -> dict[str, Any]:
    """The inverse of :func:`split_metadata`: the record's metadata plus ``parent`` and the
    validity window when set (times as ISO strings), and ``t`` with ``include_time``."""
    out = dict(rec.meta)
    if rec.parent_id is not None:
        out["parent"] = rec.parent_id
    if include_time:
        out["t"] = iso(rec.t)
    if rec.valid_from is not None:
        out["valid_from"] = iso(rec.valid_from)
    if rec.valid_until is not None:
        out["valid_until"] = iso(rec.valid_until)
    return out


def meta_field(rec: MemoryRecord, key: str) -> Any:
    """One field as :func:`record_metadata` shows it (``MISSING`` when absent)."""
    if key == "parent":
        return MISSING if rec.parent_id is None else rec.parent_id
    if key in TIME_KEYS:  # the canonical UTC text of :func:`iso`, which :func:`instants` compares
        t = getattr(rec, key)
        return MISSING if t is None else iso(t)
    return rec.meta.get(key, MISSING)


# ---------------------------------------------------------------------------- filters
def compile_filter(spec: Any, lookup: Callable[[Any, str], Any] = meta_field,
                   times: Sequence[str] = TIME_KEYS) -> Callable[[Any], bool] | None:
    """A predicate on records from a filter of the store's one filter language
    (:mod:`hypermem.store.filters`; ``$eq``, ``$in``, ``$and``, ...); ``lookup(record, field)``
    reads a field, by default :func:`meta_field` (``parent``, ``t`` and the validity window
    too).  The fields ``times`` are compared as instants (:func:`instants`); ``()`` for a
    ``lookup`` whose fields of those names are ordinary values (LangGraph's item values)."""
    return _compile_filter(instants(spec, times), lookup)


_INSTANT_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_INSTANT_LISTS = ("$in", "$nin")


def instants(spec: Any, times: Sequence[str] = TIME_KEYS) -> Any:
    """``spec`` with every operand on a field of ``times`` (plain, of ``$eq $ne $gt $gte $lt
    $lte``, or in the list of ``$in $nin``) that is a time (a datetime, ISO 8601 text in any
    offset, or POSIX seconds: :func:`to_time`) rewritten once, before any record is read, as
    :func:`iso` writes the stored time (:func:`meta_field`): the UTC text
    ``YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00``, whose code-point order is the order of the instants.
    So ``...T10:00Z`` equals a stored ``...T12:00+02:00`` of the same day, per row at no cost.
    Text that is no time, and finite POSIX seconds outside the times a datetime holds (years
    1..9999 in UTC), are a :class:`FilterError` naming the field; other operands (``$exists``,
    ``$text_match``, ...) stay."""
    keys = set(times)
    if not keys or not isinstance(spec, Mapping) or not filter_keys(spec) & keys:
        return spec
    if json_depth_over(spec, MAX_JSON_DEPTH):
        check_filter(spec)  # the store's error for a filter too deep, before any recursion
    return _instants(spec, keys)


def _instants(spec: Mapping, keys: set[str]) -> dict:
    def field(key: Any, want: Any) -> dict:
        if key not in keys:
            return {key: want}
        if isinstance(want, Mapping):
            return {key: {op: _operand(op, x, key) for op, x in want.items()}}
        return {key: _operand("$in" if isinstance(want, _LISTS) else "$eq", want, key)}
    return map_fields(spec, field)


_LISTS = (list, tuple, set, frozenset)
_FIRST = round(datetime.min.replace(tzinfo=timezone.utc).timestamp())   # -62135596800
_LAST = round(datetime.max.replace(tzinfo=timezone.utc).timestamp())    # 253402300800


def _operand(op: str, x: Any, key: str) -> Any:
    if op in _INSTANT_OPS:
        return _instant(x, key)
    return [_instant(i, key) for i in x] if op in _INSTANT_LISTS and isinstance(x, _LISTS) else x


def _instant(x: Any, key: str) -> Any:
    if not isinstance(x, (str, datetime, int, float)) or isinstance(x, bool):
        return x  # None, a bool, a list...: what the store's language makes of it
    if isinstance(x, (int, float)) and math.isfinite(x) and not _FIRST <= x < _LAST:
        raise FilterError(f"the filter value for {key!r}: {x!r} POSIX seconds is outside the times a datetime "
                          f"holds (years 1..9999 in UTC: from {_FIRST} up to, not including, {_LAST}); "
                          f"pass a time in that range")
    try:
        return iso(to_time(x, f"the filter value for {key!r}"))
    except (TypeError, ValueError) as exc:
        raise FilterError(str(exc)) from None


def store_filter(spec: Any, lookup: Callable[[Any, str], Any] = meta_field) -> Any:
    """What to pass as :meth:`Memory.search`'s ``filters``: a dict on ordinary metadata keys
    is passed as it is (the store speaks the same language, and PostgreSQL runs it in SQL);
    one that names ``parent``/``t``/``valid_from``/``valid_until`` or needs another ``lookup`` is
    compiled by :func:`compile_filter` (times compared as instants)."""
    if spec is None:
        return None
    if lookup is meta_field and isinstance(spec, Mapping) and not (filter_keys(spec) & set(STORE_KEYS)):
        check_filter(spec)
        return dict(spec)
    return compile_filter(spec, lookup)


def lists_as_values(spec: Any) -> Any:
    """``spec`` with every plain list value made ``{"$eq": list}``: LangGraph's stores
    compare a list value for equality, where the store's language reads it as ``$in``."""
    if not isinstance(spec, Mapping):
        return spec

    def field(key: Any, want: Any) -> dict:
        if isinstance(want, Mapping) and not any(str(k).startswith("$") for k in want):
            return {key: lists_as_values(want)}
        return {key: {"$eq": want} if isinstance(want, list) and not str(key).startswith("$") else want}
    return map_fields(spec, field)


def all_of(*preds: Callable[[Any], bool] | None) -> Callable[[Any], bool] | None:
    """The conjunction of the predicates that are not ``None`` (``None`` if none are)."""
    ps = [p for p in preds if p is not None]
    if not ps:
        return None
    return ps[0] if len(ps) == 1 else (lambda r: all(p(r) for p in ps))


# ---------------------------------------------------------------------------- store access
def is_json_path(path: Any) -> bool:
    return isinstance(path, (str, os.PathLike)) and os.fspath(path).lower().endswith(".json")


def open_memory(source: Any = None, embedder: Any = None, *, server_ok: bool = False, name: str = "this adapter",
                **kwargs: Any) -> Memory:
    """A :class:`Memory` from ``source``: a ``Memory`` (used as is), ``None`` (a new one
    with ``embedder`` and the ``Memory`` keyword arguments), a ``postgresql://`` URL or the
    path of a durable SQLite file (:meth:`Memory.open`: write-through), or the path of a
    snapshot: a file written by :meth:`Memory.save` (or, named ``.json``, by
    :meth:`Memory.to_json`), loaded; a path that does not exist yet gives a new in-process
    memory that :func:`save_memory` writes there.  A ``ServerMemory`` (``Memory.open(url,
    mirror=False)``) is used as is with ``server_ok``, else refused with a ``TypeError`` that
    names ``name`` and the fix."""
    from ..store.backends.server import ServerMemory

    if isinstance(source, ServerMemory) and not server_ok:
        raise TypeError(f"{name} needs a Memory with its in-process mirror: a ServerMemory "
                        f"(Memory.open(url, mirror=False)) searches on the server, which takes no "
                        f"callable filter; open the store with Memory.open(url) (mirror=True, the default)")
    if isinstance(source, (Memory, ServerMemory)):
        if embedder is not None or kwargs:
            raise ValueError("pass either a Memory or the arguments to build one (embedder, ...), not both")
        return source  # type: ignore[return-value]
    if source is None:
        return Memory(embedder=embedder, **kwargs)
    if isinstance(source, (str, os.PathLike)):
        from ..store.backends.opening import is_durable_file

        path = os.fspath(source)
        if "://" in path or is_durable_file(path):
            return Memory.open(path, embedder=embedder, **kwargs)
        if os.path.exists(path):
            load = Memory.from_json if is_json_path(path) else Memory.load
            return load(path, embedder=embedder, **kwargs)
        return Memory(embedder=embedder, **kwargs)
    raise TypeError(f"expected a Memory, a file path or None, got {type(source).__name__}")


def read_only(memory: Memory) -> bool:
    """Whether ``memory`` was opened ``read_only=True`` (its storage says so; an in-process
    memory never is): it reads, and refuses every write."""
    return bool(getattr(memory.storage, "read_only", False))


def save_memory(memory: Memory, path: str | os.PathLike | None, opened_from: str | os.PathLike | None) -> None:
    """Write a snapshot of ``memory`` to ``path``, or to the file the adapter was opened from:
    :meth:`Memory.to_json` for a ``.json`` name, else :meth:`Memory.save` (one SQLite file).
    A durable memory (:meth:`Memory.open`) has committed every call already: without a
    ``path`` (or with its own file) nothing is written."""
    durable = memory.storage is not None
    if durable and (path is None or os.fspath(path) == getattr(memory.storage, "path", None)):
        return
    path = path or opened_from
    if path is None:
        raise ValueError("no path: pass one, or open the store with memory=<path> (a snapshot file), or "
                         "memory=Memory.open(<path>) (a durable store: nothing to save)")
    folder = os.path.dirname(os.fspath(path))
    if folder:
        os.makedirs(folder, exist_ok=True)
    if is_json_path(path):
        memory.to_json(path)
    else:
        memory.save(path)


def durable_copy(memory: Memory, target: str | os.PathLike) -> Memory:
    """A durable store (:meth:`Memory.open`) at ``target``, new or empty, holding ``memory``'s
    memories: ids, texts, parents, metadata, times and embeddings (nothing is re-embedded)
    with its settings, embedder and decay.  How a snapshot becomes a store that
    ``hypermem mcp --store`` serves: ``durable_copy(Memory.load("snapshot.db"), "agent.db")``.
    Access counts and last access times are kept.  Returns the open durable memory."""
    from ..store.persistence import CONFIG_KEYS

    kwargs: dict[str, Any] = {k: getattr(memory, k) for k in CONFIG_KEYS}
    kwargs["curvature"] = float(memory.curvature)
    if memory.recency_weight is not None:
        kwargs.pop("time_coef")
        kwargs["recency_weight"] = memory.recency_weight
    dst = Memory.open(target, embedder=memory.embedder, decay=memory.decay, clock=memory.clock,
                      dtype=memory.dtype, hybrid=memory.hybrid, lexical=memory.searcher.lexical, **kwargs)
    try:
        if len(dst):
            raise ValueError(f"{redact(os.fspath(target))!r} already holds {len(dst)} memories: copy into a new "
                             f"file (or an empty database)")
        items = [{"id": r.id, "text": r.text, "parent": r.parent_id, "meta": dict(r.meta), "t": r.t,
                  "valid_from": r.valid_from, "valid_until": r.valid_until, "embedding": memory.embedding(r.id)}
                 for r in memory]
        if items:
            dst.add_many(parents_first(items))
            dst.record_accesses({r.id: (r.access_count, r.last_accessed) for r in memory if r.access_count})
    except BaseException:
        dst.close()
        raise
    return dst


def query_point(memory: Memory, vector: Any) -> torch.Tensor:
    """The query point of an embedding: its direction at radius ``base_depth``, where
    :meth:`Memory.search` puts a text query (``p = tanh(sqrt(c) r / 2) u / sqrt(c)``)."""
    v = torch.as_tensor(vector, dtype=torch.float64).detach().cpu()
    if v.shape != (memory.dim,):
        raise ValueError(f"the query embedding must have shape ({memory.dim},), got {tuple(v.shape)}")
    if not bool(torch.isfinite(v).all()) or not bool(v.abs().sum() > 0):
        raise ValueError("the query embedding must be finite and not all zeros")
    return P.point_at(v, memory.base_depth, memory.curvature)


SEARCH_KEYS = frozenset(inspect.signature(Memory.search).parameters) - {"self", "query", "k", "filters"}
"""The :meth:`Memory.search` arguments an adapter passes through (``mode``, ``root``, ``at_time``, ...)."""


def check_search_keys(kwargs: Mapping[str, Any], where: str, extra: Sequence[str] = ()) -> None:
    unknown = set(kwargs) - SEARCH_KEYS - set(extra)
    if unknown:
        raise TypeError(f"{where} got unexpected arguments {sorted(unknown)}; allowed: "
                        f"{', '.join(sorted(SEARCH_KEYS | set(extra)))}")


def search(memory: Memory, query: Any, k: int, filters: Any = None, *, vector: bool = False,
           **kwargs: Any) -> list[SearchResult]:
    """:meth:`Memory.search` for a text or (``vector=True``) an embedding query, with a
    record predicate or a :func:`store_filter` as ``filters``; ``kwargs`` are ``mode``, ``root``, ``at_time`` (any
    :func:`to_time` form), ``metric`` and the other search arguments."""
    if "at_time" in kwargs:
        kwargs["at_time"] = to_time(kwargs["at_time"], "at_time")
    if vector and kwargs.get("hybrid"):  # the store adds its lexical term to a text query only
        raise ValueError(f"hybrid={kwargs['hybrid']!r} needs a text query (the lexical term scores the query's "
                         f"words); this search has an embedding: pass the query text (similarity_search, "
                         f"query_str), or leave hybrid out")
    if vector and encoder_vector(memory, kwargs):
        query = torch.as_tensor(query, dtype=torch.float64).detach().cpu()
    elif vector:
        query = query_point(memory, query)
        kwargs.setdefault("query_depth", memory.base_depth)
    return memory.search(query, k=k, filters=filters, **kwargs)


def hybrid_weight(memory: Memory, kwargs: Mapping[str, Any]) -> float:
    """The weight of the lexical term a text search with ``kwargs`` gets: their ``hybrid``,
    else the store's (:attr:`Memory.hybrid`: 0.3 with a real embedder, 0 with the hashing one)."""
    h = kwargs.get("hybrid")
    return float(memory.hybrid if h is None else h)


def embeds_as(memory: Memory, text: str, vector: Any, kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether the store's own embedder gives ``vector`` for ``text`` (one embedder call): then
    searching for ``text`` ranks by the same vector, plus the store's lexical term.  Compared
    by direction (a query point's direction is all the store uses), or whole where the vector
    goes to the store as it is (:func:`encoder_vector`)."""
    return same_vector(memory, embed_checked(memory.embedder, [text])[0], vector, kwargs)


def same_vector(memory: Memory, mine: Any, vector: Any, kwargs: Mapping[str, Any] | None = None) -> bool:
    """Whether ``vector`` is the store embedder's ``mine`` as a query of ``kwargs`` uses it: by
    direction, or whole where the vector goes to the store as it is (:func:`encoder_vector`)."""
    mine = torch.as_tensor(mine, dtype=torch.float64).detach().cpu()
    v = torch.as_tensor(vector, dtype=torch.float64).detach().cpu()
    if v.shape != mine.shape:
        return False
    if encoder_vector(memory, kwargs or {}):
        return bool(torch.allclose(v, mine, rtol=1e-4, atol=1e-6))
    den = float(v.norm() * mine.norm())
    return den > 0 and float(v @ mine) / den >= 1.0 - 1e-5


def encoder_vector(memory: Memory, kwargs: Mapping[str, Any]) -> bool:
    """Whether an embedding query goes to the store as it is: the encoder's point in a ball
    encoder's store, the encoder's vector for ``mode="ancestors"`` without ``root``
    (:mod:`hypermem.store.suggest`)."""
    if places_points(memory.embedder):
        return True
    return kwargs.get("mode") == "ancestors" and kwargs.get("root") is None and is_hierarchy_encoder(memory.embedder)


def relevance(score: float) -> float:
    """``min(1, exp(score))`` in ``[0, 1]``: with ``score = -d + time_coef * log(w)`` (no depth
    bias) it is ``exp(-d) * w ** time_coef``, 1 for an exact match at full weight."""
    return min(1.0, math.exp(score)) if score < 700 else 1.0


def mmr(memory: Memory, results: list[SearchResult], k: int, lambda_mult: float = 0.5) -> list[SearchResult]:
    """Maximal marginal relevance (Carbonell & Goldstein, SIGIR 1998) in hyperbolic units:
    pick ``argmax lambda * score(c) + (1 - lambda) * min_s d(c, s)`` over the picked ``s``,
    where ``score`` is the search score and ``d`` the shell distance at ``base_depth``
    (the distance the scores use), so both terms are in the same units."""
    if not 0.0 <= lambda_mult <= 1.0:
        raise ValueError(f"lambda_mult must be in [0, 1], got {lambda_mult!r}")
    if len(results) <= 1 or k <= 1:
        return results[:k]
    results, pts = _with_points(memory, results)
    if len(results) <= 1:
        return results[:k]
    D = P.shell_distance(pts[:, None, :], pts[None, :, :], memory.base_depth, memory.curvature)
    score = torch.tensor([r.score for r in results], dtype=torch.float64)
    picked = [int(torch.argmax(score))]
    nearest = D[picked[0]].clone()
    while len(picked) < min(k, len(results)):
        gain = lambda_mult * score + (1.0 - lambda_mult) * nearest
        gain[picked] = -math.inf
        j = int(torch.argmax(gain))
        picked.append(j)
        nearest = torch.minimum(nearest, D[j])
    return [results[j] for j in picked]


def _with_points(memory: Memory, results: list[SearchResult]) -> tuple[list[SearchResult], torch.Tensor]:
    """The results whose memory is still stored (another thread or process may have removed one
    since the search) and their points ``(m, dim)``, float64 on the CPU."""
    kept, pts = [], []
    for r in results:
        try:
            pts.append(memory.point(r.id).to("cpu", torch.float64))
        except KeyError:
            continue
        kept.append(r)
    return kept, torch.stack(pts) if pts else torch.empty(0, memory.dim, dtype=torch.float64)
