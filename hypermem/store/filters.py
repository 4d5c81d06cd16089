r"""One filter language for every search of the store: in process, on PostgreSQL, in the adapters.

A filter is ``None``, a callable on the record (used as it is), or a dict::

    {"kind": "pet"}                                  # equality
    {"kind": ["pet", "wild"]}                        # a list value means $in
    {"n": {"$gte": 2, "$lt": 5}, "tag": {"$exists": True}}
    {"$or": [{"kind": "pet"}, {"$not": {"owner": "bob"}}]}
    {"place": {"room": "kitchen"}}                   # a nested dict matches nested metadata

Operators: ``$eq $ne $in $nin $gt $gte $lt $lte $exists`` (every search, pushed down to
PostgreSQL's JSONB), ``$contains $all $any $empty $text_match $text_match_insensitive``
(checked in Python; the last two on NFC and on NFKC case-folded text: :mod:`hypermem.retrieval.text_fold`),
combinators ``$and $or $not``.  Several keys in one dict must all hold.

**Semantics** are JSON's, so that Python and SQL agree: equality is
:func:`json_equal` (``True`` is not ``1``, ``1`` is ``1.0``, lists and dicts compare
structurally); ``$gt``/... compare two numbers or two strings (by code point) and are false
otherwise (a field that holds a number never passes ``{"$gt": "abc"}``); a missing field matches
only ``$ne``, ``$nin``, ``$exists: False``, ``$empty`` and the negations.  An unknown operator or a malformed filter raises :class:`FilterError`
(a ``ValueError``, also a ``TypeError`` for older callers) naming it, before any search, as
does an operand an operator cannot use: ``$in $nin $all $any`` take a list, ``$exists`` and
``$empty`` a bool, ``$text_match`` and ``$text_match_insensitive`` a str, ``$gt $gte $lt $lte``
a number or a str (``None``, a bool, a list, a dict or a ``datetime`` has no order to compare by;
``$eq``/``$ne`` take ``None`` and bools).

**Times.** In metadata a time is text, so ``$gt``/... compare ISO 8601 strings as text: that is
time order only when every value is written alike in the same offset (UTC,
``YYYY-MM-DDTHH:MM:SS+00:00``); ``...T12:00+02:00`` against ``...T10:00Z`` compares the characters,
not the instants.  The LangChain and LlamaIndex adapters compare the store's own time fields
(``t``, ``valid_from``, ``valid_until``) as instants, in any offset
(:func:`hypermem.integrations._common.instants`).

**SQL.** :func:`to_postgres` translates a filter into a JSONB ``WHERE`` clause that is
*never stricter* than the Python predicate (exact for the pushed-down operators; a clause
it cannot translate becomes ``TRUE``); the server search then checks every row it reads
with :func:`compile_filter`, so the answer is the in-process one.  Numbers go as the stored
metadata's do (:func:`~hypermem.store.json_values.exact_numbers`: a float of ``1e16`` or more as
its exact value), so SQL orders them as Python does.  JSON equality and its hash keys live in
:mod:`hypermem.store.json_values` (re-exported here).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..retrieval.text_fold import canonical, fold
from .json_values import MISSING, exact_numbers, json_equal, json_key, member, membership
from .json_values import is_number as _number
from .validation import MAX_JSON_DEPTH, json_depth_over

__all__ = ["MISSING", "OPERATORS", "RECORD_FIELDS", "FilterError", "RecordFilter", "check_filter", "compile_filter",
           "filter_keys", "is_ops", "json_equal", "json_key", "map_fields", "matches", "to_postgres", "value_test"]


class FilterError(ValueError, TypeError):
    """A malformed filter or an unknown operator (the message names it)."""


def _ordered(op: str) -> Callable[[Any, Any], bool]:
    cmp = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
           "$lte": lambda a, b: a <= b}[op]

    def test(v: Any, x: Any) -> bool:
        if (_number(v) and _number(x)) or (isinstance(v, str) and isinstance(x, str)):
            return bool(cmp(v, x))
        return False
    return test


def _text(case: bool) -> Callable[[Any, Any], bool]:
    def test(v: Any, x: Any) -> bool:
        if not isinstance(v, str) or not isinstance(x, str):
            return False
        return canonical(x) in canonical(v) if case else fold(x) in fold(v)  # NFC; NFKC + casefold
    return test


def _contains(v: Any, x: Any) -> bool:
    if isinstance(v, str):
        return isinstance(x, str) and x in v
    return isinstance(v, (list, tuple)) and member(x, v)


OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda v, x: v is not MISSING and json_equal(v, x),
    "$ne": lambda v, x: v is MISSING or not json_equal(v, x),
    "$gt": _ordered("$gt"), "$gte": _ordered("$gte"), "$lt": _ordered("$lt"), "$lte": _ordered("$lte"),
    "$in": lambda v, x: v is not MISSING and member(v, x),
    "$nin": lambda v, x: v is MISSING or not member(v, x),
    "$exists": lambda v, x: (v is not MISSING) == bool(x),
    "$contains": _contains,
    "$all": lambda v, x: all(_contains(v, i) for i in x),
    "$any": lambda v, x: any(_contains(v, i) for i in x),
    "$empty": lambda v, x: (v is MISSING or v is None or v == "" or v == []) == bool(x),
    "$text_match": _text(True),
    "$text_match_insensitive": _text(False),
}
"""The field operators: ``{"field": {"$op": value}}``."""

COMBINATORS = ("$and", "$or", "$not")
_LIST_OPS = ("$in", "$nin", "$all", "$any")
_CMP_OPS = ("$gt", "$gte", "$lt", "$lte")


def is_ops(want: Any) -> bool:
    """Whether a field's filter value is a dict of operators (``{"$gt": 1}``), not a nested dict."""
    return isinstance(want, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in want)


