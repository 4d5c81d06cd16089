"""The embedder that a store is made with: an ``embed(texts)`` method and an integer ``dim >= 2``."""

from __future__ import annotations

from typing import Any

from ..embed.callable import as_int
from ..embed.choice import StandIn

__all__ = ["check_dim_value", "check_embedder", "check_passed_embedder"]


def check_dim_value(dim: Any, what: str = "the embedder") -> int:
    """``dim`` as an ``int``: any integer (a NumPy ``np.int64(8)`` from a config or an array's
    shape too, through ``operator.index``, as ``range`` takes it), at least 2.  A float is refused
    even when integral (``8.0`` from a JSON or YAML config), as Python's own sizes refuse it, and
    a bool; both are a ``ValueError`` naming the value."""
    out = as_int(dim)
    if out is None:
        fix = f" (int({dim!r}) where a config gave it)" if isinstance(dim, float) and dim.is_integer() else ""
        raise ValueError(f"{what}'s dim must be an integer, got {dim!r}{fix}")
    if out < 2:
        raise ValueError(f"{what} must produce vectors of dimension >= 2, got dim={dim!r}")
    return out


def check_embedder(embedder: Any) -> int:
    """The dimension of ``embedder`` (:func:`check_dim_value`), or a ``TypeError`` when it has no
    ``dim`` or no ``embed(texts)`` method."""
    if not callable(getattr(embedder, "embed", None)) or not hasattr(embedder, "dim"):
        raise TypeError("embedder must have a dim attribute and an embed(texts) method")
    return check_dim_value(embedder.dim)


def check_passed_embedder(embedder: Any) -> None:
    """:func:`check_embedder` of the ``embedder=`` passed to ``Memory.load``, ``Memory.from_json``
    or ``Memory.open``, run before the stored config is read: an embedder that
    ``Memory(embedder=...)`` refuses (a ``dim`` of ``8.0``, no ``embed``) gets the same
    ``TypeError`` / ``ValueError`` naming the embedder, not an error blaming a good file.
    ``None`` (the stored embedder rebuilt) and a :class:`~hypermem.embed.choice.StandIn` (it takes
    the stored ``dim``) are left to the loader."""
    if embedder is not None and not isinstance(embedder, StandIn):
        check_embedder(embedder)
