"""``Memory.open``: pick the storage for a target, create it or read it back."""

from __future__ import annotations

import os
import re
from typing import Any

from ..checks import check_sqlite_name, sqlite_tables
from ..embedder_dim import check_passed_embedder
from ..encoder_points import check_encoder, places_points
from ..lexical import Lexical
from ..persistence import CONFIG_KEYS, memory_config
from ..search_settings import apply_search_settings, restore_lexical
from ..validation import check_config_types, decay_from_spec, embedder_from_spec
from .durable import StorageError, durable_class
from .pg_errors import redact
from .server import ServerMemory
from .stored_decay import check_stored_decay

_STORAGE_KEYS = ("vector_dtype", "synchronous")
_URL_PREFIXES = ("postgresql://", "postgres://")
_DRIVER = re.compile(r"postgres(?:ql)?\+(\w+)://", re.I)  # a SQLAlchemy URL: postgresql+psycopg://
_DSN = re.compile(r"(?:\s*\w+\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']+))+\s*")  # libpq's key=value form
_DSN_KEYS = re.compile(r"(?:^|\s)(?:host|hostaddr|port|dbname|user|password|service)\s*=")


def is_dsn(target: Any) -> bool:
    """Whether ``target`` is a libpq connection string (``"host=... dbname=... user=..."``)."""
    return isinstance(target, str) and _DSN.fullmatch(target) is not None and _DSN_KEYS.search(target) is not None


def is_url(target: Any) -> bool:
    """Whether ``target`` names a PostgreSQL database: a ``postgresql://`` / ``postgres://`` URL
    (``postgresql+psycopg://`` too) or a libpq ``key=value`` string."""
    return isinstance(target, str) and (target.startswith(_URL_PREFIXES) or _DRIVER.match(target) is not None
                                        or is_dsn(target))


def _libpq_url(url: str) -> str:
    """A URL or string libpq reads: a SQLAlchemy ``postgresql+psycopg://`` URL without its driver."""
    m = _DRIVER.match(url)
    if m is None:
        return url
    if m.group(1).lower() not in ("psycopg", "psycopg2"):
        raise ValueError(f"cannot open {redact(url)!r}: hypermem connects with psycopg; give a postgresql:// URL")
    return "postgresql://" + url[m.end():]


def is_durable_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an SQLite file written by ``Memory.open`` (not by ``Memory.save``)."""
    tables = sqlite_tables(path)
    return tables is not None and "hm_config" in tables


def is_snapshot_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an SQLite file written by ``Memory.save`` (a snapshot, not a durable store)."""
    tables = sqlite_tables(path)
    return tables is not None and "records" in tables and "hm_config" not in tables


def make_storage(target: Any, read_only: bool, options: dict[str, Any]):
    if is_url(target):
        from .postgres import PostgresStorage

        if "synchronous" in options:
            raise ValueError("synchronous= is a SQLite option; a PostgreSQL server sets its own durability")
        return PostgresStorage(_libpq_url(target), read_only=read_only, **options)
    if isinstance(target, str) and "://" in target:
        raise ValueError(f"cannot open {redact(target)!r}: a target is a file path (SQLite) or a postgresql:// URL")
    if not isinstance(target, (str, os.PathLike)):
        raise TypeError(f"Memory.open takes a file path or a postgresql:// URL, got {type(target).__name__}")
    _check_not_json(target)
    check_sqlite_name(target, "Memory.open()")
    from .sqlite import SqliteStorage

    return SqliteStorage(target, read_only=read_only, **options)


def stored_config(target: Any) -> dict[str, Any] | None:
    """The stored settings of the durable store at ``target`` (a SQLite path or a PostgreSQL URL:
    its embedder's spec, its encoder record...), read without its rows; ``None`` where no store
    is yet (no file, an empty database, a database without pgvector), which a first open creates."""
    try:
        storage = make_storage(target, True, {})
    except FileNotFoundError:   # a missing file; a database without pgvector (pg_session.NoStore)
        return None
    try:
        return storage.config()
    except BaseException as exc:
        if isinstance(exc, storage.db_errors):
            raise storage.error(exc) from exc
        raise
    finally:
        storage.close()


def _check_not_json(target: str | os.PathLike) -> None:
    """A ``.json`` target is a ``ValueError``: an existing one is read by ``Memory.from_json``."""
    name = os.fspath(target)
    if os.path.splitext(name)[1].lower() != ".json":
        return  # .jsonl (items, not a memory), .csv, .html: check_sqlite_name
    if os.path.isfile(name):
        raise ValueError(f"Memory.open() opens durable storage (a SQLite file or a postgresql:// URL), but {name!r} "
                         f"is a JSON file: read a memory written by to_json with Memory.from_json(path); for a "
                         f"durable store, give Memory.open a .db name")
    raise ValueError(f"Memory.open() writes a SQLite file, but {name!r} names a JSON file: give a .db name for a "
                     f"durable store (memory JSON is written by memory.to_json(path), read by Memory.from_json(path))")


def _stored_config(memory) -> dict[str, Any]:
    cfg = memory_config(memory)
    cfg.pop("count", None)
    return cfg