def map_fields(spec: Mapping, field: Callable[[Any, Any], Mapping]) -> dict:
    """``spec`` with each field ``key: want`` (at the top of any ``$and``/``$or``/``$not``) replaced by
    the filter ``field(key, want)``; the combinators stay, and so does a list item that is no dict (a
    combinator with no list or dict is a field, for :func:`check_filter` to name).  A dict's parts all
    hold: one dict, or their ``$and`` where two share a key."""
    parts: list[Mapping] = []
    for key, want in spec.items():
        if key in ("$and", "$or") and isinstance(want, (list, tuple)):
            parts.append({key: [map_fields(s, field) if isinstance(s, Mapping) else s for s in want]})
        elif key == "$not" and isinstance(want, Mapping):
            parts.append({key: map_fields(want, field)})
        else:
            parts.append(field(key, want))
    out = {k: v for p in parts for k, v in p.items()}
    return out if len(out) == sum(map(len, parts)) else {"$and": [dict(p) for p in parts]}


RECORD_FIELDS = ("parent", "t", "valid_from", "valid_until")
"""The record's own fields a :class:`RecordFilter` can name."""


class RecordFilter(dict):
    """A dict filter (module docstring) some of whose field names are the memory's own fields,
    not its metadata: the framework adapters' filters on ``parent`` and times, answered by the
    in-process search from the store's columns (:mod:`hypermem.store.meta_columns`).

    ``fields`` maps a name the filter uses (at the top of any ``$and``/``$or``/``$not``) to one
    of :data:`RECORD_FIELDS`: ``parent`` (the parent's id, missing for a root) or a time
    (``t``, ``valid_from``, ``valid_until``, missing where the window is open), whose value is its
    ISO 8601 text as ``datetime.isoformat()`` writes it (UTC: ``YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00``,
    so text order is time order).  The row-by-row predicate it equals is :func:`compile_filter`
    of the spec with each such name read from the record.  ``ids``: only these memory ids
    (``None``: any).  Its names are the caller's: a search that keeps nothing warns about none
    of them (:func:`filter_keys`).  The server search (``ServerMemory``) refuses it."""

    def __init__(self, spec: Mapping | None = None, fields: Mapping[str, str] | None = None,
                 ids: Any = None) -> None:
        super().__init__(spec or {})
        self.fields = dict(fields or {})
        bad = sorted(set(self.fields.values()) - set(RECORD_FIELDS))
        if bad:
            raise FilterError(f"RecordFilter fields map to the record's {RECORD_FIELDS}, got {bad}")
        self.ids = None if ids is None else frozenset(ids)

    def __repr__(self) -> str:
        return f"RecordFilter({dict(self)!r}, fields={self.fields!r}, ids={self.ids!r})"


