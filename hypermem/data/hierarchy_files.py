"""A user's own hierarchy from files: edges and names, TSV or JSONL.

* **edges**: one ``(child, parent)`` edge a line -- TSV ``child<TAB>parent`` (a first line
  ``child<TAB>parent`` is a header and skipped, in any case and also as ``hyponym<TAB>hypernym``,
  ``id<TAB>parent``: :data:`CHILD_HEADERS` / :data:`PARENT_HEADERS`; the same names parent first,
  ``parent<TAB>child``, are refused: the columns are swapped; another first line whose
  names occur on no other line warns; a line ``name<TAB>`` with a blank parent, a pandas
  root row, is refused with that hint), or JSONL ``{"child": ..., "parent": ...}``;
* **names**: one entity a line -- TSV ``id<TAB>text``, or JSONL ``{"id": ..., "name": ...}``
  (``"text"`` is accepted for ``"name"``).  Without a names file each id is its own text.

The format follows the file's suffix (``.jsonl`` / ``.json`` is JSONL, anything else TSV; a
further ``.gz`` is gunzipped).  The files are UTF-8: a leading byte-order mark (Windows editors)
is dropped, in TSV and JSONL, with ``\n`` or ``\r\n`` line ends alike.  Spaces around an id or a
text are stripped (``" dog"`` and ``"dog"`` are one entity).  Every line is checked: a file
that is not UTF-8, a malformed line, a blank id or text, a self-loop, an id named twice, an
edge whose entity has no name, a cycle (the line of one of its edges), a line longer than
:data:`MAX_LINE` characters (read bounded: a small ``.gz`` inflating to one huge line is refused
there) or a transitive closure of more than :data:`~hypermem.data.dag.MAX_CLOSURE` pairs raises
:class:`HierarchyFileError` naming the file and line.  Two ids may share a text (two entities of one name, as real hierarchies have):
that loads, with a ``UserWarning`` naming them, since an encoder gives one text one point.
Nothing is executed or written.

Example::

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "edges.tsv").write_text("dog\\tanimal\\ncat\\tanimal\\n")
    >>> read_hierarchy(d / "edges.tsv")
    EntityHierarchy('edges', entities=3, edges=2)
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from ..caller_warning import warn_caller
from .dag import ClosureTooLargeError, CycleError, hypernym_closure
from .hierarchy_tasks import EntityHierarchy

__all__ = ["HierarchyFileError", "file_lines", "is_jsonl", "json_field", "json_object", "read_edges", "read_names",
           "read_hierarchy", "read_checked_edges"]

MAX_LINE = 1 << 16
CHILD_HEADERS = ("child", "hyponym", "id", "node", "child_id", "subclass", "narrower")
PARENT_HEADERS = ("parent", "hypernym", "parent_id", "superclass", "broader")
"""A TSV edges file's first line is a header, and skipped, when its two names are one of each
(any case): ``child<TAB>parent``, ``Hyponym<TAB>Hypernym``, ``id<TAB>parent``..."""


class HierarchyFileError(ValueError):
    """A hierarchy file that cannot be read; the message names the file and line."""


def _open(path: Path, mode: str, **kw):
    return (gzip.open if path.suffix.lower() == ".gz" else open)(path, mode, **kw)


def file_lines(path: Path):
    """``(line number, line)`` of each non-blank line of a UTF-8 file (``.gz`` too, a byte-order mark
    dropped, line ends stripped), read bounded (:data:`MAX_LINE`); a :class:`HierarchyFileError`
    naming the file (and line) for a line too long, bytes not UTF-8 or a damaged ``.gz``."""
    if path.is_dir():
        raise IsADirectoryError(f"{str(path)!r} is a folder, not a file: give the path of the hierarchy file")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    try:  # utf-8-sig: a byte-order mark (Windows editors) is not part of the first id
        with _open(path, "rt", encoding="utf-8-sig") as fh:
            # bounded reads: a small .gz inflating to one huge line is refused at MAX_LINE + 1 characters
            for no, line in enumerate(iter(lambda: fh.readline(MAX_LINE + 1), ""), 1):
                if len(line) > MAX_LINE:
                    raise HierarchyFileError(f"{path}:{no}: line longer than {MAX_LINE} characters")
                line = line.rstrip("\n").rstrip("\r")
                if line.strip():
                    yield no, line
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None
    except (EOFError, gzip.BadGzipFile) as exc:   # a damaged .gz
        raise HierarchyFileError(f"{path}: cannot be read ({exc})") from None


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> HierarchyFileError:
    """The error naming the file, the first line that is not UTF-8 and its offending byte."""
    with _open(path, "rb") as fh:
        for no, raw in enumerate(iter(lambda: fh.readline(4 * MAX_LINE + 2), b""), 1):
            if len(raw) > 4 * MAX_LINE + 1:   # at most 4 bytes a character
                return HierarchyFileError(f"{path}:{no}: line longer than {MAX_LINE} characters")
            try:
                raw.decode("utf-8-sig" if no == 1 else "utf-8")
            except UnicodeDecodeError as bad:
                return HierarchyFileError(f"{path}:{no}: not UTF-8 text (byte 0x{raw[bad.start]:02x} at column "
                                          f"{bad.start + 1}); save the file as UTF-8")
    return HierarchyFileError(f"{path}: not UTF-8 text ({exc.reason}); save the file as UTF-8")


def is_jsonl(path: Path) -> bool:
    """Whether ``path`` is read as JSONL (``.jsonl`` / ``.json``, before a ``.gz``), else TSV."""
    suffix = Path(path.stem).suffix if path.suffix.lower() == ".gz" else path.suffix
    return suffix.lower() in (".jsonl", ".json")


def json_field(obj, keys: tuple[str, ...], path: Path, no: int) -> str:
    """The first of ``keys`` in ``obj``, a non-empty string (or integer) stripped; else a
    :class:`HierarchyFileError` naming the file and line."""
    for k in keys:
        if k in obj:
            v = obj[k]
            if not isinstance(v, (str, int)) or isinstance(v, bool) or not str(v).strip():
                raise HierarchyFileError(f"{path}:{no}: field {k!r} must be a non-empty string, got {v!r}")
            return str(v).strip()
    raise HierarchyFileError(f"{path}:{no}: missing field {keys[0]!r}")


def json_object(path: Path, no: int, line: str) -> dict:
    """Line ``no`` of a JSONL file as its JSON object; else a :class:`HierarchyFileError` naming it."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise HierarchyFileError(f"{path}:{no}: not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:   # an integer of more than 4300 digits, a deep nest
        raise HierarchyFileError(f"{path}:{no}: not a readable JSON line ({str(exc).split(';')[0][:100]})") from None
    if not isinstance(obj, dict):
        raise HierarchyFileError(f"{path}:{no}: expected a JSON object")
    return obj


