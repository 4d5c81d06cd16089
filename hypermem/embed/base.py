"""The embedder protocol and its input checks.

The built-in embedders are importable from here too, where poincare-memory 0.1.4 documents
them (``poincare_memory.embed.base``); each lives in its own module."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from ..geometry.conversion import as_tensor
from .callable import CallableEmbedder, check_output_kind
from .hashing import HashingEmbedder
from .sentence_transformer import SentenceTransformerEmbedder

__all__ = ["CallableEmbedder", "Embedder", "HashingEmbedder", "SentenceTransformerEmbedder", "check_texts",
           "check_utf8", "embed_checked"]


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into fixed-size Euclidean vectors.

    ``dim`` is the vector size; ``embed(texts)`` returns an array or tensor of shape
    ``(len(texts), dim)``.
    """

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Any:
        """Return an array of shape ``(len(texts), dim)``."""
        ...


def check_texts(texts: Any, what: str = "text") -> list[str]:
    """Return ``texts`` as a list, or raise naming the first text that is not a non-blank string
    that UTF-8 can encode (a lone surrogate such as ``"\\ud83d"`` cannot be saved)."""
    if isinstance(texts, str):
        raise TypeError(f"expected a list of {what}s, got a single string")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{what} #{i} must be a string, got {type(t).__name__}")
        if not t.strip():
            raise ValueError(f"{what} #{i} is blank; a {what} must be a non-empty string")
        if not t.isascii():
            check_utf8(t, f"{what} #{i}")
    return out


def utf8_problem(text: str) -> str | None:
    """Why UTF-8 cannot encode ``text``, in words (``is not valid Unicode: surrogates not allowed
    at position 3 ('\\udce9'), which UTF-8 cannot store (...)``), or ``None`` when it can.  A
    lone surrogate is what ``os.listdir`` / ``os.fsdecode`` give for a file name that is not
    UTF-8 (``b"caf\\xe9"`` -> ``'caf\\udce9'``), or half of an emoji cut in two."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"is not valid Unicode: {exc.reason} at position {exc.start} ({text[exc.start]!r}), which UTF-8 "
                f"cannot store (a lone surrogate: a file name that is not UTF-8, from os.listdir or os.fsdecode, "
                f"or half of an emoji); store os.fsencode(name).decode('utf-8', 'replace') for a file name, "
                f"s.encode('utf-8', 'replace').decode() for any string")
    return None


def check_utf8(text: str, where: str) -> None:
    """Raise a ``ValueError`` naming ``where`` when ``text`` holds a lone surrogate (such as
    ``"\\ud83d"``, half of an emoji): UTF-8 cannot encode it, so no file or database could hold it
    (:func:`utf8_problem`)."""
    bad = utf8_problem(text)
    if bad is not None:
        raise ValueError(f"{where} {bad}")


def embed_checked(embedder: Embedder, texts: Sequence[str], *, return_owned: bool = False):
    """Call ``embedder.embed`` and check the result: a float64 CPU tensor ``(n, dim)``,
    finite, one row per text.

    With ``return_owned=True`` returns ``(tensor, owned)``: ``owned`` is true when nothing
    else can hold the tensor's memory, i.e. the check converted it (a copy) or the
    embedder declares ``returns_fresh_tensors = True`` (a new tensor per call, as
    :class:`~hypermem.embed.HashingEmbedder` does), so the caller may keep it without a copy.
    """
    n = len(texts)
    out = embedder.embed(list(texts))
    owned = getattr(embedder, "returns_fresh_tensors", False) is True
    if type(out) is torch.Tensor and out.dtype == torch.float64 and out.device.type == "cpu" and not out.requires_grad:
        X = out  # already what the store keeps (the common case: no view to make)
    elif isinstance(out, torch.Tensor):
        check_output_kind(out, "the embedder")
        X = out.detach().to(device="cpu", dtype=torch.float64)
        owned = owned or X.data_ptr() != out.data_ptr()
    else:
        check_output_kind(out, "the embedder")
        X = as_tensor(out, dtype=torch.float64, name="the embedder's output")  # any array layout
    dim = int(embedder.dim)
    if X.dim() != 2 or X.shape[0] != n or X.shape[1] != dim:
        raise ValueError(f"the embedder returned shape {tuple(X.shape)}, expected ({n}, {dim})")
    # A sum is finite unless an entry is NaN or inf (or the sum overflows): one cheap
    # reduction, then the exact check only when it fails.
    if not math.isfinite(X.sum().item()) and not bool(torch.isfinite(X).all()):
        bad = int((~torch.isfinite(X)).any(dim=1).nonzero()[0])
        raise ValueError(f"the embedder returned non-finite values (NaN or inf) for text #{bad}")
    return (X, owned) if return_owned else X
