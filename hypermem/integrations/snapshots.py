"""A snapshot file made into a durable store, with no framework or MCP SDK needed (what
``hypermem import SOURCE NEW.db --durable`` and :func:`hypermem.integrations.mcp_server.convert_snapshot`
run).

A snapshot (:meth:`Memory.save`'s SQLite file, :meth:`Memory.to_json`'s JSON) is written whole
when saved; a durable store (:meth:`Memory.open`) commits every call, and is what
``hypermem mcp --store`` serves.  The copy keeps ids, texts, parents, metadata, times,
validity windows, embeddings (nothing is re-embedded), access counts and last access times, the
settings, embedder and decay.
"""

from __future__ import annotations

from typing import Any

from ..store import Memory
from . import _common as C
from ._common import durable_copy  # a new durable store holding a memory's memories

__all__ = ["convert_snapshot", "durable_copy"]


def convert_snapshot(snapshot: str, target: str, embedder: Any = None) -> Memory:
    """A durable store at ``target`` (new) holding the memories of the snapshot file ``snapshot``
    (written by :meth:`Memory.save` or, ``.json``, :meth:`Memory.to_json`), embeddings and all;
    ``embedder`` for a snapshot saved with a custom embedder.  Returns the open durable memory."""
    load = Memory.from_json if C.is_json_path(snapshot) else Memory.load
    return C.durable_copy(load(snapshot, embedder=embedder), target)
