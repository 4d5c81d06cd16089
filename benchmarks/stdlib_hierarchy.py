"""A third hierarchy of descriptive texts from data on this machine: Python's standard library,
packages over modules over classes, each named by its docstring's first paragraph.

The tree: a root (the library), its top-level modules and packages, each package's modules and
subpackages, and each module's public classes that have a docstring.  Sources are parsed with
:mod:`ast` (nothing is imported or run).  A module or package without a docstring is named
``"<dotted name> module of package <parent>"`` (``"<name> package"``); a class by
``"<Name> class: <first paragraph, at most 300 characters>"``.  Tests, IDLE, tkinter, lib2to3,
ensurepip, turtledemo and the interpreter's build folder are left out, as are private top-level
modules.

    python benchmarks/stdlib_hierarchy.py --root /usr/lib/python3.11 --out runs/walk/stdlib
    python experiments/placement_vote/walk.py runs/walk/stdlib/edges.tsv runs/walk/stdlib/names.tsv ...

Writes ``edges.tsv`` (a ``child, parent`` header, then one edge a line) and ``names.tsv`` (id,
text); ids are dotted names, the root ``stdlib``.
"""

from __future__ import annotations

import argparse
import ast
import os
from pathlib import Path

SKIP = {"test", "tests", "idlelib", "lib2to3", "__pycache__", "site-packages", "dist-packages",
        "config-3.11-x86_64-linux-gnu", "ensurepip", "turtledemo", "tkinter"}
ROOT_TEXT = "the Python 3.11 standard library: modules and packages shipped with the interpreter"


def first_paragraph(doc: str | None) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split()) if doc else ""


def parse(path: str) -> ast.Module | None:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return None


def build(root: str) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """``(names, edges)`` of the library under ``root`` (see the module docstring)."""
    names, edges = {"stdlib": ROOT_TEXT}, []
    for folder, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIP and not d.startswith("."))
        rel = os.path.relpath(folder, root)
        pkg = "stdlib" if rel == "." else rel.replace(os.sep, ".")
        if rel != "." and "__init__.py" not in files:
            subdirs[:] = []   # not a package: nothing below it is importable as part of it
            continue
        for f in sorted(files):
            if not f.endswith(".py") or f == "__init__.py" or (f.startswith("_") and rel == "."):
                continue
            mod = f[:-3] if rel == "." else f"{pkg}.{f[:-3]}"
            tree = parse(os.path.join(folder, f))
            doc = first_paragraph(ast.get_docstring(tree)) if tree is not None else ""
            names[mod] = f"{mod}: {doc}" if doc else f"{mod} module of package {pkg}"
            edges.append((mod, pkg))
            for node in tree.body if tree is not None else ():
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    cdoc = first_paragraph(ast.get_docstring(node))
                    if cdoc:
                        names[f"{mod}.{node.name}"] = f"{node.name} class: " + cdoc[:300]
                        edges.append((f"{mod}.{node.name}", mod))
        for d in subdirs:
            init = os.path.join(folder, d, "__init__.py")
            if os.path.exists(init):
                sub = d if rel == "." else f"{pkg}.{d}"
                tree = parse(init)
                doc = first_paragraph(ast.get_docstring(tree)) if tree is not None else ""
                names[sub] = f"{sub} package: {doc}" if doc else f"{sub} package"
                edges.append((sub, pkg))
    return names, edges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="/usr/lib/python3.11", help="the library's folder")
    ap.add_argument("--out", type=Path, required=True, help="folder for edges.tsv and names.tsv")
    args = ap.parse_args()
    names, edges = build(args.root)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "edges.tsv", "w", encoding="utf-8") as fh:
        fh.write("child\tparent\n" + "".join(f"{c}\t{p}\n" for c, p in edges))
    with open(args.out / "names.tsv", "w", encoding="utf-8") as fh:
        fh.write("".join(f"{i}\t{t.replace(chr(9), ' ')}\n" for i, t in names.items()))
    print(f"{len(names)} entities, {len(edges)} edges; written to {args.out}/edges.tsv, names.tsv")


if __name__ == "__main__":
    main()