def open_memory(cls: type, target: Any, read_only: bool = False, mirror: bool = True, **kwargs: Any):
    """See :meth:`hypermem.store.Memory.open`."""
    if not mirror and not is_url(target):
        raise ValueError(f"mirror=False needs a postgresql:// URL (the server searches and places the rows), got "
                         f"{redact(target)!r}; a SQLite file is opened with its in-process mirror: Memory.open(path)")
    if not mirror and places_points(kwargs.get("embedder")):
        raise ValueError("a store placed by a ball hierarchy encoder searches with the hyperbolic metric in process: "
                         "open it with its mirror, Memory.open(url)")
    options = {k: kwargs.pop(k) for k in _STORAGE_KEYS if k in kwargs}
    lexical = kwargs.pop("lexical", None)  # a Lexical: recorded in a new store, checked against a stored one
    if lexical is not None and not isinstance(lexical, Lexical):
        raise TypeError(f"lexical must be a hypermem.store.lexical.Lexical, got {type(lexical).__name__}")
    if kwargs.get("time_coef") is not None and kwargs.get("recency_weight") is not None:
        raise ValueError("pass time_coef (the seed's coefficient) or recency_weight (calibrated), not both")
    asked = kwargs.get("time_coef")
    storage = make_storage(target, read_only, options)
    try:
        config = storage.config()
        if config is None:
            if read_only:
                raise FileNotFoundError(f"{redact(target)!r} holds no memory yet; open it once without read_only")
            mem = (durable_class(cls) if mirror else cls)(**kwargs)
            restore_lexical(mem, {}, repr(redact(target)), lexical)
            if not storage.create(_stored_config(mem)):  # another process created it first: open its store
                config = storage.config()
        if config is not None:
            _check_vector_dtype(config, options, repr(redact(target)))
            mem = (durable_class(cls) if mirror else cls)(**_settings(config, kwargs, repr(redact(target))))
            restore_lexical(mem, config, repr(redact(target)), lexical, warn=mirror)  # store.lexical_settings
            if mirror:
                mem._bind(storage, read_only)
            if asked is not None and mem.recency_weight is not None:
                raise _calibrated_refusal(mem, asked, repr(redact(target)))
        if not mirror:
            if not read_only:
                storage.ensure_client_indexes()
            return ServerMemory(storage, mem, read_only)
        if config is None:
            mem._bind(storage, read_only)
    except BaseException as exc:
        storage.close()
        if isinstance(exc, storage.db_errors):
            raise storage.error(exc) from exc
        raise
    return mem


def _check_vector_dtype(config: dict[str, Any], options: dict[str, Any], where: str) -> None:
    """Refuse ``vector_dtype=`` other than the one the store's embeddings were written with."""
    was = config.get("vector_dtype", "float64")
    if options.get("vector_dtype") is not None and options["vector_dtype"] != was:
        raise ValueError(f"{where} was created with vector_dtype={was!r}; cannot open it with "
                         f"vector_dtype={options['vector_dtype']!r}: a store keeps the dtype of its stored "
                         f"embeddings (copy it into a new store to change it)")


def _calibrated_refusal(mem, asked: Any, where: str) -> ValueError:
    """The refusal of ``time_coef=`` for a store whose time term is calibrated by ``recency_weight``
    (:mod:`hypermem.store.search_settings`): it names the coefficient the store ranks with now."""
    return ValueError(f"{where} was created with recency_weight={mem.recency_weight!r}: its time term is calibrated, "
                      f"time_coef = recency_weight * spread / ln 2 = {mem.time_coef:.6g} now (it follows the "
                      f"store's distance spread), not a stored time_coef; cannot open it with time_coef={asked!r}: "
                      f"pass recency_weight= to weigh recency for this object, or set mem.time_coef = {asked!r} "
                      f"after opening for a fixed coefficient (neither is stored)")


def _settings(config: dict[str, Any], kwargs: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``Memory`` keyword arguments of a stored memory (the stored settings win)."""
    check_passed_embedder(kwargs.get("embedder"))   # named as Memory(embedder=...) names it, as load does
    check_config_types(config, CONFIG_KEYS, where)
    calibrated = config.get("recency_weight") is not None or kwargs.get("recency_weight") is not None
    for key in CONFIG_KEYS:
        if key == "time_coef" and calibrated:  # the saved value of a calibrated term (search_settings)
            kwargs[key] = config[key]
            continue
        if key in kwargs and kwargs[key] != config[key]:
            raise ValueError(f"{where} was created with {key}={config[key]!r}; cannot open it with "
                             f"{key}={kwargs[key]!r}")
        kwargs[key] = config[key]
    apply_search_settings(config, kwargs)
    check_encoder(config, kwargs.get("embedder"), where)
    kwargs["embedder"] = embedder_from_spec(config.get("embedder"), kwargs.get("embedder"), where)
    check_stored_decay(config.get("decay"), kwargs.get("decay"), where)
    kwargs["decay"] = decay_from_spec(config.get("decay"), kwargs.get("decay"), where)
    import torch

    if "dtype" not in kwargs:
        name = config.get("dtype", "float64")
        if name not in ("float32", "float64"):
            raise StorageError(f"{where}: unknown dtype {name!r} in the stored settings")
        kwargs["dtype"] = getattr(torch, name)
    return kwargs

