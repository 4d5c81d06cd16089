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
import os
import sys
from pathlib import Path

from .. import __version__
from .inputs import LAYOUTS, METRICS, MODES, UserError, positive_float, positive_int, time_arg
from .store_commands import (
    cmd_export,
    cmd_fit_reranker,
    cmd_import,
    cmd_inspect,
    cmd_search,
    cmd_stats,
    cmd_tree,
)

__all__ = ["build_parser", "main"]


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
    from ..demo import run_demo

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


# ---------------------------------------------------------------------------- parser
def _memory_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("memory", help="a memory: a file of Memory.save (SQLite) or Memory.to_json (JSON), a "
                   "database of Memory.open (SQLite) or a postgresql:// URL (opened read-only)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hypermem", description="hypermem: a hierarchy-aware, time-aware memory "
                                     "in the Poincaré ball.", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n")[1])
    parser.add_argument("--version", action="version", version=f"hypermem {__version__}")
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
    from_demo.add_argument("--epochs", type=positive_int, help="mammals: train this many epochs (default: the "
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
    p.add_argument("--at", type=time_arg, help="time of the weights shown first (ISO 8601; default: now)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("tree", help="print the hierarchy", description="Print the hierarchy as indented text.")
    _memory_arg(p)
    p.add_argument("--root", help="print only the subtree of this memory id")
    p.add_argument("--max-text", type=positive_int, default=60, help="cut texts to this length (default: 60)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("search", help="search a saved memory",
                       description="Rank memories by -distance + depth_bias*depth + time_coef*log(weight). "
                       "The file is not changed (no access counts are recorded).")
    _memory_arg(p)
    p.add_argument("query", nargs="?", help="the query text (may be omitted with a structural --mode)")
    p.add_argument("-k", type=positive_int, default=5, help="how many results (default: 5)")
    p.add_argument("--mode", choices=MODES, default="nearest", help="candidates (default: nearest)")
    p.add_argument("--root", help="the memory id for subtree/children/ancestors/siblings/cone (ancestors without it: what subsumes the query, by the memory's hierarchy encoder)")
    p.add_argument("--metric", choices=METRICS, help="distance (default: the memory's)")
    p.add_argument("--at", type=time_arg, help="search as of this time (ISO 8601; default: now)")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH", help="the embedder of the query: minilm "
                   "(all-MiniLM-L6-v2, the embed extra), hashing, or the folder of a saved encoder; needed when "
                   "the memory was made with another embedder than the hashing one")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("stats", help="summary numbers", description="Counts, levels, depths, times, weights.")
    _memory_arg(p)
    p.add_argument("--at", type=time_arg, help="weights as of this time (ISO 8601; default: now)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("export", help="export to portable JSON (exact) or a CSV table",
                       description="Export a memory: JSON (everything, exact round trip) or CSV (the table).")
    _memory_arg(p)
    p.add_argument("output", help="the file to write (.json or .csv)")
    p.add_argument("--format", choices=("json", "csv"), help="default: from the output's extension (.json or "
                   ".csv; another extension needs --format)")
    p.add_argument("--indent", type=int, default=None, help="JSON indentation")
    p.add_argument("--at", type=time_arg, help="CSV weights as of this time (ISO 8601; default: now)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="memory JSON, or JSON lines of items, to a SQLite memory",
                       description="Write a SQLite memory from a memory JSON file (Memory.to_json) or from "
                       "JSON lines of items ({\"text\", \"id\", \"parent\", \"t\", \"meta\", ...}; parents "
                       "before children), embedded with the hashing embedder.")
    p.add_argument("source", help="memory JSON, or JSON lines / a JSON list of items")
    p.add_argument("output", help="the SQLite memory file to write")
    p.add_argument("--dim", type=positive_int, default=256, help="hashing embedder dimension for items "
                   "(default: 256)")
    p.add_argument("--half-life", type=positive_float, default=None, help="decay half-life in hours for items "
                   "(default: no decay)")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH", help="the embedder of the items (default: "
                   "hashing, --dim); a memory JSON keeps its own embeddings and needs none")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("fit-reranker", help="train a placement reranker on a memory's own tree",
                       description="Train a cross-encoder (the embed extra) on the memory's filed memories: each "
                       "child against the parents of its nearest memories. parent='auto' and suggest_parents "
                       "then re-score their best candidates with it (docs/store.md, \"A placement reranker\").")
    _memory_arg(p)
    p.add_argument("--out", required=True, help="the folder to write (PlacementReranker.save)")
    p.add_argument("--minutes", type=positive_float, help="stop after this many minutes (default: one epoch)")
    p.add_argument("--epochs", type=positive_float, default=1.0, help="passes over the tree (default: 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_fit_reranker)

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
    p.add_argument("--reranker", metavar="PATH", help="a placement reranker's folder (PlacementReranker.save): "
                   "remember(parent='auto') in a store that holds a tree re-scores its best candidates with it")
    p.add_argument("--max-text", type=int, default=32_000, metavar="N", help="the longest text (characters) "
                   "remember and update accept (default 32000)")
    p.set_defaults(func=_cmd_mcp)

    # Room for more subcommands: add them here with set_defaults(func=...).
    return parser


def _cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from ..integrations import mcp_server
    except ImportError as exc:
        raise UserError(f"hypermem mcp needs the mcp extra: pip install 'hypermem-torch[mcp]' ({exc})") from None
    if args.max_text < 1:
        raise UserError(f"--max-text must be at least 1, got {args.max_text}")
    if args.http is not None:  # a bad address, or a port in use, fails before the store is opened
        mcp_server.check_bind(*mcp_server.parse_http(args.http))
    auto = None
    if args.hierarchy is not None:
        from ..embed.hierarchy_encoder import HierarchyEncoder

        auto = mcp_server.encoder_parent(HierarchyEncoder.load(args.hierarchy))
    reranker = None
    if args.reranker is not None:   # loaded (and checked) before the store is opened
        from ..embed.reranker import PlacementReranker

        reranker = PlacementReranker.load(args.reranker)
    memory = mcp_server.open_store(args.store, mcp_server.choose_embedder(args.store, args.embedder))
    memory.reranker = reranker
    try:
        mcp_server.serve(memory, http=args.http, auto_parent=auto, max_text=args.max_text)
    finally:
        memory.close()
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from ..train.hierarchy_cli import main as train_main

    train_main(list(args.args), prog="hypermem train")
    return 0


def _demo_names() -> list[str]:
    from ..demo import DEMOS

    return sorted(DEMOS)


def _error_line(exc: BaseException) -> str | None:
    """The one-line message for a user mistake, or None for an unexpected error (a bug)."""
    if isinstance(exc, UserError):
        return str(exc)
    from ..embed.choice import EmbedderMissing
    from ..store.backends.durable import StorageError
    from ..store.persistence import MemoryFileError

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
    """Run the command line; returns the exit status (argparse exits 2 on a bad option, 141 when
    the reader of the output went away: :func:`_reader_gone`)."""
    try:
        try:
            return _run(argv)
        finally:
            if sys.stdout is not None:
                sys.stdout.flush()  # a reader gone shows here, not in Python's flush at exit
    except BrokenPipeError:
        if os.environ.get("HYPERMEM_DEBUG"):
            raise
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of stdout closed it early (``hypermem tree notes.db | head -1``): stop without
    a word, as a Unix tool does when SIGPIPE ends it.  Stdout now points at ``os.devnull``, so
    Python's own flush at exit finds no closed pipe either (the recipe of the Python docs, "Note
    on SIGPIPE").  The status is 141 (128 + SIGPIPE), what a shell reports for ``seq 1e6 | head``'s
    ``seq``: a script with ``set -o pipefail`` sees a cut output as it does for any Unix tool, and
    a plain pipeline's status is its last command's anyway.  Not 0, which would say that
    everything was written; not 1, this command's status for a mistake it printed."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (stdout replaced in-process)
        pass
    return 141


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise   # not a mistake of the user's: main stops quietly
    except Exception as exc:
        line = None if os.environ.get("HYPERMEM_DEBUG") else _error_line(exc)
        if line is None:
            raise
        line = "; ".join(part.strip() for part in line.splitlines() if part.strip())  # one line, as promised
        print(f"hypermem {args.command}: error: {line}", file=sys.stderr)
        return 1


