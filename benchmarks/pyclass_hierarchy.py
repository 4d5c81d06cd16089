"""A second hierarchy for the encoder benchmark, from data on this machine: the class
inheritance of installed Python packages, each class named by the first sentence of its
docstring (a descriptive phrase, not a lemma).

The source files are parsed with :mod:`ast` (nothing is imported or run).  A class's bases
are resolved through its module's own classes and its ``import`` / ``from ... import``
statements (relative imports and re-exports through packages' ``__init__`` files followed);
a base that does not resolve to a parsed class is dropped, as is ``object``.  A class enters
the hierarchy when its docstring's first sentence has at least ``--min-words`` words, does not
open with an argument's description, and no other class has the same sentence (a duplicated sentence names no one entity); an edge
``(child, base)`` when both ends entered.  Entities on no edge are left out.

    python benchmarks/pyclass_hierarchy.py --root .venv/lib/python3.11/site-packages \\
        --packages torch sympy pandas matplotlib networkx transformers --out runs/pyclasses
    python benchmarks/bench_encoder.py --edges runs/pyclasses/edges.tsv --names runs/pyclasses/names.tsv ...

Writes ``edges.tsv`` (child id, parent id) and ``names.tsv`` (id, text); ids are the classes'
dotted paths.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter
from pathlib import Path

SENTENCE = re.compile(r"^(.+?[.!?])(\s|$)", re.S)
ARGUMENT = re.compile(r"^[\w.*]+ \(")
"""A docstring that opens with an argument's description (``name (type): ...``) names no class."""


def first_sentence(doc: str | None) -> str:
    """The docstring's first sentence on one line (up to its first blank line)."""
    if not doc:
        return ""
    para = doc.strip().split("\n\n")[0]
    para = " ".join(para.split())
    m = SENTENCE.match(para)
    s = (m.group(1) if m else para).strip()
    return s[:300]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def parse_module(mod: str, path: Path, is_pkg: bool):
    """``(classes, aliases)``: ``classes`` maps a class's local name to (docstring sentence,
    base expressions as dotted strings); ``aliases`` maps a local name to a dotted path."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, RecursionError):
        return {}, {}
    package = mod if is_pkg else mod.rpartition(".")[0]
    aliases: dict[str, str] = {}
    classes: dict[str, tuple[str, list[str]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    aliases[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join([*up, base] if base else up)
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{base}.{a.name}"
    for node in tree.body:                      # top-level classes only
        if isinstance(node, ast.ClassDef):
            bases = []
            for b in node.bases:
                try:
                    bases.append(ast.unparse(b))
                except Exception:  # noqa: BLE001 - an odd base expression is just dropped
                    continue
            classes[node.name] = (first_sentence(ast.get_docstring(node)), bases)
    return classes, aliases


def build(root: Path, packages: list[str], min_words: int):
    classes: dict[str, tuple[str, list[str], str]] = {}
    aliases: dict[str, dict[str, str]] = {}
    for pkg in packages:
        start = root / pkg
        files = sorted(start.rglob("*.py")) if start.is_dir() else [root / f"{pkg}.py"]
        for f in files:
            if not f.exists() or "test" in f.relative_to(root).parts[1:-1]:
                continue
            mod = module_name(root, f)
            cls, al = parse_module(mod, f, f.name == "__init__.py")
            aliases[mod] = al
            for name, (doc, bases) in cls.items():
                classes[f"{mod}.{name}"] = (doc, bases, mod)

    def resolve(dotted: str, hops: int = 0) -> str | None:
        if dotted in classes:
            return dotted
        if hops > 6:
            return None
        mod, _, name = dotted.rpartition(".")
        while mod:                              # a name re-exported by a module
            if mod in aliases and name.split(".")[0] in aliases[mod]:
                head, _, rest = name.partition(".")
                target = aliases[mod][head] + (f".{rest}" if rest else "")
                if target != dotted:
                    return resolve(target, hops + 1)
            mod, _, top = mod.rpartition(".")
            name = f"{top}.{name}"
        return None

    def base_of(expr: str, mod: str) -> str | None:
        expr = expr.split("[")[0]               # Generic[T] -> Generic
        head, _, rest = expr.partition(".")
        if not rest and f"{mod}.{head}" in classes:
            return f"{mod}.{head}"
        if head in aliases.get(mod, {}):
            return resolve(aliases[mod][head] + (f".{rest}" if rest else ""))
        return None

    counts = Counter(doc for doc, _, _ in classes.values())
    keep = {c for c, (doc, _, _) in classes.items()
            if len(doc.split()) >= min_words and counts[doc] == 1 and not ARGUMENT.match(doc)}
    edges = sorted({(c, b) for c in keep for expr in classes[c][1]
                    if (b := base_of(expr, classes[c][2])) is not None and b in keep and b != c})
    used = {e for pair in edges for e in pair}
    return edges, {c: classes[c][0] for c in sorted(used)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
                                          / "site-packages"))
    ap.add_argument("--packages", nargs="+", required=True)
    ap.add_argument("--min-words", type=int, default=5)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    edges, names = build(Path(args.root), args.packages, args.min_words)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in edges))
    (out / "names.tsv").write_text("".join(f"{e}\t{t}\n" for e, t in names.items()))
    roots = {p for _, p in edges} - {c for c, _ in edges}
    words = sorted(len(t.split()) for t in names.values())
    print(f"{len(names)} classes, {len(edges)} edges, {len(roots)} roots; words per name: median "
          f"{words[len(words) // 2]}, max {words[-1]}; written to {out}/edges.tsv, names.tsv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
