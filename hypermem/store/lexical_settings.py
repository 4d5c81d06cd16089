"""What a saved store records of its lexical search: the settings of its :class:`~.lexical.Lexical`.

A snapshot (``save``, ``to_json``) and a durable store (``Memory.open``, recorded when it is
created) keep, beside ``hybrid`` (:mod:`hypermem.store.search_settings`), the config key
``"lexical"``::

    {"tokenizer": "words", "k1": 1.2, "b": 0.75, "family": 1.0, "neighbour": 0.6}

``tokenizer`` is the name of a built-in tokenizer (:data:`hypermem.retrieval.bm25.TOKENIZERS`:
``"tokenize"``, ``"words"``), rebuilt by that name on loading.  A custom callable cannot be
stored: the key then records its qualified name with ``"custom": true``, saving warns once
naming it, and a store reopened without it ranks with the default ``tokenize`` (the other
settings kept) and warns again; ``Memory.open(..., lexical=Lexical(tokenizer=mine))`` passes it
back.  ``Memory.open(..., lexical=...)`` of an existing store follows the other stored settings:
the stored ones win, and a ``Lexical`` with other settings is a ``ValueError`` naming them.
A config without the key (written before it was kept) opens with the default ``Lexical()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..retrieval.bm25 import TOKENIZERS, tokenize
from .caller_warning import warn_caller
from .lexical import Lexical
from .validation import MemoryFileError, short

__all__ = ["LEXICAL_KEY", "lexical_spec", "saved_lexical", "stored_lexical", "tokenizer_name"]

LEXICAL_KEY = "lexical"
"""The config key of the lexical settings."""

_NUMBERS = ("k1", "b", "family", "neighbour")


def tokenizer_name(tokenizer: Any) -> tuple[str, bool]:
    """``(name, custom)``: a built-in tokenizer's :data:`~hypermem.retrieval.bm25.TOKENIZERS`
    name, else the callable's qualified name and ``True``."""
    for name, fn in TOKENIZERS.items():
        if tokenizer is fn:
            return name, False
    qual = getattr(tokenizer, "__qualname__", None) or type(tokenizer).__qualname__
    module = getattr(tokenizer, "__module__", None)
    return (f"{module}.{qual}" if module else qual), True


def lexical_spec(lexical: Lexical) -> dict[str, Any]:
    """The JSON settings of ``lexical`` (module docstring)."""
    name, custom = tokenizer_name(lexical.index.tokenizer)
    spec: dict[str, Any] = {"tokenizer": name, "k1": float(lexical.index.k1), "b": float(lexical.index.b),
                            "family": float(lexical.family), "neighbour": float(lexical.neighbour)}
    if custom:
        spec["custom"] = True
    return spec


def saved_lexical(memory) -> dict[str, Any]:
    """``{"lexical": spec}`` of ``memory`` for its saved config (empty for an object without
    an in-process lexical search); a custom tokenizer warns that it must be passed again."""
    lexical = getattr(getattr(memory, "searcher", None), "lexical", None)
    if not isinstance(lexical, Lexical):
        return {}
    spec = lexical_spec(lexical)
    if spec.get("custom"):
        warn_caller(f"the BM25 tokenizer of mem.searcher.lexical, {spec['tokenizer']}, is a custom callable: the store "
                    f"records only its name and reopens with the default tokenize; pass it again "
                    f"(Memory.open(..., lexical=Lexical(tokenizer=...)), or set mem.searcher.lexical after "
                    f"Memory.load / Memory.from_json)")
    return {LEXICAL_KEY: spec}


def _checked(spec: Any, where: str) -> dict[str, Any]:
    """The stored spec, every key checked (a :class:`MemoryFileError` names the first problem)."""
    if not isinstance(spec, Mapping):
        raise MemoryFileError(f"{where}: the config value of {LEXICAL_KEY!r} must be an object, got {short(spec)}")
    extra = sorted(map(str, set(spec) - {"tokenizer", "custom", *_NUMBERS}))
    missing = [k for k in ("tokenizer", *_NUMBERS) if k not in spec]
    if extra or missing:
        raise MemoryFileError(f"{where}: the lexical settings {'have unknown keys ' + short(extra) if extra else ''}"
                              f"{' and ' if extra and missing else ''}{'lack ' + short(missing) if missing else ''}")
    custom, name = spec.get("custom", False), spec["tokenizer"]
    if custom is not True and custom is not False:
        raise MemoryFileError(f"{where}: the lexical setting 'custom' must be true or false, got {short(custom)}")
    if not isinstance(name, str) or not (custom or name in TOKENIZERS):
        raise MemoryFileError(f"{where}: unknown lexical tokenizer {short(name)}; this hypermem's built-in ones are "
                              f"{', '.join(TOKENIZERS)}")
    out = {"tokenizer": name, **({"custom": True} if custom else {})}
    for key in _NUMBERS:
        v = spec[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise MemoryFileError(f"{where}: the lexical setting {key!r} must be a number, got {short(v)}")
        out[key] = float(v)
    return out


def stored_lexical(config: Mapping[str, Any], where: str, given: Lexical | None = None,
                   warn: bool = True) -> Lexical | None:
    """The :class:`Lexical` a store reopens with: the one its ``config`` records (``given``
    only where it has the same settings, else a ``ValueError``), ``given`` or ``None`` (keep
    the default) where the config records none.  A recorded custom tokenizer that is not
    given falls back to ``tokenize`` with a warning (``warn=False``: none, for a store that
    does not search in process)."""
    if given is not None and not isinstance(given, Lexical):
        raise TypeError(f"lexical must be a hypermem.store.lexical.Lexical, got {type(given).__name__}")
    if config.get(LEXICAL_KEY) is None:
        return given
    spec = _checked(config[LEXICAL_KEY], where)
    if given is not None:
        asked = lexical_spec(given)
        for key in ("tokenizer", *_NUMBERS):
            if asked[key] != spec[key]:
                raise ValueError(f"{where} was created with the lexical {key}={spec[key]!r}; cannot open it with "
                                 f"{key}={asked[key]!r}")
        return given
    tokenizer = TOKENIZERS.get(spec["tokenizer"], tokenize) if not spec.get("custom") else tokenize
    if spec.get("custom") and warn:
        warn_caller(f"{where} was saved with the custom BM25 tokenizer {spec['tokenizer']}, which a file cannot hold: "
                    f"its hybrid search ranks with the default tokenize; pass it again (Memory.open(..., "
                    f"lexical=Lexical(tokenizer=...)), or set mem.searcher.lexical after loading)")
    try:
        return Lexical(family=spec["family"], neighbour=spec["neighbour"], k1=spec["k1"], b=spec["b"],
                       tokenizer=tokenizer)
    except ValueError as exc:
        raise MemoryFileError(f"{where}: invalid lexical settings ({exc})") from None
