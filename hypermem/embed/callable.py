"""Wrap any function as an embedder."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..geometry.conversion import as_tensor


@dataclass
class CallableEmbedder:
    """Wrap any ``fn(texts) -> array (n, dim)`` as an :class:`~hypermem.embed.Embedder`.

    Example::

        >>> e = CallableEmbedder(lambda texts: [[len(t), 1.0] for t in texts], dim=2)
        >>> e.embed(["ab", "abc"]).tolist()
        [[2.0, 1.0], [3.0, 1.0]]
    """

    fn: Callable[[Sequence[str]], Any]
    dim: int

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"CallableEmbedder needs a callable, got {type(self.fn).__name__}")
        dim = as_int(self.dim)   # any integer (a NumPy one from a config too), kept as a plain int
        if dim is None or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {self.dim!r}")
        self.dim = int(dim)

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        out = self.fn(list(texts))
        check_output_kind(out, "the embedding function")
        X = out.detach().to("cpu", torch.float64) if isinstance(out, torch.Tensor) else \
            as_tensor(out, dtype=torch.float64, name="the embedding function's output")
        if X.dim() != 2 or X.shape[1] != self.dim or X.shape[0] != len(texts):
            raise ValueError(f"embedding function returned shape {tuple(X.shape)}, "
                             f"expected ({len(texts)}, {self.dim})")
        return X


def as_int(value: Any) -> int | None:
    """``value`` as an ``int`` when it is an integer (a NumPy ``np.int64(8)`` too, through
    ``operator.index`` as ``range`` takes it), else ``None``: a bool, a float (even ``8.0``), a string."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_output_kind(out: Any, who: str) -> None:
    """Refuse an embedder's output that no conversion should take: ``None`` (a ``TypeError``
    saying so, rather than "shape ()"), and complex values (a ``TypeError``: casting to real
    would drop the imaginary part with only NumPy's ``ComplexWarning``).  The dtype is read
    once, the values never: no cost that grows with the output."""
    if out is None:
        raise TypeError(f"{who} returned None, not an array of shape (number of texts, dim)")
    dt = getattr(out, "dtype", None)
    if getattr(dt, "kind", None) == "c" or getattr(dt, "is_complex", False) is True:
        raise TypeError(f"{who} returned complex values ({dt}): an embedding is real; return the real part "
                        f"(x.real) or the magnitude (abs(x)) if that is what it means")
