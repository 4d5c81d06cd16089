r"""Retrieval from a :class:`~hypermem.episodic.MemoryStorage`: scoring by recency,
importance and salience, and eviction (:meth:`RetrievalMixin.forget`).

**Retrieval** (the generative-agents score; Park et al., "Generative Agents", UIST 2023).
Over the candidates ``C`` (memories with ``importance > importance_threshold``: "only memories
above this threshold will be retrieved", the seed's rule)::

    score_i = a * minmax(recency)_i + b * minmax(importance)_i + g * minmax(salience)_i
    minmax(x)_i = (x_i - min_C x) / (max_C x - min_C x)      (1 for every i when max = min)

with ``(a, b, g) = coeffs``.  ``recency_i`` is the last access time (POSIX seconds), or,
with a ``decay`` policy, the policy's weight of that time (e.g. ``HalfLife`` gives
``0.5^(hours since access / h)``; start and end times are the validity window).
``salience_i = -d_shell(q, p_i)``, the shell distance (both points moved to the
reference radius ``rho`` of the hyperbolic store) between the query ``q`` and the
memory's point ``p_i``: with ``s`` the cosine of their directions,
``d_shell = (2/sqrt(c)) arsinh(sinh(sqrt(c) rho) sqrt((1 - s)/2))``
(:class:`hypermem.index.ShellDistance`).  Without a query or an embedder salience is 1.
Ties keep insertion order.  The retrieved memories are accessed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..index import ShellDistance
from ..temporal import policy_weights
from ..temporal.clock import to_seconds
from .episodic_memory import EpisodicMemory, as_count, as_real, check_importance


def minmax(x: torch.Tensor) -> torch.Tensor:
    """``(x - min x) / (max x - min x)``; all ones when ``x`` is constant (or empty)."""
    if x.numel() == 0:
        return x
    lo, hi = x.min(), x.max()
    span = hi - lo
    if not bool(span > 0):
        return torch.ones_like(x)
    return (x - lo) / span


def _check_coeffs(coeffs: Any) -> tuple[float, float, float]:
    """``coeffs`` as three finite floats: a list or tuple, or a 1-D NumPy array or tensor."""
    shape = getattr(coeffs, "shape", None)
    if shape is not None and callable(getattr(coeffs, "tolist", None)) and not isinstance(coeffs, (str, bytes)):
        if len(shape) != 1:
            raise ValueError(f"coeffs must be 3 numbers (recency, importance, salience) in one dimension, "
                             f"got an array of shape {tuple(shape)}")
        coeffs = coeffs.tolist()
    if isinstance(coeffs, (str, bytes)) or not isinstance(coeffs, Sequence):
        raise ValueError(f"coeffs must be 3 numbers (recency, importance, salience): a list, a tuple, or a 1-D "
                         f"NumPy array or tensor, got {coeffs!r}")
    if len(coeffs) != 3:
        raise ValueError(f"coeffs must have 3 numbers (recency, importance, salience), got {len(coeffs)}: "
                         f"{tuple(coeffs)!r}")
    out = []
    for name, c in zip(("recency", "importance", "salience"), coeffs):
        v = as_real(c)
        if v is None or not math.isfinite(v):
            raise ValueError(f"the {name} coefficient must be a finite number, got {c!r}")
        out.append(v)
    return out[0], out[1], out[2]


def _check_count(value: Any, name: str, minimum: int) -> int:
    """``value`` as an int >= ``minimum``: any integer (NumPy's, a 0-d integer tensor), never a bool."""
    v = as_count(value)
    if v is None or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return v


class RetrievalMixin:
    """:meth:`scores`, :meth:`retrieve` and :meth:`forget` of :class:`MemoryStorage`
    (see the module docstring for the score)."""

    def _recency(self, mems: list[EpisodicMemory], device: torch.device) -> torch.Tensor:
        """Raw recency of each memory: last access seconds, or the decay policy's weight."""
        last = torch.tensor([to_seconds(m.last_access) for m in mems], dtype=torch.float64, device=device)
        if self.decay is None:
            return last
        counts = torch.tensor([float(m.access_count) for m in mems], dtype=torch.float64, device=device)
        start = torch.tensor([to_seconds(m.start_time) for m in mems], dtype=torch.float64, device=device)
        end = torch.tensor([to_seconds(m.end_time, math.inf) for m in mems], dtype=torch.float64, device=device)
        return policy_weights(self.decay, self._now(), last, counts, start, end)

    def _salience(self, mems: list[EpisodicMemory], query: str | None, device: torch.device) -> torch.Tensor:
        """``-d_shell(query, memory)`` for each memory; ones without a query or an embedder."""
        if query is None or self.hyperbolic is None or not mems:
            return torch.ones(len(mems), dtype=torch.float64, device=device)
        hyper = self.hyperbolic
        q = hyper.embed_query(query)
        norm = torch.linalg.vector_norm(q)
        if not bool(norm > 0):  # the query embeds to nothing: no information
            return torch.ones(len(mems), dtype=torch.float64, device=device)
        row = {k: r for r, k in enumerate(hyper.ids)}
        rows = torch.tensor([row[self.key_of(m)] for m in mems], dtype=torch.long, device=hyper.device)
        cos = hyper.directions.index_select(0, rows) @ (q / norm)
        dist = ShellDistance(hyper.curvature, hyper.base_depth)(cos)
        return (-dist).to(device=device, dtype=torch.float64)

    def _score(self, query: str | None, coeffs: Any):
        """Candidates (insertion order) and their scores and min-max scaled sub-scores."""
        a, b, g = _check_coeffs(coeffs)
        if query is not None and not isinstance(query, str):
            raise TypeError(f"query must be a string or None, got {type(query).__name__}: {query!r}")
        if query is not None and not query.strip():
            raise ValueError(f"query must be a non-empty string or None, got {query!r}")
        device = self.hyperbolic.device if self.hyperbolic is not None else torch.device("cpu")
        cands = self._ordered(m for m in self.memories if m.importance > self.importance_threshold)
        rec = minmax(self._recency(cands, device))
        imp = minmax(torch.tensor([m.importance for m in cands], dtype=torch.float64, device=device))
        sal = minmax(self._salience(cands, query, device))
        return cands, a * rec + b * imp + g * sal, rec, imp, sal

    def scores(self, query: str | None = None, coeffs: Sequence[float] = (1.0, 1.0, 1.0)) -> list[dict[str, Any]]:
        """What :meth:`retrieve` would rank, without accessing anything: one dict per
        candidate (``memory``, ``score``, ``recency``, ``importance``, ``salience``, the
        last three min-max scaled), best first."""
        with self._lock:
            cands, score, rec, imp, sal = self._score(query, coeffs)
            order = torch.argsort(-score, stable=True).tolist()
            s, r, i, v = score.tolist(), rec.tolist(), imp.tolist(), sal.tolist()
            return [{"memory": cands[j], "score": s[j], "recency": r[j], "importance": i[j], "salience": v[j]}
                    for j in order]

    def retrieve(self, query: str | None = None, n: int = 5,
                 coeffs: Sequence[float] = (1.0, 1.0, 1.0)) -> list[EpisodicMemory]:
        """The ``n`` best memories above ``importance_threshold`` (strictly, as in the seed) by
        ``coeffs[0]*recency + coeffs[1]*importance + coeffs[2]*salience``, each min-max
        scaled over those memories (see the module docstring); they are accessed.

        ``coeffs`` must hold 3 finite numbers: a list, a tuple, or a 1-D NumPy array or tensor
        (``ValueError`` otherwise).  For recall from a long conversation pass ``(0, 0, 1)``
        (salience alone; see docs/episodic.md, "Conversations")."""
        n = _check_count(n, "n", 1)
        with self._lock:
            cands, score, _, _, _ = self._score(query, coeffs)
            if not cands:
                return []
            top = torch.argsort(-score, stable=True)[:n].tolist()
            out = [cands[j] for j in top]
            self.access(out)
            return out

    def forget(self, max_size: int | None = None, threshold: float | None = None,
               keep_context: bool = False) -> list[EpisodicMemory]:
        """Permanently evict the memories with the lowest combined recency and importance.

        ``combined_i = (minmax(recency)_i + importance_i) / 2`` (recency over all stored
        memories, as in :meth:`retrieve`; in ``[0, 1]`` when the importances are).  With ``threshold`` every memory whose
        combined value is below it goes; with ``max_size`` the lowest go until at most
        ``max_size`` are left (ties: the older first).  ``keep_context`` spares the memories
        in context.  Returns the evicted memories, lowest first.

        ``forget()`` with neither (the seed API's call) uses ``threshold =
        importance_threshold / 2``: the least recently accessed memory (recency 0) goes
        exactly when its importance is below ``importance_threshold`` (so :meth:`retrieve`
        would never return it; one exactly at the threshold is kept, though retrieve skips
        it), and, with importances in ``[0, 1]``, the most recently accessed one (recency 1)
        never goes.  ``threshold`` is any finite number (on the importances' scale).
        """
        if max_size is None and threshold is None:
            threshold = self.importance_threshold / 2
        if max_size is not None:
            max_size = _check_count(max_size, "max_size", 0)
        if threshold is not None:
            threshold = check_importance(threshold, "forget(threshold=...)")
        with self._lock:
            mems = self._ordered(self.memories)
            if not mems:
                return []
            rec = minmax(self._recency(mems, torch.device("cpu")))
            imp = torch.tensor([m.importance for m in mems], dtype=torch.float64)
            combined = (rec + imp) / 2
            order = torch.argsort(combined, stable=True).tolist()
            vals = combined.tolist()
            evict: list[EpisodicMemory] = []
            eligible = [j for j in order if not (keep_context and mems[j] in self.context)]
            excess = 0 if max_size is None else max(0, len(mems) - max_size)
            for count, j in enumerate(eligible):
                if count < excess or (threshold is not None and vals[j] < threshold):
                    evict.append(mems[j])
            self._drop(evict)
            return evict
