"""The ``hypermem`` argument parser (hypermem.cli): every subcommand, its options and --help."""

from __future__ import annotations

import argparse

from .. import __version__
from .inputs import (
    LAYOUTS,
    MAX_INDENT,
    METRICS,
    MODES,
    filter_arg,
    indent_arg,
    path_arg,
    positive_float,
    positive_int,
    time_arg,
)
from .run_commands import cmd_demo, cmd_mcp, cmd_train
from .store_commands import (
    cmd_export,
    cmd_fit_reranker,
    cmd_import,
    cmd_inspect,
    cmd_search,
    cmd_stats,
    cmd_tree,
)

__all__ = ["DEMO_NAMES", "EPILOG", "build_parser"]

EPILOG = """\
  hypermem demo [--dataset mammals|events]       train, save, inspect and search a demo memory
  hypermem inspect MEMORY [-o PAGE.html]         write the HTML inspector of a saved memory
  hypermem tree MEMORY [--root ID]               print the hierarchy
  hypermem search MEMORY [QUERY] [-k K] [--mode MODE] [--root ID]
  hypermem stats MEMORY [--json]                 summary numbers
  hypermem export MEMORY OUT.json|OUT.csv|-      portable JSON (exact) or a CSV table (by extension or --format)
  hypermem import SOURCE|- OUT.db [--durable]    memory JSON, a memory file or JSON lines, to a SQLite memory
  hypermem fit-reranker MEMORY --out FOLDER      train a placement reranker on a memory's own tree
  hypermem train --config mammals_poincare       train hierarchy embeddings (Lightning; train --help)
  hypermem mcp --store agent.db [--http HOST:PORT]   an MCP server over a durable store (the mcp extra)

An existing output is replaced only where that is safe: see docs/cli.md, "Output files"."""

DEMO_NAMES = ("events", "mammals")
"""The demos of :data:`hypermem.demo.DEMOS`, named here so that building the parser imports no
training code (a test checks that the two agree)."""


class SubParser(argparse.ArgumentParser):
    """A subcommand's parser: a mistyped option is refused under the subcommand's own usage with
    a "did you mean" (difflib), and with :attr:`intermixed` an optional positional may follow the
    options (``hypermem search notes.db -k 3 dog``)."""

    intermixed = False
    _mixing = False

    def parse_known_args(self, args=None, namespace=None):
        if self.intermixed and not self._mixing:
            self._mixing = True
            try:
                ns, extra = self.parse_known_intermixed_args(args, namespace)
            finally:
                self._mixing = False
        else:
            ns, extra = super().parse_known_args(args, namespace)
        if extra and not self._mixing and self.prefix_chars == "-":
            self.error(self.unrecognized(extra))
        return ns, extra

    def unrecognized(self, extra: list[str]) -> str:
        """``unrecognized arguments: ...``, with the nearest option when one is close."""
        import difflib

        line = f"unrecognized arguments: {' '.join(extra)}"
        options = [o for a in self._actions for o in a.option_strings]
        for arg in extra:
            near = difflib.get_close_matches(arg.split("=")[0], options, n=1, cutoff=0.6) if arg[:1] == "-" else []
            if near:
                return f"{line} (did you mean {near[0]}?)"
        return line