def check_filter(spec: Any, path: str = "") -> None:
    """Raise :class:`FilterError` naming the first malformed part of ``spec``; a filter that
    nests deeper than ``MAX_JSON_DEPTH`` (100) dicts and lists, the bound of every JSON value
    the store takes, is refused before anything recurses into it."""
    if not path and json_depth_over(spec, MAX_JSON_DEPTH):
        raise FilterError(f"filter nests deeper than {MAX_JSON_DEPTH} levels of dicts and lists "
                          f"(hypermem.store.validation.MAX_JSON_DEPTH)")
    _check(spec, path)


_OPERAND = {"$exists": (bool, "a bool (True or False)"), "$empty": (bool, "a bool (True or False)"),
            "$text_match": (str, "a str"), "$text_match_insensitive": (str, "a str")}


def _check_operand(op: str, x: Any, where: str) -> None:
    """A :class:`FilterError` naming ``op`` and ``x`` when ``x`` is not a value ``op`` takes."""
    if op in _LIST_OPS and not isinstance(x, (list, tuple, set, frozenset)):
        raise FilterError(f"filter operator {op} for {where} takes a list, got {type(x).__name__}")
    if op in _OPERAND and not isinstance(x, _OPERAND[op][0]):
        raise FilterError(f"filter operator {op} for {where} takes {_OPERAND[op][1]}, "
                          f"got {type(x).__name__} {x!r:.80}")
    if op in _CMP_OPS and (isinstance(x, bool) or not isinstance(x, (int, float, str))):
        raise FilterError(f"filter operator {op} for {where} compares numbers or strings (times as ISO 8601 "
                          f"text), got {type(x).__name__} {x!r:.80}")


def _check(spec: Any, path: str) -> None:
    if not isinstance(spec, Mapping):
        raise FilterError(f"filter {path + ' ' if path else ''}must be a dict, got {type(spec).__name__}")
    for key, want in spec.items():
        if not isinstance(key, str):
            raise FilterError(f"filter {path or 'top level'}: keys must be strings, got {key!r}")
        where = f"{path}.{key}" if path else key
        if key in ("$and", "$or"):
            if not isinstance(want, (list, tuple)):
                raise FilterError(f"filter {where} takes a list of filters, got {type(want).__name__}")
            for i, sub in enumerate(want):
                _check(sub, f"{where}[{i}]")
        elif key == "$not":
            _check(want, where)
        elif key.startswith("$"):
            raise FilterError(f"unknown filter combinator {key!r} at {path or 'the top'}; use $and, $or, $not "
                              f"(field operators go inside a field: {{'field': {{'$eq': ...}}}})")
        elif is_ops(want):
            for op, x in want.items():
                if op not in OPERATORS:
                    raise FilterError(f"unknown filter operator {op!r} for {where}; "
                                      f"choose one of {sorted(OPERATORS)}")
                _check_operand(op, x, where)
        elif isinstance(want, Mapping):
            _check(want, where)


def matches(v: Any, want: Any) -> bool:
    """``v`` against one filter value: operators, a nested dict (each key matched
    recursively), a list (``$in``) or a plain value (equality)."""
    if is_ops(want):
        return all(OPERATORS[op](v, x) for op, x in want.items())
    if isinstance(want, Mapping):
        return isinstance(v, Mapping) and all(matches(v.get(k, MISSING), w) for k, w in want.items())
    if isinstance(want, (list, tuple, set, frozenset)):
        return v is not MISSING and member(v, want)
    return v is not MISSING and json_equal(v, want)


