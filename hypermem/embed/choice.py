"""Embedders by name, and a stand-in for tools that open a store without embedding anything.

``embedder_named("minilm" | "hashing" | PATH)`` is what the command line and the MCP server
take as ``--embedder``: the offline all-MiniLM-L6-v2 (the ``embed`` extra), the hashing
embedder, or a saved encoder: a folder written by
:meth:`~hypermem.embed.hierarchy_encoder.HierarchyEncoder.save` (it holds ``hypermem_encoder.json``)
or any other folder that ``SentenceTransformer`` loads.  :func:`embedder_named` is the one place
that maps a name to an embedder.  It never imports code: ``module:Class`` (an embedder written in
Python, :func:`class_embedder`) is taken where a person names it on a command line (``hypermem
search|import|mcp --embedder``: :func:`names_a_class`), never from a store file's description of
its embedder, so a file cannot make a program import a module.

:class:`StandIn` is the embedder of a memory opened by a command that never embeds
(``hypermem tree|stats|inspect|export``): it has the stored embedder's ``dim`` and
``spec`` (so an export keeps the file's description of its embedder) and refuses to embed,
saying which embedder the memory was made with and how to name it.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from .callable import as_int
from .hashing import HashingEmbedder

__all__ = ["CLASS_PATH", "EMBEDDER_NAMES", "EmbedderMissing", "StandIn", "class_embedder", "class_flag",
           "embedder_named", "names_a_class"]

EMBEDDER_NAMES = ("minilm", "hashing")

CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""``--embedder module:Class`` (``pkg.mod:Outer.Inner`` too), as uvicorn's ``module:app``."""


class EmbedderMissing(RuntimeError):
    """A memory opened without its embedder was asked to embed text."""


class StandIn:
    """The embedder of a store opened for reading structure only: ``dim`` and ``spec`` of
    the stored embedder, no :meth:`embed` (it raises :class:`EmbedderMissing`)."""

    def __init__(self, spec: Mapping[str, Any] | None = None, hint: str = "pass embedder=<the same embedder>"):
        self.spec = None if spec is None else dict(spec)
        self.hint = hint
        self.placed_by = ""   # the hierarchy encoder a store records, once a store is opened with this

    @property
    def dim(self) -> int | None:
        return None if self.spec is None else int(self.spec["dim"])

    def resolve(self, spec: Mapping[str, Any]) -> StandIn | None:
        """For a stored ``spec``: ``None`` when it is a built-in embedder that the loader
        rebuilds itself (the hashing embedder), else a stand-in of that spec."""
        if spec.get("type") == "hashing":
            return None
        out = StandIn(spec, self.hint)
        out.placed_by = self.placed_by
        return out

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        kind = "an unknown embedder" if self.spec is None else f"the embedder {self.spec.get('type')!r}"
        raise EmbedderMissing(f"this memory was made with {kind} (dim {self.dim}) and was opened without it; "
                              f"{self.hint}")


def embedder_named(name: str, dim: int | None = None) -> Any:
    """The embedder called ``name``: ``"minilm"`` (all-MiniLM-L6-v2, offline, 384
    dimensions), ``"hashing"`` (:class:`HashingEmbedder` of ``dim``, default 256) or the path
    of a saved encoder folder (a hierarchy encoder's, else loaded by ``SentenceTransformer``)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"an embedder name is 'minilm', 'hashing' or a folder path, got {name!r}")
    if name.lower() == "minilm":
        from .sentence_transformer import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder()
    if name.lower() == "hashing":
        return HashingEmbedder() if dim is None else HashingEmbedder(dim=dim)
    if not os.path.isdir(name):
        raise ValueError(f"unknown embedder {name!r}: choose 'minilm', 'hashing' or the folder of a saved encoder")
    from .encoder_folder import CONFIG_FILE

    if os.path.lexists(os.path.join(name, CONFIG_FILE)):  # saved by HierarchyEncoder.save (which checks the file)
        from .hierarchy_encoder import HierarchyEncoder

        return HierarchyEncoder.load(name)
    from pathlib import Path

    from .folder_files import scan_folder
    from .sentence_transformer import SentenceTransformerEmbedder

    scan_folder(Path(name))   # no pickle file, no symlink out of the folder
    return SentenceTransformerEmbedder(model_name=name)


def names_a_class(name: str) -> bool:
    """Whether ``--embedder name`` is ``module:Class`` (:data:`CLASS_PATH`) rather than a path: a
    file or folder of that name, which exists, is the path."""
    return CLASS_PATH.fullmatch(name) is not None and not os.path.exists(name)


def class_embedder(name: str) -> Any:
    """``--embedder module:Class``: an embedder written in Python, the class imported (from
    PYTHONPATH or the current folder, which is put first on ``sys.path`` as uvicorn does for its
    ``module:app``) and made with no arguments; a ``ValueError`` (one line, naming the flag) when
    the module is not found, is found but does not import (its own error, or a dependency of it that
    is not installed, named), has no such class, the class fails to make or its object has no
    ``dim`` and ``embed(texts)`` or a ``dim`` that is not an integer >= 2.  The user's choice on the command line only: a store file never
    names a class to import."""
    module, _, qualname = name.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj: Any = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        if missing != module and not module.startswith(missing + "."):   # found; its own import is not
            raise ValueError(f"--embedder {name}: {module!r} needs {missing!r}, which is not installed") from None
        raise ValueError(f"--embedder {name}: cannot import {module!r} ({exc}); the module must be on PYTHONPATH "
                         "or in the current folder") from None
    except Exception as exc:   # the module's own code: a SyntaxError, an error it raises at import
        why = " ".join(str(exc).split())
        raise ValueError(f"--embedder {name}: importing {module!r} failed ({type(exc).__name__}: {why})") from None
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, type):
        raise ValueError(f"--embedder {name}: {module} has no class {qualname!r}")
    try:
        emb = obj()
    except Exception as exc:
        raise ValueError(f"--embedder {name}: {qualname}() failed ({type(exc).__name__}: {exc}); the class is made "
                         "with no arguments: give its arguments defaults, or name a subclass that sets them") from None
    if not callable(getattr(emb, "embed", None)) or not hasattr(emb, "dim"):
        raise ValueError(f"--embedder {name}: a {qualname} has no dim attribute and embed(texts) method")
    dim = as_int(emb.dim)   # the store's rule (store.embedder_dim), said here of the embedder, not of a file
    if dim is None or dim < 2:
        raise ValueError(f"--embedder {name}: a {qualname}'s dim must be an integer >= 2, got {emb.dim!r}")
    return emb


def class_flag(kind: Any) -> str | None:
    """What to pass for a store made with an embedder of type ``kind`` (its spec's ``type``) that was
    written in Python: ``--embedder module:Kind`` (``module:Class`` for a wrapper of a function or of
    LangChain's embeddings); ``None`` for a saved encoder's kinds (named by their folder) and the
    built-in ``hashing``."""
    if kind in ("HierarchyEncoder", "SentenceTransformerEmbedder", "hashing"):
        return None
    return f"--embedder module:{'Class' if kind in ('CallableEmbedder', 'LangChainEmbedder') else kind}"
