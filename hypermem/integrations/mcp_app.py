"""The plumbing of :mod:`hypermem.integrations.mcp_server`: the MCP server class that checks
arguments and turns every failure into a one-line tool error, the store call guard (catching up
with other processes, a short write wait, the store's warnings returned), result formatting,
and the process's signals and port check.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import unicodedata
import warnings
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import ValidationError

from ..store import AddManyHint
from . import _common as C

log = logging.getLogger("hypermem.mcp")

WRITE_WAIT = 3.0
"""Seconds a write waits for another process's write lock before the tool answers "store busy"."""

MAX_TEXT = 32_000
"""Default longest text (characters) ``remember`` / ``update`` accept (``hypermem mcp --max-text``)."""

MAX_META = 32_000
"""Default longest ``meta`` (characters of its JSON text) ``remember`` / ``update`` accept: every
``recall`` returns it whole."""

RESULT_CHARS = 2_000
"""Default longest text (characters) a result shows; a longer one is cut and marked ``truncated``."""


def tool_error(message: str) -> ToolError:
    return ToolError(message)


class HypermemServer(MCPServer):
    """:class:`MCPServer` that refuses arguments a tool does not take, words argument validation
    errors briefly, and makes any unexpected failure a one-line tool error (logged once, one line)."""

    scrub: Callable[[str], str] = staticmethod(lambda text: text)

    async def list_tools(self) -> list[Any]:
        """The tools, each schema closed (``additionalProperties: false``): it says what
        :meth:`call_tool` enforces."""
        return [t.model_copy(update={"input_schema": {**t.input_schema, "additionalProperties": False}})
                for t in await super().list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = next((t for t in await self.list_tools() if t.name == name), None)
        if tool is not None:
            allowed = list(tool.input_schema.get("properties", {}))
            extra = sorted(set(arguments) - set(allowed))
            if extra:
                # raised before the SDK's call, which prefixes the other tool errors: the same prefix here
                raise tool_error(f"Error executing tool {name}: {name} takes no argument "
                                 f"{', '.join(map(repr, extra))}; its arguments are {', '.join(allowed)}")
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            cause = exc.__cause__ or exc
            line = self.scrub(f"{type(cause).__name__}: {cause}".splitlines()[0][:300])
            if os.environ.get("HYPERMEM_DEBUG"):
                log.exception("hypermem mcp: %s failed", name)
            else:
                log.error("hypermem mcp: %s failed: %s", name, line)
            raise tool_error(f"{name} failed unexpectedly ({line})") from None
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise tool_error(validation_text(name, exc.__cause__)) from exc.__cause__
            raise


def validation_text(name: str, exc: ValidationError) -> str:
    """Pydantic's errors as one line per argument, without its documentation links."""
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return f"invalid arguments for {name}: " + "; ".join(parts)


def to_time(value: str | None, name: str) -> datetime | None:
    """An ISO 8601 argument as a UTC datetime; a tool error naming ``name`` when it is not one."""
    try:
        return C.to_time(value, name)
    except OverflowError:
        raise tool_error(f"{name} is out of range: {value!r} (in UTC it falls outside years 1..9999)") from None
    except (TypeError, ValueError) as exc:
        raise tool_error(str(exc)) from None


_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp", "Cn", "Co", "Cs", "Mn", "Me"}


_STORE_HINT = "store a summary, or split it into several memories under one parent"


def check_text(text: str, name: str, max_text: int, hint: str = _STORE_HINT) -> None:
    """A tool error unless ``text`` has a visible character and at most ``max_text`` characters;
    ``hint`` says what to do with a longer one (default: how to store it)."""
    if not any(unicodedata.category(c) not in _INVISIBLE for c in text):
        raise tool_error(f"{name} must not be blank (it has no visible character)")
    if len(text) > max_text:
        raise tool_error(f"{name} is {len(text)} characters long; this server takes at most {max_text} ({hint})")


def check_meta(meta: dict[str, Any] | None, max_meta: int) -> None:
    """A tool error when ``meta``'s JSON text is longer than ``max_meta`` characters (what the store
    cannot write as JSON at all it refuses itself, with its own message)."""
    if meta is None:
        return
    try:
        size = len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")))
    except (TypeError, ValueError, RecursionError):
        return
    if size > max_meta:
        raise tool_error(f"meta is {size} characters as JSON; this server takes at most {max_meta} (every recall "
                         f"returns it whole: keep short fields in meta, the content in the text)")


def short_auto(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with the placement details of ``parent="auto"`` cut to its decision (and, for a text
    the store's floor left a root, its nearest cosine and the floor: store.nearest_floor)."""
    auto = meta.get("auto_parent")
    if isinstance(auto, dict):
        meta = dict(meta, auto_parent={k: auto[k] for k in ("parent", "score", "by", "nearest", "floor") if k in auto})
    return meta


def hit(r: Any, max_chars: int = RESULT_CHARS) -> dict[str, Any]:
    rec = r.record if hasattr(r, "record") else r
    text = rec.text
    out = {"id": rec.id, "text": text[:max_chars], "parent": rec.parent_id, "t": C.iso(rec.t),
           "meta": short_auto(dict(rec.meta))}
    if len(text) > max_chars:
        out["truncated"] = len(text)
    if rec.valid_until is not None:
        out["valid_until"] = C.iso(rec.valid_until)
    if hasattr(r, "score"):
        out["score"] = round(float(r.score), 6)
    return out


@contextlib.contextmanager
def short_write_wait(memory: Any, seconds: float) -> Iterator[None]:
    """Make a write wait at most ``seconds`` for another process's write lock, then fail as busy
    (:func:`is_busy`), so that a tool call answers "retry" instead of hanging behind a long write:
    SQLite's ``busy_timeout``; PostgreSQL's ``lock_timeout`` of the write transaction
    (``PostgresStorage.lock_wait``), which no statement outside the write changes."""
    storage = memory.storage
    if hasattr(storage, "lock_wait") and not storage.read_only:  # PostgreSQL: SET LOCAL in the write's transaction
        before, storage.lock_wait = storage.lock_wait, seconds
        try:
            yield
        finally:
            storage.lock_wait = before
        return
    con = getattr(storage, "con", None)
    if con is None or getattr(storage, "read_only", False):
        yield
        return
    before = con.execute("PRAGMA busy_timeout").fetchone()[0]
    con.execute(f"PRAGMA busy_timeout = {int(seconds * 1000)}")
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            con.execute(f"PRAGMA busy_timeout = {int(before)}")


def is_busy(exc: BaseException) -> bool:
    cause = exc.__cause__ or exc.__context__
    return ((getattr(cause, "sqlite_errorcode", 0) & 0xFF) in (5, 6) or "write lock" in str(exc)
            or getattr(cause, "sqlstate", None) == "55P03")  # PostgreSQL: lock_not_available (lock_timeout)


class Guard:
    """Runs one store call for a tool: under the server's lock, after catching up with what other
    processes committed, writes with a short lock wait, store mistakes as tool errors, and the
    store's explanatory warnings collected for the result.  The :class:`~hypermem.store.AddManyHint`
    (use ``add_many``) is dropped: an MCP client remembers one memory a call, and the operator
    cannot change that either."""

    def __init__(self, memory: Any, write_wait: float = WRITE_WAIT) -> None:
        self.memory, self.write_wait = memory, write_wait
        self.lock = threading.Lock()
        path = getattr(memory.storage, "path", None)
        self.path = str(path) if path else None

    def scrub(self, text: str) -> str:
        """``text`` with the store's full path cut to its file name."""
        if self.path:
            text = text.replace(repr(self.path), repr(os.path.basename(self.path))).replace(
                self.path, os.path.basename(self.path))
        return text

    def __call__(self, fn: Callable[[], Any], write: bool = False, notes: list[str] | None = None) -> Any:
        from ..embed.choice import EmbedderMissing
        from ..store.backends.durable import StorageError

        with self.lock:
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    self.memory.refresh()
                    if write:
                        with short_write_wait(self.memory, self.write_wait):
                            out = fn()
                    else:
                        out = fn()
            except ToolError:
                raise
            except KeyError as exc:
                raise tool_error(str(exc.args[0]) if exc.args else "unknown memory id") from None
            except StorageError as exc:
                if is_busy(exc):
                    raise tool_error(f"store busy: another process is writing to this store and held its lock "
                                     f"for {self.write_wait:g} s; nothing was written: retry in a few seconds") from None
                raise tool_error(self.scrub(str(exc))) from None
            except (ValueError, TypeError, OverflowError, EmbedderMissing) as exc:
                raise tool_error(self.scrub(str(exc))) from None
            caught = [w for w in caught if not issubclass(w.category, AddManyHint)]  # Python-only advice
            if notes is not None:
                for w in caught:
                    text = str(w.message)
                    if text not in notes:
                        notes.append(text)
            else:
                for w in caught:
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            return out


def check_bind(host: str, port: int) -> None:
    """A :class:`ValueError` (one line) when ``host:port`` cannot be bound (in use, no such address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            why = "the port is in use (another server?)" if exc.errno in (98, 48, 10048) else exc.strerror or str(exc)
            raise ValueError(f"cannot listen on {host}:{port}: {why}") from None


def check_stdio() -> None:
    """A :class:`ValueError` (one line) when stdin or stdout is closed (``hypermem mcp <&-``, as a
    supervisor may start it): the stdio server reads the client's requests from stdin and answers
    on stdout, and the SDK would fail on the missing stream with a traceback.  A stream that is
    not a file (replaced in-process) is left to the SDK."""
    for name, stream, fd, role in (("stdin", sys.stdin, 0, "reads the client's requests from its stdin"),
                                   ("stdout", sys.stdout, 1, "answers on its stdout")):
        if stream is None or _closed(stream, fd):
            raise ValueError(f"{name} is closed: the stdio server {role} (start it with the client's pipes, "
                             f"as an MCP client does, or serve over HTTP with --http PORT)")


def _closed(stream: Any, fd: int) -> bool:
    """Whether ``stream`` is closed, or is backed by ``fd`` and ``fd`` is closed."""
    try:
        if stream.fileno() != fd:
            return False
    except (AttributeError, ValueError, OSError):  # not a file (io.UnsupportedOperation), or a closed one
        return bool(getattr(stream, "closed", False))
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


class OneLine(logging.Formatter):
    """A record as one line, ``TIME LEVEL LOGGER: MESSAGE``, the message's own lines joined by
    ``"; "`` (a traceback, logged only under ``HYPERMEM_DEBUG=1``, keeps its lines)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        return "; ".join(part.strip() for part in super().formatMessage(record).splitlines() if part.strip())


def one_line_log(before: list[logging.Handler]) -> None:
    """On a stderr that is not a terminal (a container's log collector, a file), the handlers that
    the SDK put on the root logger since ``before`` (its RichHandler, which wraps a record at 80
    columns over several lines with a right-aligned ``server.py:LINE``) become plain stderr
    handlers that write one line per record (:class:`OneLine`), at the same level; on a terminal
    the SDK's stay as they are.  The SDK's level and records are kept."""
    root = logging.getLogger()
    try:
        if sys.stderr is None or sys.stderr.isatty():
            return
    except (AttributeError, ValueError):   # replaced in-process, or closed
        return
    for handler in [h for h in root.handlers if h not in before]:
        plain = logging.StreamHandler(sys.stderr)
        plain.setLevel(handler.level)
        plain.setFormatter(OneLine())
        root.removeHandler(handler)
        handler.close()
        root.addHandler(plain)


def install_signals(close: Callable[[], None]) -> None:
    """SIGINT and SIGTERM close the store and end the process at once (130, 143): the SDK's stdio
    reader blocks on stdin and would keep the process alive, and uvicorn re-raises SIGTERM."""
    done = threading.Lock()

    def stop(signum: int, frame: Any) -> None:
        if done.acquire(blocking=False):
            with contextlib.suppress(Exception):
                close()
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


_ORDERED = ("$eq", "$gt", "$gte", "$lt", "$lte")


def _kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "number"
    return None


def _operands(filters: Any) -> Iterator[tuple[str, Any]]:
    """``(field, operand)`` of each equality, ``$eq``/``$gt``/... and ``$in`` of a filter dict,
    through ``$and``/``$or``/``$not``."""
    if not isinstance(filters, dict):
        return
    for key, cond in filters.items():
        if key in ("$and", "$or"):
            for part in cond if isinstance(cond, list) else ():
                yield from _operands(part)
        elif key == "$not":
            yield from _operands(cond)
        elif isinstance(cond, dict) and any(str(k).startswith("$") for k in cond):
            for op, x in cond.items():
                if op in _ORDERED:
                    yield key, x
                elif op == "$in" and isinstance(x, list):
                    yield from ((key, v) for v in x)
        elif isinstance(cond, list):
            yield from ((key, v) for v in cond)
        elif not isinstance(cond, dict):
            yield key, cond


def empty_notes(memory: Any, filters: Any, when: datetime | None, expired: int) -> list[str]:
    """Why a recall found nothing, computed only then (one pass over the records): ``expired``
    memories that matched but whose ``valid_until`` has passed, an ``at_time`` before every
    memory, and a filter that compares a number field with a string operand or the reverse."""
    notes = []
    if expired:
        notes.append(f"{expired} memor{'y' if expired == 1 else 'ies'} matched but expired (valid_until before the "
                     "query time): pass include_expired=true to see them")
    wanted = {}
    for field, x in _operands(filters):
        if (kind := _kind(x)) is not None:
            wanted.setdefault(field, {})[kind] = x
    if when is None and not wanted:
        return notes
    oldest, held = None, {field: {} for field in wanted}
    for rec in memory:
        oldest = rec.t if oldest is None or rec.t < oldest else oldest
        for field, kinds in held.items():
            v = rec.meta.get(field)
            if _kind(v) is not None:
                kinds.setdefault(_kind(v), v)
    if when is not None and oldest is not None and when < oldest:
        notes.append(f"at_time {C.iso(when)} is before every memory (the oldest was stored at {C.iso(oldest)}): "
                     "nothing was stored yet then")
    for field, given in wanted.items():
        kinds = held[field]
        for kind, x in given.items():
            if kinds and kind not in kinds:
                other = next(iter(kinds))
                notes.append(f"the filter on {field!r} compares a {kind} ({x!r}) with a field that holds "
                             f"{other}s (e.g. {kinds[other]!r}), and a {other} never equals or orders with a "
                             f"{kind}: write the operand as a {other}")
    return notes