def value_test(want: Any) -> Callable[[Any], bool]:
    """``lambda v: matches(v, want)``, built once for many values: the lists of ``$in``, ``$nin``
    and a plain list value tested by :func:`json_key` (O(1) a value, the same answer)."""
    if is_ops(want):
        tests: list[Callable[[Any], bool]] = []
        for op, x in want.items():
            if op in ("$in", "$nin"):
                m = membership(x)
                tests.append((lambda v, m=m: v is not MISSING and m(v)) if op == "$in"
                             else (lambda v, m=m: v is MISSING or not m(v)))
            else:
                tests.append(lambda v, f=OPERATORS[op], x=x: f(v, x))
        return lambda v: all(t(v) for t in tests)
    if isinstance(want, Mapping):
        subs = [(k, value_test(w)) for k, w in want.items()]
        return lambda v: isinstance(v, Mapping) and all(t(v.get(k, MISSING)) for k, t in subs)
    if isinstance(want, (list, tuple, set, frozenset)):
        m = membership(want)
        return lambda v: v is not MISSING and m(v)
    return lambda v: matches(v, want)


def _compile(spec: Mapping, lookup: Callable[[Any, str], Any]) -> Callable[[Any], bool]:
    tests: list[Callable[[Any], bool]] = []
    for key, want in spec.items():
        if key == "$and":
            subs = [_compile(s, lookup) for s in want]
            tests.append(lambda r, subs=subs: all(s(r) for s in subs))
        elif key == "$or":
            subs = [_compile(s, lookup) for s in want]
            tests.append(lambda r, subs=subs: any(s(r) for s in subs))
        elif key == "$not":
            sub = _compile(want, lookup)
            tests.append(lambda r, sub=sub: not sub(r))
        else:
            tests.append(lambda r, key=key, want=want: matches(lookup(r, key), want))
    return lambda r: all(t(r) for t in tests)


def meta_lookup(meta: Mapping[str, Any], key: str) -> Any:
    """A field of a metadata dict (``MISSING`` when absent): the store's lookup."""
    return meta.get(key, MISSING)


def compile_filter(spec: Any, lookup: Callable[[Any, str], Any] = meta_lookup) -> Callable[[Any], bool] | None:
    """A predicate from a filter: ``None`` (no filter), a callable (used as is) or a dict
    (module docstring).  ``lookup(obj, field)`` reads a field of what the predicate is
    given (default: a metadata dict).  The spec is checked here, so a bad operator fails
    before any search."""
    if spec is None:
        return None
    if callable(spec) and not isinstance(spec, Mapping):
        return spec
    _plain(spec)
    check_filter(spec)
    return _compile(spec, lookup)


def _plain(spec: Any) -> None:
    if isinstance(spec, RecordFilter):
        raise FilterError("a RecordFilter (parent, times, ids) is answered by the in-process search alone, from the "
                          "store's columns; this path filters metadata: pass a plain dict")


def filter_keys(spec: Any) -> set[str]:
    """The top-level fields a dict filter names (through ``$and``/``$or``/``$not``; iterative,
    so an unchecked filter of any depth is walked without recursion); none for a
    :class:`RecordFilter`, whose names are its caller's."""
    out: set[str] = set()
    if isinstance(spec, RecordFilter):
        return out
    stack = [spec]
    while stack:
        spec = stack.pop()
        if not isinstance(spec, Mapping):
            continue
        for key, want in spec.items():
            if key in ("$and", "$or"):
                stack.extend(want if isinstance(want, (list, tuple)) else ())
            elif key == "$not":
                stack.append(want)
            elif isinstance(key, str) and not key.startswith("$"):
                out.add(key)
    return out


# ---------------------------------------------------------------------------- PostgreSQL
_SQL_CMP = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _pg_json(x: Any) -> str:
    """An operand as jsonb text, its numbers written as the stored metadata's are
    (:func:`~hypermem.store.json_values.exact_numbers`), so SQL orders them as Python does."""
    return exact_numbers(json.dumps(x))


