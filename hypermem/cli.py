"""The ``hypermem`` command line.

  hypermem demo [--dataset mammals|events]       train, save, inspect and search a demo memory
  hypermem inspect MEMORY [-o PAGE.html]         write the HTML inspector of a saved memory
  hypermem tree MEMORY [--root ID]               print the hierarchy
  hypermem search MEMORY [QUERY] [-k K] [--mode MODE] [--root ID]
  hypermem stats MEMORY [--json]                 summary numbers
  hypermem export MEMORY OUT.json|OUT.csv        portable JSON (exact) or a CSV table (by extension or --format)
  hypermem import SOURCE OUT.db                  memory JSON, or JSON lines of items, to a SQLite memory
  hypermem mcp --store agent.db [--http HOST:PORT]   an MCP server over a durable store (the mcp extra)

MEMORY is a file written by ``Memory.save`` (SQLite) or ``Memory.to_json`` (JSON), a SQLite
database of ``Memory.open`` or a ``postgresql://`` URL (both opened read-only).
Mistakes (a missing file, an unknown id, a bad option) print one line and exit non-zero
(set HYPERMEM_DEBUG=1 to get the traceback instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MODES = ("nearest", "subtree", "children", "ancestors", "siblings", "cone")  # = hypermem.store.MODES
METRICS = ("shell", "hyperbolic")
LAYOUTS = ("auto", "structural", "projection")


class UserError(Exception):
    """A mistake on the command line: printed as one line, exit status 1."""


# ---------------------------------------------------------------------------- helpers
def _time_arg(text: str) -> datetime:
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r} (e.g. 2025-06-01T09:00)") from None
    t = t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)
    try:
        return t.astimezone(timezone.utc)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} is outside the datetime range in UTC") from None


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def _read_text(path: Path) -> str:
    """The UTF-8 text of an input file (a byte-order mark is dropped); anything else is a
    one-line error naming the file."""
    if path.is_char_device() or path.is_block_device():
        raise UserError(f"{path} is a device, not a file")
    data = path.read_bytes()
    if data.startswith(b"SQLite format 3\x00"):
        raise UserError(f"{path} is a SQLite file; import reads memory JSON (Memory.to_json) or JSON lines")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start})") from None


def _is_json_file(path: Path) -> bool:
    if path.suffix.lower() == ".json":
        return True
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    return head.startswith(b"{")


def load_memory(path: str, embedder: str | None = None):
    """A memory from any store: a ``postgresql://`` URL or a SQLite database of
    ``Memory.open`` (opened read-only), a SQLite file of ``Memory.save`` or a JSON file of
    ``Memory.to_json`` (by content).  ``embedder`` (``minilm``, ``hashing`` or the folder of a
    saved encoder) is needed only to embed a query; without it a memory made with another
    embedder than the hashing one opens with a stand-in that says so when asked to embed."""
    from .embed import StandIn, embedder_named
    from .store import Memory
    from .store.backends.opening import is_durable_file, is_url

    if embedder is None or embedder == "hashing":
        emb = StandIn(hint="pass --embedder minilm|hashing|PATH (the folder of a saved encoder)")
    else:
        emb = embedder_named(embedder)
    if is_url(path):
        return Memory.open(path, read_only=True, embedder=emb)
    p = Path(path)
    if not p.exists():
        raise UserError(f"no such memory file: {path}")
    if p.is_dir():
        raise UserError(f"{path} is a folder, not a memory file")
    if is_durable_file(p):
        return Memory.open(p, read_only=True, embedder=emb)
    return Memory.from_json(p, embedder=emb) if _is_json_file(p) else Memory.load(p, embedder=emb)


def _default_output(memory: str, suffix: str) -> Path:
    from .store.backends.opening import is_url

    if is_url(memory):
        raise UserError("a PostgreSQL store has no file name to derive the page's from: pass -o PAGE.html")
    return Path(memory).with_suffix(suffix)


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=1, ensure_ascii=False, default=str))


# ---------------------------------------------------------------------------- commands
def _cmd_demo(args: argparse.Namespace) -> int:
    training = {}
    if args.dataset == "mammals":
        training = {"config": args.config, "epochs": args.epochs, "runs_dir": args.runs or "runs",
                    "progress": not args.no_progress}
    else:
        given = [flag for flag, used in (("--config", args.config is not None), ("--epochs", args.epochs is not None),
                                         ("--runs", args.runs is not None), ("--no-progress", args.no_progress))
                 if used]
        if given:
            raise UserError(f"{', '.join(given)}: only for the mammals demo (--dataset mammals)")
    from .demo import run_demo

    out, name = args.out or "out/hypermem-demo", None
    if args.output is not None:  # the NumPy reference's form: -o STEM writes STEM.db and STEM.html
        if args.out is not None:
            raise UserError("give either -o STEM or --out FOLDER, not both")
        stem = Path(args.output)
        if not stem.name or stem.name in (".", ".."):
            raise UserError(f"-o needs a file stem such as demo/memory, got {args.output!r}")
        if stem.suffix.lower() in (".db", ".html", ".json", ".sqlite"):
            stem = stem.with_suffix("")
        out, name = stem.parent, stem.name
    if name is not None:
        training["name"] = name
    result = run_demo(out, dataset=args.dataset, inspector=not args.no_inspector, **training)
    if args.open and result["html"] is not None:
        import webbrowser

        webbrowser.open(Path(result["html"]).resolve().as_uri())
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    out = Path(args.output) if args.output else _default_output(args.memory, ".html")
    mem = load_memory(args.memory)
    mem.inspect(out, open_browser=args.open, title=args.title or f"hypermem: {Path(args.memory).name}",
                layout=args.layout, at_time=args.at)
    print(f"wrote {out} ({len(mem)} memories)")
    return 0


def _cmd_tree(args: argparse.Namespace) -> int:
    mem = load_memory(args.memory)
    if args.root is not None and args.root not in mem:
        raise UserError(f"unknown memory id {args.root!r}")
    text = mem.tree(root=args.root, max_text=args.max_text)
    print(text if text else "(empty memory)")
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    mem = load_memory(args.memory, args.embedder)
    if args.mode != "nearest" and args.root is None and (args.mode != "ancestors" or args.query is None):
        raise UserError(f"--mode {args.mode} needs --root ID" + (" (or a query)" if args.mode == "ancestors" else ""))
    if args.query is None and args.mode == "nearest":
        raise UserError("a query is needed with --mode nearest (omit it only with a structural mode)")
    if args.root is not None and args.root not in mem:
        raise UserError(f"unknown memory id {args.root!r}")
    hits = mem.search(args.query, k=args.k, mode=args.mode, root=args.root, metric=args.metric, at_time=args.at,
                      touch=False)
    if args.json:
        _print_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print("(no results)")
    for rank, h in enumerate(hits, 1):
        print(f"{rank:3d}. {h.score:8.3f}  time_weight={h.time_weight:.3f}  depth={h.depth:.2f}  {h.text}  [{h.id}]")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    mem = load_memory(args.memory)
    stats = mem.stats(at_time=args.at)
    if args.json:
        _print_json(stats)
    else:
        width = max(map(len, stats))
        for k, v in stats.items():
            print(f"{k:<{width}}  {json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    mem = load_memory(args.memory)
    out = Path(args.output)
    fmt = args.format or {".json": "json", ".csv": "csv"}.get(out.suffix.lower())
    if fmt is None:
        raise UserError(f"cannot tell the format from {args.output!r}: name the file .json or .csv, or pass "
                        f"--format json|csv")
    if fmt == "json":
        mem.to_json(out, indent=args.indent)
    else:
        import csv
        import io

        from .store.atomic import atomic_write_text

        buf = io.StringIO()
        rows = mem.table(at_time=args.at)
        writer = csv.DictWriter(buf, fieldnames=["id", "text", "parent", "level", "depth", "time", "weight",
                                                 "accesses", "meta"])
        writer.writeheader()
        for r in rows:
            writer.writerow(dict(r, meta=json.dumps(r["meta"], ensure_ascii=False)))
        atomic_write_text(out, buf.getvalue())
    print(f"wrote {out} ({len(mem)} memories, {fmt})")
    return 0


def _read_items(path: Path, text: str) -> list[dict[str, Any]]:
    """Items of ``Memory.add_many`` from JSON lines (or a JSON list): text, and optionally
    id, parent, t / valid_from / valid_until (ISO 8601), meta.  Values nested deeper than
    ``MAX_JSON_DEPTH`` are refused (the saved file could not be loaded)."""
    from .store.validation import MAX_JSON_DEPTH, json_depth_over

    try:
        stripped = text.lstrip()
        if stripped.startswith("["):
            items = json.loads(text)
        else:
            items = [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not JSON lines ({exc})") from None
    except RecursionError:
        raise UserError(f"{path}: a value nests too deep for the JSON reader") from None
    out = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, dict):
            raise UserError(f"{path}: item #{i} is not an object or a string")
        if json_depth_over(item, MAX_JSON_DEPTH + 1):
            raise UserError(f"{path}: item #{i} nests deeper than {MAX_JSON_DEPTH} levels")
        item = dict(item)
        for key in ("t", "valid_from", "valid_until"):
            if isinstance(item.get(key), str):
                try:
                    item[key] = _time_arg(item[key])
                except argparse.ArgumentTypeError as exc:
                    raise UserError(f"{path}: item #{i}: {key}: {exc}") from None
        out.append(item)
    return out


def _cmd_import(args: argparse.Namespace) -> int:
    src, out = Path(args.source), Path(args.output)
    if not src.exists():
        raise UserError(f"no such file: {args.source}")
    if out.exists() and not args.force:
        raise UserError(f"{out} exists; pass --force to replace it")
    if src.is_dir():
        raise UserError(f"{args.source} is a folder, not a file")
    text = _read_text(src)
    head = text[:4096].lstrip()
    from .store import Memory

    if head.startswith("{") and '"config"' in head:
        mem = Memory.from_json(src)
    else:
        from .embed import HashingEmbedder
        from .temporal import HalfLife

        decay = HalfLife(hours=args.half_life) if args.half_life is not None else None
        mem = Memory(embedder=HashingEmbedder(dim=args.dim), decay=decay)
        items = _read_items(src, text)
        try:
            mem.add_many(items)
        except (ValueError, TypeError, KeyError) as exc:
            raise UserError(f"{src}: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}") from None
    mem.save(out)
    print(f"wrote {out} ({len(mem)} memories)")
    return 0


# ---------------------------------------------------------------------------- parser
def _memory_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("memory", help="a memory: a file of Memory.save (SQLite) or Memory.to_json (JSON), a "
                   "database of Memory.open (SQLite) or a postgresql:// URL (opened read-only)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hypermem", description="hypermem: a hierarchy-aware, time-aware memory "
                                     "in the Poincaré ball.", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n")[1])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    from_demo = sub.add_parser("demo", help="train, save, inspect and search a demo memory (WordNet mammals)",
                               description="mammals (default): train Poincaré embeddings of the WordNet mammal "
                               "hierarchy with the shipped Lightning config (TensorBoard logs under runs/), load "
                               "them into a memory with the glosses as text, print the reconstruction MAP and "
                               "hierarchical searches, write the inspector page. events: a small hierarchy of "
                               "time-stamped events. Both are saved as SQLite and JSON.")
    from_demo.add_argument("--out", help="output folder (default: out/hypermem-demo); the files are "
                           "DATASET.db, .json and .html")
    from_demo.add_argument("-o", "--output", metavar="STEM", help="write STEM.db, STEM.json and STEM.html "
                           "instead (the NumPy reference's `hypermem demo -o STEM`)")
    from_demo.add_argument("--dataset", default="mammals", choices=_demo_names(), help="which demo "
                           "(default: %(default)s)")
    from_demo.add_argument("--config", help="mammals: the Lightning config, a file or a shipped name "
                           "(default: mammals_poincare)")
    from_demo.add_argument("--epochs", type=_positive_int, help="mammals: train this many epochs (default: the "
                           "config's)")
    from_demo.add_argument("--runs", help="mammals: TensorBoard logs and checkpoints folder (default: runs)")
    from_demo.add_argument("--no-progress", action="store_true", help="mammals: hide the progress bar")
    from_demo.add_argument("--no-inspector", action="store_true", help="do not write the HTML inspector")
    from_demo.add_argument("--open", action="store_true", help="open the inspector in a browser")
    from_demo.set_defaults(func=_cmd_demo)

    p = sub.add_parser("inspect", help="write the HTML inspector of a saved memory",
                       description="Write one self-contained offline HTML page: Poincaré disk, time slider, "
                       "sortable table, collapsible tree, filter.")
    _memory_arg(p)
    p.add_argument("-o", "--output", help="the page to write (default: MEMORY with .html)")
    p.add_argument("--title", help="page title")
    p.add_argument("--layout", choices=LAYOUTS, default="auto", help="disk layout (default: %(default)s)")
    p.add_argument("--at", type=_time_arg, help="time of the weights shown first (ISO 8601; default: now)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.set_defaults(func=_cmd_inspect)

    p = sub.add_parser("tree", help="print the hierarchy", description="Print the hierarchy as indented text.")
    _memory_arg(p)
    p.add_argument("--root", help="print only the subtree of this memory id")
    p.add_argument("--max-text", type=_positive_int, default=60, help="cut texts to this length (default: 60)")
    p.set_defaults(func=_cmd_tree)

    p = sub.add_parser("search", help="search a saved memory",
                       description="Rank memories by -distance + depth_bias*depth + time_coef*log(weight). "
                       "The file is not changed (no access counts are recorded).")
    _memory_arg(p)
    p.add_argument("query", nargs="?", help="the query text (may be omitted with a structural --mode)")
    p.add_argument("-k", type=_positive_int, default=5, help="how many results (default: 5)")
    p.add_argument("--mode", choices=MODES, default="nearest", help="candidates (default: nearest)")
    p.add_argument("--root", help="the memory id for subtree/children/ancestors/siblings/cone (ancestors without it: what subsumes the query, by the memory's hierarchy encoder)")
    p.add_argument("--metric", choices=METRICS, help="distance (default: the memory's)")
    p.add_argument("--at", type=_time_arg, help="search as of this time (ISO 8601; default: now)")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH", help="the embedder of the query: minilm "
                   "(all-MiniLM-L6-v2, the embed extra), hashing, or the folder of a saved encoder; needed when "
                   "the memory was made with another embedder than the hashing one")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_search)

    p = sub.add_parser("stats", help="summary numbers", description="Counts, levels, depths, times, weights.")
    _memory_arg(p)
    p.add_argument("--at", type=_time_arg, help="weights as of this time (ISO 8601; default: now)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_stats)

    p = sub.add_parser("export", help="export to portable JSON (exact) or a CSV table",
                       description="Export a memory: JSON (everything, exact round trip) or CSV (the table).")
    _memory_arg(p)
    p.add_argument("output", help="the file to write (.json or .csv)")
    p.add_argument("--format", choices=("json", "csv"), help="default: from the output's extension (.json or "
                   ".csv; another extension needs --format)")
    p.add_argument("--indent", type=int, default=None, help="JSON indentation")
    p.add_argument("--at", type=_time_arg, help="CSV weights as of this time (ISO 8601; default: now)")
    p.set_defaults(func=_cmd_export)

    p = sub.add_parser("import", help="memory JSON, or JSON lines of items, to a SQLite memory",
                       description="Write a SQLite memory from a memory JSON file (Memory.to_json) or from "
                       "JSON lines of items ({\"text\", \"id\", \"parent\", \"t\", \"meta\", ...}; parents "
                       "before children), embedded with the hashing embedder.")
    p.add_argument("source", help="memory JSON, or JSON lines / a JSON list of items")
    p.add_argument("output", help="the SQLite memory file to write")
    p.add_argument("--dim", type=_positive_int, default=256, help="hashing embedder dimension for items "
                   "(default: 256)")
    p.add_argument("--half-life", type=_positive_float, default=None, help="decay half-life in hours for items "
                   "(default: no decay)")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(func=_cmd_import)

    # ``train``: everything after it goes to the Lightning CLI (hypermem.train.hierarchy_cli), whose
    # own --help lists the options; "+" as prefix keeps argparse from reading --config and the rest.
    p = sub.add_parser("train", prefix_chars="+", add_help=False,
                       help="train hierarchy embeddings (Lightning; e.g. --config configs/mammals_poincare.yaml)",
                       description="Forward the arguments to `python -m hypermem.train` (LightningCLI).")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the Lightning CLI")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("mcp", help="serve a durable store to agents over the Model Context Protocol",
                       description="An MCP server (the mcp extra) with the tools remember, recall, "
                       "recall_structure, forget, update, list_recent and the resource hypermem://stats, over "
                       "stdio (what desktop agents launch) or streamable HTTP. The store is opened with "
                       "Memory.open: every call is committed before it answers. See docs/mcp.md.")
    p.add_argument("--store", required=True, help="a SQLite database path (created when new) or a "
                   "postgresql:// URL")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at HOST:PORT (or PORT: on "
                   "127.0.0.1) instead of stdio")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH", help="default: the store's own; for a new "
                   "store all-MiniLM-L6-v2 when the embed extra is installed, else hashing (with a warning)")
    p.add_argument("--hierarchy", metavar="PATH", help="a hierarchy encoder's folder (HierarchyEncoder.save): "
                   "remember(parent='auto') then puts a memory under the nearest memory it is-a")
    p.set_defaults(func=_cmd_mcp)

    # Room for more subcommands: add them here with set_defaults(func=...).
    return parser


def _cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from .integrations import mcp_server
    except ImportError as exc:
        raise UserError(f"hypermem mcp needs the mcp extra: pip install 'hypermem-torch[mcp]' ({exc})") from None
    if args.http is not None:
        mcp_server.parse_http(args.http)  # a bad address fails before the store is opened
    auto = None
    if args.hierarchy is not None:
        from .embed.hierarchy_encoder import HierarchyEncoder

        auto = mcp_server.encoder_parent(HierarchyEncoder.load(args.hierarchy))
    memory = mcp_server.open_store(args.store, mcp_server.choose_embedder(args.store, args.embedder))
    try:
        mcp_server.serve(memory, http=args.http, auto_parent=auto)
    finally:
        memory.close()
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from .train.hierarchy_cli import main as train_main

    train_main(list(args.args), prog="hypermem train")
    return 0


def _demo_names() -> list[str]:
    from .demo import DEMOS

    return sorted(DEMOS)


def _error_line(exc: BaseException) -> str | None:
    """The one-line message for a user mistake, or None for an unexpected error (a bug)."""
    if isinstance(exc, UserError):
        return str(exc)
    from .embed.choice import EmbedderMissing
    from .store.backends.durable import StorageError
    from .store.persistence import MemoryFileError

    if isinstance(exc, (EmbedderMissing, StorageError)):
        return str(exc)
    if isinstance(exc, MemoryFileError):
        return f"bad memory file: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"{exc.strerror or exc}: {exc.filename}"
    if isinstance(exc, KeyError):
        return str(exc.args[0]) if exc.args else "unknown key"
    if isinstance(exc, (ValueError, TypeError, ImportError, OSError)):
        return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (argparse exits 2 on a bad option)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        line = None if os.environ.get("HYPERMEM_DEBUG") else _error_line(exc)
        if line is None:
            raise
        print(f"hypermem {args.command}: error: {line}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
