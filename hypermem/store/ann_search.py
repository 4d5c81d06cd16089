r"""The store's approximate search: HNSW candidates over the directions, re-scored exactly.

:class:`~hypermem.store.search.Searcher` calls these for ``search(use_index=True)`` on a
faiss index (:class:`hypermem.index.ann.DirectionIndex`).  The graph ranks by cosine
alone; the score is ``-g(s) + b`` with the bias ``b`` (time and depth terms) bounded by
its largest value ``b_max``, so a memory outside the candidates can only enter the top-k
if its cosine is at least ``g^{-1}(b_max - t_k)`` (``t_k``: the k-th re-scored score).
:func:`rank_approx` asks the graph for more candidates (four times as many, up to
:data:`MAX_CANDIDATES`) until the last candidate's cosine is below that bound: with an
exact graph the answer is then exact, with HNSW it misses only what the graph misses.
:func:`index_recall` measures that on a sample.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..geometry import poincare as P
from ..geometry.numerics import MIN_WEIGHT
from ..index import ShellDistance, exact_topk
from ..index.ann import DirectionIndex
from ..retrieval.scoring import score_bias
from ..temporal import policy_weights
from .placement import unit

MAX_CANDIDATES = 4096
"""The most graph candidates one query re-scores."""


def sync_index(index: DirectionIndex, state, built_rewrites: int | None) -> None:
    """Bring ``index`` up to ``state``: add the appended rows when nothing else changed
    since it was built at ``built_rewrites`` (:attr:`~hypermem.store.state.MemoryState.rewrites`), else rebuild."""
    keys = state.search_keys()
    if built_rewrites == state.rewrites and len(index) <= state.n:
        index.add(keys[len(index):])
    else:
        index.build(keys)


class CandidateWeights:
    """Time weights and score bias of the rows asked for, at ``now``: the approximate
    search's ``O(k)`` per query instead of the exact search's pass over every memory.
    ``weights[rows]`` is what :meth:`~hypermem.store.search.Searcher.search` reports."""

    def __init__(self, searcher, now):
        self.memory, self.now = searcher.memory, now

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        st = self.memory.state
        return policy_weights(self.memory.decay, self.now, st.time[rows], st.access[rows], st.valid_from[rows],
                              st.valid_until[rows])

    def bias(self, rows: torch.Tensor) -> torch.Tensor:
        """``score_bias`` of ``rows`` (:func:`hypermem.retrieval.scoring.score_bias`)."""
        m = self.memory
        return score_bias(self[rows], m.state.depth[rows], m.time_coef, m.depth_bias)

    def bound(self) -> tuple[torch.Tensor, bool]:
        """An upper bound of every memory's bias, and whether the bias can vary: weights lie
        in ``[MIN_WEIGHT, 1]``, so ``time_coef * log w <= max(0, time_coef * log MIN_WEIGHT)``;
        the depth term is at most ``depth_bias`` times the largest (or smallest) depth."""
        m = self.memory
        depth = m.state.depth[: m.state.n]
        tc, db = m.time_coef, m.depth_bias
        top = max(0.0, tc * math.log(MIN_WEIGHT))
        if db != 0.0:
            top += db * float(depth.max() if db > 0 else depth.min())
        varies = tc != 0.0 or (db != 0.0 and bool(depth.max() > depth.min()))
        return torch.tensor(top, dtype=torch.float64, device=m.device), varies


def rank_approx(memory, index: DirectionIndex, Q: torch.Tensor, bias_of, bound, k: int, oversample: int):
    """Scores, rows and distances ``(B, k)``: each query's graph candidates re-scored in the
    store's dtype (``bias_of(rows)``: their bias), grown until the bias bound (``bound``:
    the largest bias and whether the bias varies) says nothing outside can enter."""
    st = memory.state
    n = st.n
    g = ShellDistance(memory.curvature, memory.base_depth)
    bmax, varies = bound
    out_s, out_i, out_d = [], [], []
    start = min(n, k * oversample)
    for qi in range(Q.shape[0]):
        q = Q[qi: qi + 1]
        K = start
        while True:
            cos, cand = index.search(q, K)
            c = torch.sort(cand[0][cand[0] >= 0]).values.to(memory.device)  # ties: insertion order
            s, local, d = exact_topk(q, st.direction[c], k, g, bias_of(c).to(q.dtype), None)
            if not varies or K >= min(n, max(MAX_CANDIDATES, start)):
                break
            kth = s[0, -1]
            last = cos[0, -1].to(torch.float64)
            if bool(torch.isfinite(kth)) and bool(last < g.inverse((bmax - kth).reshape(1).double())[0]):
                break
            K = min(n, 4 * K)
        out_s.append(s)
        out_i.append(torch.where(local >= 0, c[local.clamp_min(0)], local))
        out_d.append(d)
    return torch.cat(out_s), torch.cat(out_i), torch.cat(out_d)


def index_recall(searcher, queries=None, k: int = 10, sample: int = 100, seed: int = 0, **kwargs: Any) -> float:
    """recall@k of ``search(use_index=True)`` against the exact ``search(use_index=False)``:
    the share of the exact top-k the index path returns, over ``queries`` (default:
    ``sample`` directions halfway between two random stored memories, on the reference
    shell).  Stored on the index as ``recall_estimate``."""
    memory = searcher.memory
    st = memory.state
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ValueError(f"sample must be an integer >= 1, got {sample!r}")
    index = searcher.ensure_index()
    if queries is None:
        if st.n == 0:
            raise ValueError("index_recall needs memories (the store is empty)")
        gen = torch.Generator().manual_seed(int(seed))
        a, b = torch.randint(st.n, (2, sample), generator=gen)
        dirs = unit(st.direction[a.to(memory.device)].double() + st.direction[b.to(memory.device)].double())
        queries = list(P.point_at(dirs.cpu(), memory.base_depth, memory.curvature))
    kwargs = {**kwargs, "touch": False}
    approx = searcher.search_batch(queries, k=k, use_index=True, **kwargs)
    exact = searcher.search_batch(queries, k=k, use_index=False, **kwargs)
    hits = sum(len({r.record.id for r in x} & {r.record.id for r in e}) for x, e in zip(approx, exact))
    total = sum(len(e) for e in exact)
    recall = 1.0 if total == 0 else hits / total
    index.recall_estimate = {"recall": recall, "k": k, "queries": len(queries), "n": st.n,
                             "ef_search": getattr(index, "ef_search", None)}
    return recall