def _pg_field(path: list[str], op: str, x: Any, params: list) -> str | None:
    """The JSONB clause of one operator on the field at ``path`` (``None``: not pushed
    down); appends its parameters to ``params`` in placeholder order."""
    def v() -> str:
        params.append(list(path))
        return "(meta #> %s::text[])"

    if op == "$exists":
        return f"({v()} IS NOT NULL)" if x else f"({v()} IS NULL)"
    if op in ("$eq", "$ne"):
        clause = f"({v()} = %s::jsonb)" if op == "$eq" else f"({v()} IS NULL OR {v()} <> %s::jsonb)"
        params.append(_pg_json(x))
        return clause
    if op in ("$in", "$nin"):
        absent = "" if op == "$in" else f"{v()} IS NULL OR NOT "
        clause = f"({absent}{v()} IN (SELECT value FROM jsonb_array_elements(%s::jsonb)))"
        params.append(_pg_json(list(x)))
        return clause
    if op in _SQL_CMP:
        if _number(x):
            clause = f"(jsonb_typeof({v()}) = 'number' AND {v()} {_SQL_CMP[op]} %s::jsonb)"
            params.append(_pg_json(x))
            return clause
        if isinstance(x, str):
            clause = f"(jsonb_typeof({v()}) = 'string' AND ({v()} #>> '{{}}') COLLATE \"C\" {_SQL_CMP[op]} %s)"
            params.append(x)
            return clause
        return "FALSE"
    return None


def _pg_and(parts: list[str | None]) -> str | None:
    known = [p for p in parts if p is not None]
    if not known:
        return None
    return known[0] if len(known) == 1 else "(" + " AND ".join(known) + ")"


def _pg_value(path: list[str], want: Any, params: list) -> tuple[str | None, bool]:
    """``(clause or None, exact)`` of one field's filter value."""
    if is_ops(want):
        parts = [_pg_field(path, op, x, params) for op, x in want.items()]
        return _pg_and(parts), all(p is not None for p in parts)
    if isinstance(want, Mapping):
        # a nested dict needs an object there (an empty one matches any dict)
        obj = "(jsonb_typeof(meta #> %s::text[]) = 'object')"
        params.append(list(path))
        subs = [_pg_value([*path, k], w, params) for k, w in want.items()]
        return _pg_and([obj, *(s for s, _ in subs)]), all(ex for _, ex in subs)
    if isinstance(want, (list, tuple, set, frozenset)):
        return _pg_field(path, "$in", list(want), params), True
    return _pg_field(path, "$eq", want, params), True


def _pg(spec: Mapping, params: list) -> tuple[str | None, bool]:
    """``(clause or None, exact)``: ``None`` means TRUE; ``exact`` whether the clause is
    the predicate itself (needed under ``$not``, where a looser clause would be stricter)."""
    parts: list[str | None] = []
    exact = True
    for key, want in spec.items():
        mark = len(params)
        if key in ("$and", "$or"):
            subs = [_pg(s, params) for s in want]
            exact &= all(ex for _, ex in subs)
            clauses = [c for c, _ in subs]
            if key == "$and":
                parts.append(_pg_and(clauses))
            elif not clauses:
                parts.append("FALSE")  # an empty $or holds for nothing
            elif all(c is not None for c in clauses):
                parts.append("(" + " OR ".join(clauses) + ")")
            else:  # one branch is TRUE: so is the $or
                del params[mark:]
                parts.append(None)
        elif key == "$not":
            sub, ex = _pg(want, params)
            if ex and sub is not None:
                parts.append(f"(NOT COALESCE({sub}, FALSE))")
            elif ex:  # NOT TRUE
                parts.append("FALSE")
            else:
                del params[mark:]
                parts.append(None)
                exact = False
        else:
            clause, ex = _pg_value([key], want, params)
            exact &= ex
            parts.append(clause)
    return _pg_and(parts), exact


def to_postgres(spec: Any, column: str = "meta") -> tuple[str | None, list]:
    """``(clause, params)``: a ``WHERE`` clause on the JSONB column ``meta`` never
    stricter than :func:`compile_filter`'s predicate (``None`` when nothing can be pushed
    down).  ``spec`` must be a dict filter (checked)."""
    if column != "meta":
        raise ValueError("to_postgres filters the 'meta' column")
    _plain(spec)
    check_filter(spec)
    params: list = []
    clause, _ = _pg(spec, params)
    if clause is None:
        return None, []
    return clause, params
