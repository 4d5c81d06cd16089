"""The inputs of :func:`~hypermem.hierarchy.encoder_training.fit_hierarchy_encoder` checked before
any model is loaded: ``edges`` (and ``validation_edges``) sequences of ``(child, parent)`` pairs,
``names`` a mapping ``id -> text`` with a non-blank string for each id; ids compared as text
(``str(id)``; a NumPy or torch scalar by its value), in the edges and in the keys of ``names`` alike.
A validation of fewer than :data:`MIN_VALIDATION_PAIRS` positive pairs is warned about
(:func:`warn_few_validation_pairs`)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping

__all__ = ["checked_inputs", "checked_edges", "as_id", "checked_fraction", "warn_few_validation_pairs",
           "MIN_VALIDATION_PAIRS"]


def checked_fraction(value, message: str, *, one: bool = True) -> float:
    """A setting that is a real number in ``[0, 1]`` (``one=False``: ``[0, 1)``), a NumPy or 0-d
    torch scalar too, as a float; a bool, a string, NaN or a value out of range is a
    ``ValueError`` with ``message``."""
    if isinstance(value, (bool, str, bytes)):
        raise ValueError(message)
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if not (0.0 <= x <= 1.0 if one else 0.0 <= x < 1.0):
        raise ValueError(message)
    return x

MIN_VALIDATION_PAIRS = 20
"""Below this many positive validation pairs, the threshold (and ``lambda``) chosen on them is
warned about: the threshold is the score that best splits those few positives from their
negatives, so with one or two positives it sits just under their scores (F1 1.0) and a store
filing with ``parent="auto"`` keeps almost nothing under a parent."""


def warn_few_validation_pairs(n: int, carved: bool, n_train: int) -> None:
    """A ``UserWarning`` at the line that called :func:`fit_hierarchy_encoder` when its validation
    holds ``n`` < :data:`MIN_VALIDATION_PAIRS` positive pairs (``carved``: the 5% held out of
    ``edges``, ``n_train`` edges left for training)."""
    if n >= MIN_VALIDATION_PAIRS:
        return
    how = (f"5% of edges held out, {n_train} left to train on" if carved else "validation_edges, or val_size")
    warnings.warn(f"fit_hierarchy_encoder: the validation holds {n} positive pair(s) ({how}); the encoder's "
                  f"threshold and lambda are chosen on them, and below {MIN_VALIDATION_PAIRS} pairs the "
                  "threshold is unreliable (a store filing with parent='auto' may place almost nothing): pass "
                  f"validation_edges= with {MIN_VALIDATION_PAIRS} or more (child, parent) pairs (pairs left out "
                  "of edges are best)", UserWarning, stacklevel=3)


def checked_inputs(edges, names, validation_edges):
    """``(edges, names, validation_edges)`` with every id as ``str(id)``, or a ``TypeError`` /
    ``ValueError`` naming the argument and the first bad item (before any model is loaded)."""
    if not isinstance(names, Mapping):
        raise TypeError(f"names must be a mapping id -> text (a dict), got {type(names).__name__}")
    texts: dict[str, str] = {}
    keys: dict[str, object] = {}
    for key, text in names.items():
        k = as_id(key)
        if k in keys:
            raise ValueError(f"names has two keys for the id {k!r}: {keys[k]!r} and {key!r} (ids are compared "
                             "as text, str(id), in the edges and in names alike)")
        if not isinstance(text, str):
            raise TypeError(f"the name of id {key!r} in names must be a string, got {type(text).__name__} {text!r}")
        if not text.strip():
            raise ValueError(f"the name of id {key!r} in names is blank; a name must be a non-empty string")
        keys[k], texts[k] = key, text
    train = checked_edges(edges, "edges", texts)
    if not train:
        raise ValueError("edges is empty: there are no training edges (pass (child, parent) pairs)")
    if validation_edges is not None:
        validation_edges = checked_edges(validation_edges, "validation_edges", texts)
        if not validation_edges:
            raise ValueError("validation_edges is empty: pass at least one (child, parent) pair, or None to "
                             "hold out 5% of edges for validation")
    return train, texts, validation_edges


def checked_edges(edges: Iterable, what: str, names: Mapping[str, str]) -> list[tuple[str, str]]:
    if isinstance(edges, (Mapping, str, bytes)) or not isinstance(edges, Iterable):
        hint = " (for a dict child -> parent, pass list(d.items()))" if isinstance(edges, Mapping) else ""
        raise TypeError(f"{what} must be a sequence of (child, parent) pairs, got {type(edges).__name__}{hint}")
    out = []
    for i, edge in enumerate(edges):
        if isinstance(edge, (str, bytes, Mapping, set, frozenset)) or not hasattr(edge, "__len__"):
            raise TypeError(f"{what}[{i}] = {edge!r} is not a (child, parent) pair: each edge is a "
                            "(child, parent) pair (a tuple, a list or an array row of two ids)")
        if len(edge) != 2:
            raise ValueError(f"{what}[{i}] = {edge!r} has {len(edge)} items: each edge is a (child, parent) pair")
        out.append((as_id(edge[0]), as_id(edge[1])))
    missing = sorted({e for pair in out for e in pair} - set(names))
    if missing:
        raise ValueError(f"{len(missing)} entities of {what} have no name in names, e.g. {missing[:3]} "
                         "(ids are compared as text, str(id))")
    return out


def as_id(x) -> str:
    """An id as text: ``str(x)``, a NumPy or torch scalar by its value (``1``, not ``tensor(1)``)."""
    if getattr(x, "ndim", None) == 0 and hasattr(x, "item"):
        x = x.item()
    return str(x)
