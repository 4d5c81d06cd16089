"""The commands that run something: demo, mcp, train (hypermem.cli)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .inputs import UserError, check_embedder_name, path_text
from .outputs import PAGE_HEAD, head_of

__all__ = ["cmd_demo", "cmd_mcp", "cmd_train"]

_DEMO_FILES = {".db": lambda head: head.startswith(b"SQLite format 3\x00"),
               ".json": lambda head: head.lstrip().startswith(b"{") and b'"config"' in head,
               ".html": lambda head: head.startswith(PAGE_HEAD)}
"""How each file of the demo begins: a rerun replaces such a file, and refuses any other without --force."""


def _check_demo_files(folder: Path, name: str, force: bool) -> None:
    for suffix, written in _DEMO_FILES.items():
        path = folder / f"{name}{suffix}"
        if force and suffix in (".db", ".html") and path.is_file() and not written(head_of(path)):
            path.unlink()   # Memory.save / inspect replace no file of another kind; --force said to replace it
        if force or not (path.exists() or path.is_symlink()):
            continue
        if path.is_dir():
            raise UserError(f"{path} is a folder: the demo writes a file there; choose another --out")
        if not (path.is_file() and written(head_of(path))):
            raise UserError(f"{path_text(path)} exists and is not a file the demo wrote; pass --force to replace it, or "
                            "choose another --out")


def _check_folder(folder: Path, flag: str, given: str) -> None:
    """The demo's folder, or the first part of its path that exists, is a folder (it is created when missing)."""
    for part in (folder, *folder.parents):
        if part.exists():
            if part.is_dir():
                return
            if flag == "--out" and part == folder:
                raise UserError(f"--out {given} is a file: give a folder (it is created when missing)")
            raise UserError(f"{flag} {given}: {part} is a file, not a folder (a missing folder is created)")


def cmd_demo(args: argparse.Namespace) -> int:
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
    from ..demo import check_output_folders, run_demo

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
    _check_folder(Path(out), *(("--out", str(out)) if args.output is None else ("-o", args.output)))
    _check_demo_files(Path(out), name or args.dataset, args.force)
    if args.dataset == "mammals":   # before the training's imports (10 s or more)
        check_output_folders({"--out" if args.output is None else "-o": out, "--runs": training["runs_dir"]})
    result = run_demo(out, dataset=args.dataset, inspector=not args.no_inspector, **training)
    if args.open and result["html"] is not None:
        import webbrowser

        webbrowser.open(Path(result["html"]).resolve().as_uri())
    return 0



def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from ..integrations import mcp_server
    except ImportError as exc:
        raise UserError(f"hypermem mcp needs the mcp extra: pip install 'hypermem-torch[mcp]' ({exc})") from None
    check_embedder_name(args.embedder)
    if args.max_text < 1:
        raise UserError(f"--max-text must be at least 1, got {args.max_text}")
    if args.http is not None:  # a bad address, or a port in use, fails before the store is opened
        mcp_server.check_bind(*mcp_server.parse_http(args.http))
    else:  # a closed stdin or stdout fails before the store is opened (or created)
        mcp_server.check_stdio()
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


def cmd_train(args: argparse.Namespace) -> int:
    from ..train.hierarchy_cli import main as train_main

    train_main(list(args.args), prog="hypermem train")
    return 0