def _record(path: Path, no: int, line: str, keys: tuple[tuple[str, ...], tuple[str, ...]],
            extra_columns: bool = False) -> tuple[str, str]:
    if is_jsonl(path):
        obj = json_object(path, no, line)
        return json_field(obj, keys[0], path, no), json_field(obj, keys[1], path, no)
    parts = line.split("\t")
    if extra_columns:
        parts = parts[:2]
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        root = keys[1] == ("parent",) and len(parts) == 2 and parts[0].strip()
        hint = (f": {parts[0].strip()!r} has a blank parent, this looks like a root row (pandas writes a NaN "
                "parent as an empty cell); drop it, e.g. df.dropna(subset=['parent']): a root needs no line"
                if root else "")
        raise HierarchyFileError(f"{path}:{no}: every line needs two tab-separated names (neither blank), "
                                 f"got {line[:80]!r}{hint}")
    return parts[0].strip(), parts[1].strip()


def _edge_lines(path: Path, extra_columns: bool = False) -> dict[tuple[str, str], int]:
    """``(child, parent) -> the line that first gives it``, in the file's order."""
    edges: dict[tuple[str, str], int] = {}
    for no, line in file_lines(path):
        c, p = _record(path, no, line, (("child",), ("parent",)), extra_columns)
        if no == 1 and not is_jsonl(path) and c.lower() in CHILD_HEADERS and p.lower() in PARENT_HEADERS:
            continue
        if no == 1 and not is_jsonl(path) and c.lower() in PARENT_HEADERS and p.lower() in CHILD_HEADERS:
            raise HierarchyFileError(f"{path}:1: the header {c!r}<TAB>{p!r} says parent first: this loader reads "
                                     "child<TAB>parent; swap the columns (e.g. df[['child', 'parent']].to_csv(..., "
                                     "sep='\\t', index=False))")
        if c == p:
            raise HierarchyFileError(f"{path}:{no}: {c!r} is its own parent (a self-loop)")
        edges.setdefault((c, p), no)
    if not edges:
        raise HierarchyFileError(f"{path}: no edges: write one child<TAB>parent per line")
    _header_warning(path, edges)
    return edges