# ---------------------------------------------------------------------------- parser
def _memory_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("memory", type=path_arg, help="a memory: a file of Memory.save (SQLite) or Memory.to_json (JSON), a "
                   "database of Memory.open (SQLite) or a postgresql:// URL (opened read-only)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hypermem", description="hypermem: a hierarchy-aware, time-aware memory "
                                     "in the Poincaré ball.", formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"hypermem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=SubParser)

    from_demo = sub.add_parser("demo", help="train, save, inspect and search a demo memory (WordNet mammals)",
                               description="mammals (default): train Poincaré embeddings of the WordNet mammal "
                               "hierarchy with the shipped Lightning config (TensorBoard logs under runs/), load "
                               "them into a memory with the glosses as text, print the reconstruction MAP and "
                               "hierarchical searches, write the inspector page. events: a small hierarchy of "
                               "time-stamped events. Both are saved as SQLite and JSON. A rerun replaces the "
                               "files the demo wrote; any other file in their place is refused without --force.",
                               epilog="example: hypermem demo --dataset events --out out/demo --open")
    from_demo.add_argument("--out", type=path_arg, help="output folder (default: out/hypermem-demo); the files are "
                           "DATASET.db, .json and .html")
    from_demo.add_argument("-o", "--output", type=path_arg, metavar="STEM", help="write STEM.db, STEM.json and STEM.html "
                           "instead (the NumPy reference's `hypermem demo -o STEM`)")
    from_demo.add_argument("--dataset", default="mammals", choices=DEMO_NAMES, help="which demo "
                           "(default: %(default)s)")
    from_demo.add_argument("--config", type=path_arg, help="mammals: the Lightning config, a file or a shipped name "
                           "(default: mammals_poincare)")
    from_demo.add_argument("--epochs", type=positive_int, help="mammals: train this many epochs (default: the "
                           "config's)")
    from_demo.add_argument("--runs", type=path_arg, help="mammals: TensorBoard logs and checkpoints folder (default: runs)")
    from_demo.add_argument("--no-progress", action="store_true", help="mammals: hide the progress bar")
    from_demo.add_argument("--no-inspector", action="store_true", help="do not write the HTML inspector")
    from_demo.add_argument("--open", action="store_true", help="open the inspector in a browser")
    from_demo.add_argument("--force", action="store_true", help="replace files in the way that the demo did not write")
    from_demo.set_defaults(func=cmd_demo)

    p = sub.add_parser("inspect", help="write the HTML inspector of a saved memory",
                       description="Write one self-contained offline HTML page: Poincaré disk, time slider, "
                       "sortable table, collapsible tree, filter. An inspector page written before is "
                       "replaced; any other existing file needs --force.",
                       epilog="example: hypermem inspect notes.db -o notes.html --open")
    _memory_arg(p)
    p.add_argument("-o", "--output", type=path_arg, help="the page to write (default: MEMORY with .html; - for stdout)")
    p.add_argument("--title", help="page title")
    p.add_argument("--layout", choices=LAYOUTS, default="auto", help="disk layout (default: %(default)s)")
    p.add_argument("--at", type=time_arg, help="time of the weights shown first (ISO 8601; default: now)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.add_argument("--force", action="store_true", help="replace an existing file that is not an inspector page")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("tree", help="print the hierarchy", description="Print the hierarchy as indented text.",
                       epilog="example: hypermem tree notes.db --root pets")
    _memory_arg(p)
    p.add_argument("--root", help="print only the subtree of this memory id")
    p.add_argument("--max-text", type=positive_int, default=60, help="cut texts to this length (default: 60)")
    p.set_defaults(func=cmd_tree)

    p = sub.add_parser("search", help="search a saved memory",
                       description="Rank memories by -distance + depth_bias*depth + time_coef*log(weight). "
                       "The file is not changed (no access counts are recorded).",
                       epilog='examples: hypermem search notes.db "the dog was sick" -k 3; '
                       "hypermem search notes.db --mode subtree --root pets")
    p.intermixed = True   # the query may come after the options
    _memory_arg(p)
    p.add_argument("query", nargs="?", help="the query text (may be omitted with a structural --mode)")
    p.add_argument("-k", type=positive_int, default=5, help="how many results (default: 5)")
    p.add_argument("--mode", choices=MODES, default="nearest", help="candidates (default: nearest)")
    p.add_argument("--root", help="the memory id for subtree/children/ancestors/siblings/cone (ancestors without it: what subsumes the query, by the memory's hierarchy encoder)")
    p.add_argument("--metric", choices=METRICS, help="distance (default: the memory's)")
    p.add_argument("--at", type=time_arg, help="search as of this time (ISO 8601; default: now)")
    p.add_argument("--filter", type=filter_arg, metavar="JSON", help='only memories whose metadata match, as '
                   'Memory.search takes it: \'{"user": "u1"}\', \'{"n": {"$gt": 3}}\', $and/$or/$not/$in')
    p.add_argument("--valid-only", action="store_true", help="leave out memories outside their validity window")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH|module:Class", type=path_arg, help="the embedder of "
                   "the query: minilm (all-MiniLM-L6-v2, the embed extra), hashing, the folder of a saved encoder, or "
                   "a class on PYTHONPATH made with no arguments (default: the store's own, hashing or MiniLM, as "
                   "hypermem mcp finds it; PATH or module:Class is needed for another embedder)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("stats", help="summary numbers", description="Counts, levels, depths, times, weights.",
                       epilog="example: hypermem stats notes.db --json")
    _memory_arg(p)
    p.add_argument("--at", type=time_arg, help="weights as of this time (ISO 8601; default: now)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("export", help="export to portable JSON (exact) or a CSV table",
                       description="Export a memory: JSON (everything, exact round trip) or CSV (the table). "
                       "An existing file is replaced only with --force; - writes to stdout.",
                       epilog="example: hypermem export notes.db - --format csv | head")
    _memory_arg(p)
    p.add_argument("output", type=path_arg, help="the file to write (.json or .csv), or - for stdout (with --format)")
    p.add_argument("--format", choices=("json", "csv"), help="default: from the output's extension (.json or "
                   ".csv; another extension needs --format)")
    p.add_argument("--indent", type=indent_arg, default=None, help=f"JSON indentation (0 to {MAX_INDENT} spaces; "
                   "default: one line)")
    p.add_argument("--at", type=time_arg, help="CSV weights as of this time (ISO 8601; default: now)")
    p.add_argument("--raw-csv", action="store_true", help="CSV cells exactly as stored, for a program to read: by "
                   "default a cell starting with = + - @ (not a number), a tab or CR gets a ' before it, so a "
                   "spreadsheet shows it instead of running it as a formula")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="memory JSON, or JSON lines of items, to a SQLite memory",
                       description="Write a SQLite memory from a memory JSON file (Memory.to_json), a memory file\n"
                       "(with --durable: Memory.save, Memory.open) or JSON lines of items ({\"text\", \"id\",\n"
                       "\"parent\", \"t\", \"meta\", ...}; parents before children; the rows of `search --json`),\n"
                       "embedded with --embedder (default: the hashing embedder). SOURCE - reads stdin.\n\n"
                       "OUTPUT is a snapshot (Memory.save) unless --durable makes it a durable store\n"
                       "(Memory.open), the kind `hypermem mcp --store` serves.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  hypermem import notes.jsonl notes.db --embedder minilm\n"
                       "  hypermem export agent.db ex.json && hypermem import ex.json copy.db --durable && "
                       "hypermem mcp --store copy.db\n"
                       "  hypermem import snapshot.db agent.db --durable   # a Memory.save file made servable")
    p.add_argument("source", type=path_arg, help="memory JSON, a memory file (SQLite; with --durable), a postgresql:// URL, or JSON "
                   "lines / a JSON list of items (- for stdin)")
    p.add_argument("output", type=path_arg, help="the SQLite memory file to write, or (with --durable) a postgresql:// URL of a "
                   "database that holds no memories yet")
    p.add_argument("--durable", action="store_true", help="write a durable store (Memory.open: every call "
                   "commits; what hypermem mcp --store serves) instead of a snapshot (Memory.save); an existing "
                   "durable store is never replaced")
    p.add_argument("--dim", type=positive_int, default=None, help="hashing embedder dimension for items "
                   "(default: 256)")
    p.add_argument("--half-life", type=positive_float, default=None, help="decay half-life in hours for items "
                   "(default: no decay)")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH|module:Class", type=path_arg, help="the embedder of the "
                   "items (default: hashing, --dim); a memory JSON keeps its own embeddings and needs none")
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("fit-reranker", help="train a placement reranker on a memory's own tree",
                       description="Train a cross-encoder (the embed extra) on the memory's filed memories: each "
                       "child against the parents of its nearest memories. parent='auto' and suggest_parents "
                       "then re-score their best candidates with it (docs/store.md, \"A placement reranker\").",
                       epilog="example: hypermem fit-reranker notes.db --out reranker --minutes 30")
    _memory_arg(p)
    p.add_argument("--out", required=True, type=path_arg, help="the folder to write (PlacementReranker.save)")
    p.add_argument("--minutes", type=positive_float, help="stop after this many minutes (default: one epoch)")
    p.add_argument("--epochs", type=positive_float, default=1.0, help="passes over the tree (default: 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initialisation and the order of the training "
                   "lists (default: %(default)s)")
    p.add_argument("--force", action="store_true", help="replace an existing placement reranker folder at --out")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=cmd_fit_reranker)

    # ``train``: everything after it goes to the Lightning CLI (hypermem.train.hierarchy_cli), whose
    # own --help lists the options; "+" as prefix keeps argparse from reading --config and the rest.
    p = sub.add_parser("train", prefix_chars="+", add_help=False,
                       help="train hierarchy embeddings (Lightning; e.g. --config configs/mammals_poincare.yaml)",
                       description="Forward the arguments to `python -m hypermem.train` (LightningCLI).")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the Lightning CLI")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("mcp", help="serve a durable store to agents over the Model Context Protocol",
                       description="An MCP server (the mcp extra) with the tools remember, recall, "
                       "recall_structure, forget, update, list_recent and the resource hypermem://stats, over "
                       "stdio (what desktop agents launch) or streamable HTTP. The store is opened with "
                       "Memory.open: every call is committed before it answers. See docs/mcp.md.",
                       epilog="example: hypermem mcp --store agent.db --http 8765")
    p.add_argument("--store", required=True, type=path_arg, help="a SQLite database path (created when new) or a "
                   "postgresql:// URL")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at HOST:PORT (or PORT: on "
                   "127.0.0.1) instead of stdio")
    p.add_argument("--embedder", metavar="minilm|hashing|PATH|module:Class", type=path_arg, help="default: the store's "
                   "own; for a new store all-MiniLM-L6-v2 when the embed extra is installed, else hashing (with a "
                   "warning); module:Class is an embedder written in Python, made with no arguments")
    p.add_argument("--hierarchy", metavar="PATH", type=path_arg, help="a hierarchy encoder's folder (HierarchyEncoder.save): "
                   "remember(parent='auto') then puts a memory under the nearest memory it is-a")
    p.add_argument("--reranker", metavar="PATH", type=path_arg, help="a placement reranker's folder (PlacementReranker.save): "
                   "remember(parent='auto') in a store that holds a tree re-scores its best candidates with it")
    p.add_argument("--max-text", type=int, default=32_000, metavar="N", help="the longest text (characters) "
                   "remember and update accept (default 32000)")
    p.set_defaults(func=cmd_mcp)

    # Room for more subcommands: add them here with set_defaults(func=...).
    return parser


