"""The commands that read a stored memory: inspect, tree, search, stats, export, import, fit-reranker (hypermem.cli)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

from ..store.checks import SQLITE_HEADER
from ..store.frames import parents_first
from ..store.shown_text import shown
from ..store.views import MemoryViews
from ..temporal import policy_spec
from .inputs import (
    UserError,
    check_utf8_arg,
    default_output,
    load_memory,
    named_embedder,
    path_text,
    print_json,
    read_source,
    read_text,
    time_arg,
    warn,
)
from .outputs import check_output, head_of, is_page, is_stream, report, save_new, write_durable, write_text

__all__ = ["cmd_export", "cmd_fit_reranker", "cmd_import", "cmd_inspect", "cmd_search", "cmd_stats", "cmd_tree"]


def memories(n: int) -> str:
    """``"1 memory"``, ``"2 memories"``."""
    return f"{n} {'memory' if n == 1 else 'memories'}"


def cmd_inspect(args: argparse.Namespace) -> int:
    out = args.output or str(default_output(args.memory, ".html"))
    check_output(out, inputs=(args.memory,), force=args.force, replaceable=is_page, what="-o PAGE.html")
    mem = load_memory(args.memory)
    if args.at is not None and policy_spec(mem.decay).get("type") == "none":
        warn("--at changes nothing here: this store has no decay, so every memory is shown at weight 1 "
             "whatever the time")
    view = {"title": args.title or f"hypermem: {Path(args.memory).name}", "layout": args.layout, "at_time": args.at}
    if is_stream(out):   # -, a pipe, /dev/stdout: the page streams there
        write_text(out, mem.inspect(None, open_browser=args.open, **view))
    else:   # check_output above applied the rule; --force reaches Memory.inspect's own check too
        mem.inspect(out, open_browser=args.open, force=args.force, **view)
    report(out, f"wrote {path_text(out)} ({memories(len(mem))})")
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    mem = load_memory(args.memory)
    if args.root is not None and args.root not in mem:
        raise UserError(f"unknown memory id {args.root!r}")
    views = getattr(mem, "views", None)   # a Memory: its lines as they come; a server store: its text, split
    lines = (views.tree_lines(root=args.root, max_text=args.max_text) if isinstance(views, MemoryViews)
             else iter(mem.tree(root=args.root, max_text=args.max_text).split("\n")))
    empty = True
    for line in lines:   # printed as produced: `hypermem tree big.db | head -1` reads one line, not the whole tree
        if line or not empty:
            print(line)   # Memory.tree shows controls as escapes (store.shown_text)
            empty = False
    if empty:
        print("(empty memory)")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if args.query is not None:
        check_utf8_arg(args.query, "the query")
    mem = load_memory(args.memory, args.embedder, embeds=args.query is not None)
    if args.root is not None and args.mode == "nearest":
        warn(f"--root {args.root} does nothing with --mode nearest (the default), which searches the whole store: "
             "give --mode subtree|children|ancestors|siblings|cone to search around it")
    if args.query is not None and args.root is None and trained_layout(mem):
        warn("text queries do not locate the points of this store: they were trained (a hierarchy layout), not "
             "placed by its embedder, so the hits do not follow the query; search by id with --root ID and "
             "--mode subtree|ancestors")
    if args.mode != "nearest" and args.root is None and (args.mode != "ancestors" or args.query is None):
        raise UserError(f"--mode {args.mode} needs --root ID" + (" (or a query)" if args.mode == "ancestors" else ""))
    if args.query is None and args.mode == "nearest":
        raise UserError("a query is needed with --mode nearest (omit it only with a structural mode)")
    if args.root is not None and args.root not in mem:
        raise UserError(f"unknown memory id {args.root!r}")
    hits = mem.search(args.query, k=args.k, mode=args.mode, root=args.root, metric=args.metric, at_time=args.at,
                      touch=False, filters=args.filter, valid_only=args.valid_only)
    if args.json:
        print_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("(no results)")
    for rank, h in enumerate(hits, 1):
        print(f"{rank:3d}. {h.score:8.3f}  time_weight={h.time_weight:.3f}  depth={h.depth:.2f}  {shown(h.text)}  "
              f"[{shown(h.id)}]")
    return 0


def trained_layout(mem, sample: int = 8) -> bool:
    """Whether the store's points were set rather than placed from its embedder: a trained
    embedding loaded by ``hypermem.train.embedding_to_memory`` (each memory's stored embedding is
    its point), or memories whose stored embeddings are not what the embedder gives for their text."""
    from ..store.encoder_points import places_points

    n = len(mem)
    spec = getattr(mem.embedder, "spec", None)
    if n == 0 or places_points(mem.embedder) or (isinstance(spec, dict) and spec.get("type") == "HierarchyEncoder"):
        return False   # a hierarchy encoder's store: each point is the encoder's, which a query locates
    import torch

    ids = [mem.ids[round(i * (n - 1) / max(sample - 1, 1))] for i in range(min(sample, n))]
    ids = list(dict.fromkeys(ids))
    emb = torch.stack([mem.embedding(i) for i in ids]).to("cpu", torch.float64)
    points = torch.stack([mem.point(i) for i in ids]).to("cpu", torch.float64)
    if emb.shape == points.shape and torch.allclose(emb, points, atol=1e-9):
        return True
    try:
        fresh = torch.as_tensor(mem.embedder.embed([mem.get(i).text for i in ids]), dtype=torch.float64)
    except Exception:   # an embedder that cannot embed here: the search itself says so
        return False
    if fresh.shape != emb.shape:
        return False
    agree = torch.nn.functional.cosine_similarity(fresh, emb, dim=-1) > 0.99
    return int(agree.sum()) * 2 < len(ids)


def cmd_stats(args: argparse.Namespace) -> int:
    mem = load_memory(args.memory)
    stats = mem.stats(at_time=args.at)
    if args.json:
        print_json(stats)
    else:
        width = max(map(len, stats))
        for k, v in stats.items():
            print(shown(f"{k:<{width}}  {json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v}"))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    out = args.output
    fmt = args.format or {".json": "json", ".csv": "csv"}.get(Path(out).suffix.lower())
    if fmt is None:
        if out == "-":
            raise UserError("writing to stdout (-) needs --format json|csv")
        raise UserError(f"cannot tell the format from {out!r}: name the file .json or .csv, or pass "
                        f"--format json|csv")
    if fmt == "csv" and args.indent is not None:
        warn("--indent applies to JSON only; ignored for CSV")
    if fmt == "json" and args.at is not None:
        warn("--at applies to CSV (the weights as of a time) only; ignored for JSON, which keeps every time")
    if fmt == "json" and args.raw_csv:
        warn("--raw-csv applies to CSV only; ignored for JSON, which is always exact")
    check_output(out, inputs=(args.memory,), force=args.force)
    mem = load_memory(args.memory)
    if fmt == "json":   # written a record at a time: a large store's text is never whole in memory
        from ..store.persistence import json_chunks

        text = json_chunks(mem, indent=args.indent)
    else:
        text = csv_chunks(mem.table(at_time=args.at), escape=not args.raw_csv)
    write_text(out, text)
    report(out, f"wrote {path_text(out)} ({memories(len(mem))}, {fmt})")
    return 0


CSV_FIELDS = ("id", "text", "parent", "level", "depth", "time", "weight", "accesses", "meta")
"""The columns of ``export --format csv`` (a row's ``"t"`` is ``"time"`` again)."""


FORMULA_START = frozenset("=+-@\t\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""
PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
"""A cell that a spreadsheet reads as a number (``-2``, ``+1.5e-3``): no formula, kept as it is."""


def csv_cell(value):
    """``value`` as a CSV cell that a spreadsheet shows and does not run: a string that starts with
    ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a ``'`` before it (the OWASP
    mitigation: ``=HYPERLINK(...)`` is shown as text), unless it is a plain number (``-2`` stays
    a number).  Anything else is returned as it is."""
    if isinstance(value, str) and value[:1] in FORMULA_START and not PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_chunks(rows, per_chunk: int = 512, escape: bool = True):
    """The CSV text of ``Memory.table`` rows (``meta`` as JSON), ``per_chunk`` rows a chunk: written
    as they come (:func:`write_text`), a large store's CSV is never whole in memory, and a reader
    that goes away (``| head -1``) is seen at the next chunk, not lost in one huge write.  With
    ``escape`` (the default; ``export --raw-csv`` turns it off) a cell that a spreadsheet would run as a
    formula is written as text (:func:`csv_cell`)."""
    import csv
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for n, r in enumerate(rows, 1):
        row = dict(r, meta=json.dumps(r["meta"], ensure_ascii=False))
        writer.writerow({k: csv_cell(row.get(k)) for k in CSV_FIELDS} if escape else row)
        if n % per_chunk == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()


def read_items(path: Path, text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Items of ``Memory.add_many`` from JSON lines (or a JSON list): text, and optionally
    id, parent, t / valid_from / valid_until (ISO 8601), meta; and where each item is in the
    file (``line N``, or ``item #i`` of a list) for the errors.  Values nested deeper than
    ``MAX_JSON_DEPTH`` are refused (the saved file could not be loaded)."""
    from ..store.validation import MAX_JSON_DEPTH, json_depth_over

    try:
        if text.lstrip().startswith("["):
            items = json.loads(text)
            where = [f"item #{i}" for i in range(len(items))] if isinstance(items, list) else []
        else:
            items, where = [], []
            # only \n, \r\n or \r end a line (JSON strings escape them), not a raw U+2028 or U+0085
            for n, line in enumerate(re.split(r"\r\n|[\r\n]", text), 1):
                if line.strip():
                    try:
                        items.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        if not items and _csv_like(path, line):
                            raise UserError(f"{path}: {NOT_CSV}") from None
                        raise UserError(f"{path}: line {n} is not JSON ({exc})") from None
                    except ValueError as exc:   # an integer of more than 4300 digits
                        raise UserError(f"{path}: line {n}: {str(exc).split(';')[0][:100]}") from None
                    where.append(f"line {n}")
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON lines ({exc})") from None
    except ValueError as exc:   # a JSON list holding an integer of more than 4300 digits
        raise UserError(f"{path}: not readable JSON ({str(exc).split(';')[0][:100]})") from None
    except RecursionError:
        raise UserError(f"{path}: a value nests too deep for the JSON reader") from None
    if not isinstance(items, list):
        raise UserError(f"{path}: a JSON file of items holds a list")
    out, dropped = [], set()
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict):
            raise UserError(f"{path}: {where[i]} is not an object or a string")
        if json_depth_over(item, MAX_JSON_DEPTH + 1):
            raise UserError(f"{path}: {where[i]} nests deeper than {MAX_JSON_DEPTH} levels")
        item = _own_keys(dict(item), path, where[i], dropped)
        for key in ("t", "valid_from", "valid_until"):
            if isinstance(item.get(key), str):
                try:
                    item[key] = time_arg(item[key])
                except argparse.ArgumentTypeError as exc:
                    raise UserError(f"{path}: {where[i]}: {key}: {exc}") from None
        out.append(item)
    if dropped:
        warn(f"ignored {', '.join(sorted(dropped))}: figures of `search --json` or an export that the new memory "
             "computes afresh")
    return _parents_first(out, where, path)


NOT_CSV = ("CSV/TSV is not an import format: convert to JSON lines (one object per line: {\"text\": ..., and "
           "optionally \"id\", \"parent\", \"t\", \"valid_from\", \"valid_until\", \"meta\": {...}}); to copy a "
           "store, export it as JSON (export --format json), which import reads whole (an export's CSV lacks "
           "valid_from / valid_until and the embeddings)")


def _csv_like(path: Path, line: str) -> bool:
    """A first line that is no JSON in a ``.csv``/``.tsv`` file, or one that reads as a CSV header
    (``id,text,parent,...`` as ``export --format csv`` writes it)."""
    return path.suffix.lower() in (".csv", ".tsv") or bool(re.fullmatch(r'\s*"?\w+"?(\s*[,;\t]\s*"?\w+"?)+\s*', line))


def _parents_first(items: list[dict[str, Any]], where: list[str],
                   path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The items with every parent that the file holds before its children (search rows come in
    score order; :func:`hypermem.store.frames.parents_first`); a file already in order keeps its
    order.  A duplicate id names both places, a parent cycle (or an item that is its own parent) its items."""
    try:
        order = parents_first(items, where)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    return [items[i] for i in order], [where[i] for i in order]


def _check_parents(items: list[dict[str, Any]], where: list[str], path: Path) -> None:
    """A parent id that no item of the file has (say rows of `search --json` under a root whose
    own parent is left out) is refused by name; one the file holds is put first (_parents_first)."""
    ids = {it.get("id") for it in items}
    for item, at in zip(items, where):
        parent = item.get("parent")
        if isinstance(parent, str) and parent not in ids:
            raise UserError(f"{path}: unknown parent id {parent!r} ({at}; no item of the file has that id: import "
                            "the whole store, or drop the field)")


RENAMED = {"parent_id": "parent", "time": "t"}
"""Keys of `hypermem search --json` rows and export tables that mean an item's key."""
COMPUTED = frozenset({"access_count", "accesses", "last_accessed", "score", "distance", "time_weight", "depth",
                      "cone_energy", "level", "weight"})
"""Keys of those rows that a new memory computes itself: dropped with one warning."""


def _own_keys(item: dict[str, Any], path: Path, where: str, dropped: set[str]) -> dict[str, Any]:
    for old, new in RENAMED.items():
        if old in item:
            value = item.pop(old)
            if new in item and item[new] != value:
                raise UserError(f"{path}: {where}: {old} {value!r} and {new} {item[new]!r} differ")
            item[new] = value
    dropped.update(item.keys() & COMPUTED)
    return {k: v for k, v in item.items() if k not in COMPUTED}


def cmd_import(args: argparse.Namespace) -> int:
    from ..store.backends.opening import is_url
    from ..store.backends.pg_errors import redact

    src = Path(args.source)
    if args.output == "-":
        raise UserError("a SQLite memory needs a file: give OUTPUT as a file name such as notes.db, not -")
    if is_url(args.output) and not args.durable:
        raise UserError(f"{redact(args.output)} is a PostgreSQL database: it holds a durable store, so pass --durable "
                        "(a snapshot, Memory.save, is a SQLite file)")
    if is_url(args.source):   # a PostgreSQL store, read-only, copied whole
        _ignored_item_flags(args, "a stored memory")
        return _write_import(load_memory(args.source, args.embedder), args)
    if args.source != "-" and not src.exists():
        raise UserError(f"no such file: {redact(args.source)}")
    if not is_url(args.output):
        check_output(args.output, inputs=(args.source,), force=args.force)
    if src.is_dir():
        raise UserError(f"{args.source} is a folder, not a file")
    if args.durable and args.source != "-" and head_of(src, 16) == SQLITE_HEADER:  # a memory file, copied whole
        _ignored_item_flags(args, "a memory file")
        return _write_import(load_memory(args.source, args.embedder), args)
    # a file is first judged by its head: a memory JSON is then read by Memory.from_json a record at a time
    text = None if args.source != "-" and src.is_file() else _read_import_text(args)
    head = (text if text is not None else head_of(src, 4 * 4096 + 3).decode("utf-8-sig", "replace"))[:4096]
    head = head.lstrip()
    from ..embed import HashingEmbedder, StandIn
    from ..store import Memory

    if head.startswith("{") and '"config"' in head:
        # the file holds its embeddings: the copy needs the embedder only by name (a stand-in keeps its spec)
        _ignored_item_flags(args, "a memory JSON")
        emb = named_embedder(args.embedder) if args.embedder else StandIn(hint="pass --embedder minilm|PATH")
        try:
            mem = Memory.from_json(text if args.source == "-" else src, embedder=emb)
        except ValueError:
            if text is None:
                read_text(src)   # a file that is not UTF-8 is refused as any input is, naming the byte
            raise
    else:
        text = _read_import_text(args) if text is None else text
        from ..temporal import HalfLife

        decay = HalfLife(hours=args.half_life) if args.half_life is not None else None
        dim = args.dim if args.dim is not None else 256
        emb = named_embedder(args.embedder, dim=dim) if args.embedder else HashingEmbedder(dim=dim)
        mem = Memory(embedder=emb, decay=decay)
        items, where = read_items(src, text)
        _check_parents(items, where, src)
        try:
            mem.add_many(items)
        except (ValueError, TypeError, KeyError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            msg = re.sub(r"item #(\d+)", lambda m: where[int(m.group(1))] if int(m.group(1)) < len(where)
                         else m.group(0), msg)
            raise UserError(f"{src}: {msg}") from None
    return _write_import(mem, args)


def _read_import_text(args: argparse.Namespace) -> str:
    text = read_source(args.source)
    if not text.strip():   # an empty document is no JSON; `[]` or an empty store's JSON still imports
        raise UserError(f"{'stdin (-)' if args.source == '-' else args.source} is empty: no items to import")
    return text


def _ignored_item_flags(args: argparse.Namespace, what: str) -> None:
    ignored = [flag for flag, used in (("--dim", args.dim is not None), ("--half-life", args.half_life is not None))
               if used]
    if ignored:
        warn(f"{', '.join(ignored)} applies to JSON lines of items only; {what} keeps its own settings")


def _write_import(mem, args: argparse.Namespace) -> int:
    """The imported memory as a snapshot (``Memory.save``) or, ``--durable``, a ``Memory.open`` store."""
    if args.durable:
        from ..store.backends.opening import is_url
        from ..store.backends.pg_errors import redact

        write_durable(mem, args.output)
        store = "URL" if is_url(args.output) else shlex.quote(args.output)
        print(f"wrote {path_text(redact(args.output))} ({memories(len(mem))}, a durable store: hypermem mcp --store "
              f"{store} serves it)")
        return 0
    from ..store.persistence import save as save_memory

    if args.force or is_stream(args.output) or Path(args.output).is_symlink():
        save_memory(mem, args.output, force=args.force)   # --force: a file that is no memory file is replaced too
    else:   # a new name: never replaced, even by another import that began after this one (save_new)
        save_new(mem, args.output)
    print(f"wrote {path_text(args.output)} ({memories(len(mem))})")
    return 0


def cmd_fit_reranker(args: argparse.Namespace) -> int:
    """Train a placement reranker on the memory's own filed tree (hypermem.hierarchy.reranker_training)."""
    from ..embed.reranker import CONFIG_FILE, check_save_folder
    from ..hierarchy.reranker_training import fit_placement_reranker

    out = Path(args.out)
    if out.is_dir() and (out / CONFIG_FILE).is_file() and not args.force:
        raise UserError(f"{path_text(args.out)} holds a placement reranker; pass --force to replace it")
    check_save_folder(out)   # a file, or a folder of other files, is refused before the training
    mem = load_memory(args.memory)
    ids = mem.ids
    edges = [(i, mem.parent(i)) for i in ids if mem.parent(i) is not None]
    if not edges:
        raise UserError("the memory holds no tree (no memory has a parent): a reranker learns from filed memories")
    with warnings.catch_warnings(record=True) as said:   # a short run's warning as one plain line
        warnings.simplefilter("always", UserWarning)
        rr = fit_placement_reranker(edges, {i: mem.get(i).text for i in ids}, dict(zip(ids, mem.embeddings)),
                                    epochs=args.epochs, max_minutes=args.minutes, seed=args.seed, out=args.out,
                                    progress=False if args.no_progress else None)
    for w in said:
        warn(str(w.message))
    n = rr.config["steps"]
    print(f"wrote the placement reranker to {path_text(args.out)} ({n} step{'s' if n != 1 else ''} over {rr.config['lists']} "
          "training lists); use it with mem.reranker = PlacementReranker.load(FOLDER) or hypermem mcp --reranker")
    return 0