def _header_warning(path: Path, edges: dict[tuple[str, str], int]) -> None:
    """Warn when a TSV file's line 1 looks like a header it does not recognise: the file's only
    edge whose two names occur on no other line (``Kind<TAB>Broader`` above connected pairs; a
    file of separate pairs warns of none)."""
    if is_jsonl(path) or edges[next(iter(edges))] != 1 or len(edges) < 2:
        return
    seen: dict[str, int] = {}
    for pair in edges:
        for x in pair:
            seen[x] = seen.get(x, 0) + 1
    alone = [pair for pair in edges if seen[pair[0]] == seen[pair[1]] == 1]
    if alone and edges[alone[0]] == 1 and len(alone) == 1:
        c, p = alone[0]
        warn_caller(f"{path}:1: {c!r}<TAB>{p!r} is read as an edge, but neither name occurs on another line: if it "
                      "is a header, delete it or name the columns child<TAB>parent, and check that every line "
                      "gives the child first")  # the caller's line, however deep (read_hierarchy)


def read_edges(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The ``(child, parent)`` edges of an edges file (module docstring)."""
    return list(_edge_lines(Path(path)))


def _ancestors(path: Path, edges: dict[tuple[str, str], int]) -> dict[str, set[str]]:
    """Every node's ancestors (:func:`~hypermem.data.dag.hypernym_closure`); a cycle is named
    with the line of its edge from its first node: ``FILE:7: the hierarchy has a cycle ...``."""
    parents: dict[str, list[str]] = {}
    for c, p in edges:
        parents.setdefault(c, []).append(p)
    try:
        return hypernym_closure(parents)
    except CycleError as exc:
        raise HierarchyFileError(f"{path}:{edges[(exc.cycle[0], exc.cycle[1 % len(exc.cycle)])]}: {exc}") from None
    except ClosureTooLargeError as exc:
        raise HierarchyFileError(f"{path} ({len(edges):,} edges): {exc}") from None


def read_names(path: str | os.PathLike) -> dict[str, str]:
    """``id -> text`` of a names file (module docstring)."""
    path = Path(path)
    names: dict[str, str] = {}
    for no, line in file_lines(path):
        i, t = _record(path, no, line, (("id",), ("name", "text")))
        if no == 1 and not is_jsonl(path) and (i.lower(), t.lower()) in (("id", "name"), ("id", "text")):
            continue
        if i in names:
            raise HierarchyFileError(f"{path}:{no}: id {i!r} is named twice")
        names[i] = t
    by_text: dict[str, list[str]] = {}
    for i, t in names.items():
        by_text.setdefault(t, []).append(i)
    shared = {t: ids for t, ids in by_text.items() if len(ids) > 1}
    if shared:
        text, ids = next(iter(shared.items()))
        warn_caller(f"{path}: {len(shared)} text(s) name more than one id, e.g. {text!r}: {ids[:3]}; an encoder "
                      "gives them one point (make the texts differ to tell them apart)")
    return names


def _read_as(role: str, read, path: Path):
    """``read(path)`` with its error naming the file's role: ``edges file /abs/e.tsv:3: ...``."""
    try:
        return read(path)
    except HierarchyFileError as exc:
        raise HierarchyFileError(f"{role} file {exc}") from None
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise type(exc)(f"{role} file: {exc}") from None


def read_hierarchy(edges: str | os.PathLike, names: str | os.PathLike | None = None) -> EntityHierarchy:
    """An :class:`~hypermem.data.hierarchy_tasks.EntityHierarchy` from an edges file and an
    optional names file; checked for unnamed entities and cycles.  An error names the file's
    role and its absolute path (a relative path is read from the working folder):
    ``edges file /home/me/exp/edges.tsv:1: 'a' is its own parent``."""
    edges = Path(edges).expanduser().absolute()
    lines = _read_as("edges", _edge_lines, edges)
    e = list(lines)
    ids = {x for pair in e for x in pair}
    if names:
        names = Path(names).expanduser().absolute()
        n = _read_as("names", read_names, names)
        missing = sorted(ids - set(n))
        if missing:
            raise HierarchyFileError(f"names file {names}: no name for {len(missing)} entities of the edges file "
                                     f"{edges}, e.g. {missing[:3]}")
        n = {k: v for k, v in n.items() if k in ids}
    else:
        n = {x: x for x in sorted(ids)}
    _read_as("edges", lambda path: _ancestors(path, lines), edges)
    return EntityHierarchy(n, e, name=edges.stem)


def read_checked_edges(path: str | os.PathLike, role: str = "edges",
                       extra_columns: bool = False) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    """``(edges, ancestors)`` of an edges file: its ``(child, parent)`` edges, each once in the
    file's order, and every node's ancestors, checked as :func:`read_hierarchy` checks them;
    an error names ``role`` and the absolute path: ``dataset file /home/me/pairs.tsv:3: ...``.
    ``extra_columns``: TSV columns after the second are ignored instead of refused."""
    path = Path(path).expanduser().absolute()
    lines = _read_as(role, lambda p: _edge_lines(p, extra_columns), path)
    return list(lines), _read_as(role, lambda p: _ancestors(p, lines), path)
