"""What ``hypermem mcp`` checks about its store before it serves it: that an explicit
``--embedder`` is the one the store was made with, and that a PostgreSQL role may write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..embed.spec import MINILM, embedder_spec, searches_with_minilm
from ..store.backends.storage_errors import StorageError

_NAMED = {"hashing": "the hashing embedder (dim 256)",
          "minilm": f"{MINILM} (dim 384)"}


def describe(spec: Any) -> str:
    """An embedder spec in words: ``the hashing embedder (dim 256)``, ``all-MiniLM-L6-v2 (dim 384)``."""
    if not isinstance(spec, Mapping):
        return "an embedder it does not record"
    if spec.get("type") == "hashing":
        return f"the hashing embedder (dim {spec.get('dim')})"
    if searches_with_minilm(dict(spec)):
        return f"{MINILM} (dim {spec.get('dim')})"
    return f"the embedder {spec.get('type')!r} (dim {spec.get('dim')})"


def check_embedder(spec: Any, where: str, name: str | None = None, embedder: Any = None) -> None:
    """A ``ValueError`` naming both when the embedder asked for is not the one the store was
    made with (``spec``, its stored spec): ``name`` (``--embedder minilm|hashing|PATH``) another
    kind, or ``embedder`` (loaded, or passed to :func:`open_store`) another dimension.  Its
    memories (if it holds any yet) were embedded with the store's own, and the store's settings
    (dimension, embedding space) were fixed by it, so the other one cannot be used on it."""
    if not isinstance(spec, Mapping):
        return   # Memory.open names a missing or malformed spec itself
    key = name.lower() if isinstance(name, str) else None
    if key == "hashing":
        same = spec.get("type") == "hashing"
    elif key == "minilm":
        same = searches_with_minilm(dict(spec))
    elif embedder is not None:
        mine = embedder_spec(embedder)
        same = mine.get("dim") == spec.get("dim") and (name is None or mine.get("type") == spec.get("type"))
    else:
        return
    if same:
        return
    asked = _NAMED.get(key) or describe(embedder_spec(embedder))
    flag = f"--embedder {name}" if name is not None else "the embedder passed"
    raise ValueError(f"{where} was made with {describe(spec)}, but {flag} is {asked}: a store keeps the "
                     f"embedder it was made with (its settings and any memories it holds are in that one's "
                     f"space). Omit --embedder to serve it with its own, or serve a new store (--store NEW) "
                     f"with {flag.replace('the embedder passed', 'that embedder')}")


_PRIVILEGES = {"hypermem_memories": ("INSERT", "UPDATE", "DELETE"), "hypermem_state": ("INSERT", "UPDATE"),
               "hypermem_removed": ("INSERT", "DELETE")}
"""What a write of the PostgreSQL store needs, per table (:mod:`hypermem.store.backends.postgres`:
upserts and removals of memories, the version stamp, the removal log and its pruning)."""

_MISSING = ("SELECT string_agg(p, ', ' ORDER BY n) || ' on ' || t FROM (VALUES " + ", ".join(
    f"('{t}', '{p}', {n})" for n, (t, p) in enumerate((t, p) for t, ps in _PRIVILEGES.items() for p in ps))
    + ") AS v(t, p, n) WHERE to_regclass(t) IS NOT NULL AND NOT has_table_privilege(to_regclass(t), p) "
    "GROUP BY t ORDER BY min(n)")
_READ_ONLY = "SELECT current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery()"


def check_writable(memory: Any, where: str) -> None:
    """A :class:`StorageError` when ``memory``'s PostgreSQL role may not write its store (a role
    granted SELECT alone: the server would start, then refuse every write and lose every access
    count), or the server only reads (a standby, ``default_transaction_read_only``), with what
    to do for ``hypermem mcp``, which writes to its store.  A SQLite store is checked by its open."""
    storage = getattr(memory, "storage", None)
    if storage is None or not hasattr(storage, "url"):   # in process, or SQLite
        return
    con = storage.con
    try:
        missing = [r[0] for r in con.execute(_MISSING).fetchall()]
        read_only = bool(con.execute(_READ_ONLY).fetchone()[0])
    finally:
        con.rollback()
    tables = ", ".join(_PRIVILEGES)
    if missing:
        raise StorageError(f"the PostgreSQL role of {where} may only read the store (it lacks "
                           f"{'; '.join(missing)}), and hypermem mcp writes to its store (every remember, "
                           f"update, forget, and the access counts of recall; it has no read-only mode): "
                           f"grant the role INSERT, UPDATE and DELETE on its tables (GRANT INSERT, UPDATE, "
                           f"DELETE ON {tables} TO <role>), or serve it as a role that may write (e.g. the "
                           f"tables' owner)")
    if read_only:
        raise StorageError(f"the PostgreSQL server of {where} takes no writes (a standby in recovery, or "
                           f"default_transaction_read_only is on for this role or database), and hypermem mcp "
                           f"writes to its store (it has no read-only mode): serve the primary, or a role and "
                           f"database where transactions may write")
