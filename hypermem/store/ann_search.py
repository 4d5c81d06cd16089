r"""The store's approximate search: HNSW candidates over the directions, re-scored exactly.

:class:`~hypermem.store.search.Searcher` calls these for ``search(use_index=True)`` on a
faiss index (:class:`hypermem.index.bands.BandedDirectionIndex`: one graph per band of
time).  A graph ranks by cosine alone; the score is ``-g(s) + b`` with the bias ``b`` (time
and depth terms) bounded in band ``j`` by ``b_max^{(j)}``, so a memory of that band outside
its candidates can only enter the top-k if its cosine is at least
``g^{-1}(b_max^{(j)} - t_k)`` (``t_k``: the k-th re-scored score so far).  :func:`rank_approx`
asks each band's graph for more candidates (four times as many, up to
:data:`MAX_CANDIDATES`) until its last candidate's cosine is below that bound: with exact
graphs the answer is then exact, with HNSW it misses only what the graphs miss.  A band
still short of its bound at :data:`MAX_CANDIDATES` is finished exactly: every row of it whose
bias alone reaches ``t_k`` is re-scored (:func:`finish_capped`), so the cap never cuts the
answer silently.
:func:`index_recall` measures that on a sample.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..geometry import poincare as P
from ..geometry.numerics import MIN_WEIGHT
from ..index import ShellDistance, exact_topk
from ..index.bands import BAND_MIN_ROWS, BandedDirectionIndex
from ..retrieval.scoring import score_bias
from ..temporal import NoDecay, policy_weights, to_seconds, weight_upper_bound
from .caller_warning import warn_caller
from .placement import unit

MAX_CANDIDATES = 4096
"""The most graph candidates one query re-scores."""


def index_columns(state, start: int = 0) -> dict[str, torch.Tensor]:
    """The columns whose extremes a banded index keeps (rows ``start .. n-1``): what
    :meth:`CandidateWeights.bounds` bounds a band's bias with."""
    n = state.n
    return {"time": state.time[start:n], "valid_from": state.valid_from[start:n],
            "valid_until": state.valid_until[start:n], "depth": state.depth[start:n]}


def sync_index(index: BandedDirectionIndex, state, built: tuple[int, int] | None) -> None:
    """Bring ``index`` up to ``state``: add the appended rows when no point changed since it
    was built at ``built`` (the state's ``(rewrites, edits)`` then), recompute its bands'
    extremes when a time or validity column was edited in place; after a removal or a moved
    point, follow the rows by their ids (:meth:`~hypermem.index.bands.BandedDirectionIndex.relocate`:
    tombstones, moved rows added again), and rebuild only once the tombstones pass
    :data:`MAX_TOMBSTONE_SHARE` of the graphs' entries, or when there is no graph yet."""
    keys = state.search_keys()
    n = state.n
    if built is not None and built[0] == state.rewrites and len(index) <= n:
        m = len(index)
        index.add(keys[m:], state.time[m:n], index_columns(state, m), state.ids[m:n])
        if built[1] != state.edits:
            index.refresh(index_columns(state))
        return
    if built is not None and index.n_bands:
        index.relocate(state.row, state.ids[:n], keys, state.time[:n], index_columns(state))
        if index.tombstone_share <= MAX_TOMBSTONE_SHARE:
            return
        if n >= REBUILD_NOTE_ROWS:
            warn_caller(f"more than {MAX_TOMBSTONE_SHARE:.0%} of the HNSW graphs' entries are tombstones of removed "
                        f"or moved memories: this indexed search first rebuilds the graphs over {n:,} memories "
                        f"(once per that share of removals and edits; build_index() rebuilds them at a time of "
                        f"your choosing)", IndexRebuildWarning)
    index.build(keys, state.time[:n], index_columns(state), state.ids[:n])


class IndexRebuildWarning(UserWarning):
    """An indexed search rebuilt the store's HNSW graphs, their tombstones (removed or moved
    memories) past :data:`MAX_TOMBSTONE_SHARE` of the entries."""


REBUILD_NOTE_ROWS = 50_000
"""Stores from this many memories up say so when the next indexed search rebuilds the graphs
(about a minute at 200,000 memories on two CPU cores)."""

MAX_TOMBSTONE_SHARE = 0.25
"""The share of tombstones in the graphs past which the next indexed search rebuilds them: a
tombstone still costs the graph's search a step, and the rebuild, ``O(n log n)``, is paid
once per ``n / 4`` removals or moved points (amortised ``O(log n)`` each)."""


def auto_bands(memory) -> int:
    """``build_index(bands="auto")``: bands of :data:`~hypermem.index.bands.BAND_MIN_ROWS` rows
    or more (at most :data:`MAX_AUTO_BANDS`) when the time term can vary, else one graph."""
    if memory.time_coef == 0.0 or isinstance(memory.decay, NoDecay):
        return 1
    return max(1, min(MAX_AUTO_BANDS, memory.state.n // BAND_MIN_ROWS))


MAX_AUTO_BANDS = 8


class CandidateWeights:
    """Time weights and score bias of the rows asked for, at ``now``: the approximate
    search's ``O(k)`` per query instead of the exact search's pass over every memory.
    ``weights[rows]`` is what :meth:`~hypermem.store.search.Searcher.search` reports.
    ``now`` (an aware ``datetime`` or POSIX seconds) is kept as seconds: the policy gets the
    same ``now`` from :meth:`bounds` as from the weights."""

    def __init__(self, searcher, now):
        self.memory, self.now = searcher.memory, to_seconds(now)

    def __getitem__(self, rows: torch.Tensor) -> torch.Tensor:
        st = self.memory.state
        return policy_weights(self.memory.decay, self.now, st.time[rows], st.access[rows], st.valid_from[rows],
                              st.valid_until[rows])

    def bias(self, rows: torch.Tensor) -> torch.Tensor:
        """``score_bias`` of ``rows`` (:func:`hypermem.retrieval.scoring.score_bias`)."""
        m = self.memory
        return score_bias(self[rows], m.state.depth[rows], m.time_coef, m.depth_bias)

    def bounds(self, index: BandedDirectionIndex) -> tuple[torch.Tensor, bool]:
        """An upper bound of the bias of every memory of each band ``(n_bands,)``, and whether
        the bias can vary.  The time term ``time_coef * log w``: with ``time_coef > 0`` at most
        the policy's weight at the band's corner
        (:func:`hypermem.temporal.bounds.weight_upper_bound`; 1 for a custom policy), with
        ``time_coef < 0`` at most ``time_coef * log MIN_WEIGHT``; the depth term at most
        ``depth_bias`` times the band's largest (or smallest) depth."""
        m = self.memory
        tc, db = m.time_coef, m.depth_bias
        top = torch.zeros(index.n_bands, dtype=torch.float64)
        if tc > 0.0:
            newest, _ = index.extremes("time")
            _, earliest = index.extremes("valid_from")
            latest, _ = index.extremes("valid_until")
            w = weight_upper_bound(m.decay, self.now, newest, earliest, latest)
            if w is not None:
                top += tc * w.clamp_min(MIN_WEIGHT).log()
        elif tc < 0.0:
            top += tc * math.log(MIN_WEIGHT)
        varies = tc != 0.0
        if db != 0.0:
            hi, lo = index.extremes("depth")
            top += db * (hi if db > 0 else lo)
            depth = m.state.depth[: m.state.n]
            varies = varies or bool(depth.max() > depth.min())
        return top.to(m.device), varies


def exact_bounds(index: BandedDirectionIndex, bias: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """Each band's largest bias from the bias of every memory (the exact path's vector,
    a lexical term included), and whether it varies."""
    top = torch.full((index.n_bands,), -math.inf, dtype=torch.float64)
    top = top.scatter_reduce(0, index.band_of, bias[: len(index)].to("cpu", torch.float64), "amax")
    return top.to(bias.device), bool(bias.max() > bias.min())


def rank_approx(memory, index: BandedDirectionIndex, Q: torch.Tensor, bias_of, bounds, k: int, oversample: int):
    """Scores, rows and distances ``(B, k)``.  For each query: the graph candidates of the band
    with the largest bias bound, then of every other band whose bound is not below the k-th
    score, re-scored in the store's dtype together with the best so far (``bias_of(rows)``:
    their bias); then, round by round, four times as many candidates from each band whose bias
    bound (``bounds``: each band's largest bias, and whether the bias varies) says a memory
    beyond its last candidate could still enter.  A band that would need more than
    :data:`MAX_CANDIDATES` is finished exactly (:func:`finish_capped`) instead of being cut."""
    st = memory.state
    g = ShellDistance(memory.curvature, memory.base_depth)
    bmax, varies = bounds
    top = bmax.to("cpu", torch.float64)
    order = [b for b in torch.argsort(top, descending=True, stable=True).tolist() if index.band_size(b) > 0]
    first = min(st.n, k * oversample)
    cap = max(MAX_CANDIDATES, first)
    band_bias: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    out_s, out_i, out_d = [], [], []
    for qi in range(Q.shape[0]):
        q = Q[qi: qi + 1]
        kept = torch.empty(0, dtype=torch.long, device=memory.device)
        pending = [(order[0], first)]
        later, capped = order[1:], []
        while pending:
            found, last = [kept], []
            for b, K in pending:
                cos, cand = index.search_band(b, q, K)
                found.append(cand[0][cand[0] >= 0].to(memory.device))
                last.append(float(cos[0, -1]))
            c = torch.unique(torch.cat(found))  # a band asked again returns its kept rows too; sorted: ties in insertion order
            s, local, d = exact_topk(q, st.direction[c], k, g, bias_of(c).to(q.dtype), None, max_product=1.0)
            kept = c[local[0][local[0] >= 0]]
            kth = float(s[0, -1])
            need = []
            if varies and math.isfinite(kth):
                cut = g.inverse(top[[b for b, _ in pending]] - kth).tolist()
                need = [(b, K) for (b, K), x, lim in zip(pending, last, cut) if x >= lim and K < index.band_size(b)]
            elif varies:  # fewer than k so far: every band's whole first batch counts
                need = [(b, K) for b, K in pending if K < index.band_size(b)]
            capped += [b for b, K in need if K >= cap]
            pending = [(b, min(index.band_size(b), 4 * K)) for b, K in need if K < cap]
            pending += [(b, min(index.band_size(b), first)) for b in later
                        if not (math.isfinite(kth) and top[b].item() < kth)]
            later = []
        if capped:
            c, s, local, d = finish_capped(memory, index, q, g, bias_of, band_bias, capped, kept, kth, k)
        out_s.append(s)
        out_i.append(torch.where(local >= 0, c[local.clamp_min(0)], local))
        out_d.append(d)
    return torch.cat(out_s), torch.cat(out_i), torch.cat(out_d)


def finish_capped(memory, index, q, g, bias_of, band_bias, bands, kept, kth: float, k: int):
    r"""Candidates ``c`` and ``exact_topk`` over them for one query whose bands ``bands``
    stopped at :data:`MAX_CANDIDATES` before their bound was met: the kept top-k plus every
    row of those bands whose bias alone reaches the k-th score, ``b_r \ge t_k``.  The score
    is ``-g(s) + b_r`` with ``g \ge 0`` (``g(1) = 0``), so a row with ``b_r < t_k`` scores
    below ``t_k`` at any cosine and cannot enter: the answer over these bands is exact, not
    bounded by what their graphs return.  ``band_bias`` caches each band's rows and bias
    (they do not depend on the query)."""
    sel = [kept]
    slack = 1e-6 * (1.0 + abs(kth)) if math.isfinite(kth) else 0.0
    for b in bands:
        if b not in band_bias:
            rows = (index.band_of == b).nonzero().squeeze(1).to(memory.device)
            band_bias[b] = rows, bias_of(rows).to("cpu", torch.float64)
        rows, bias = band_bias[b]
        sel.append(rows[(bias >= kth - slack).to(rows.device)])
    c = torch.unique(torch.cat(sel))
    s, local, d = exact_topk(q, memory.state.direction[c], k, g, bias_of(c).to(q.dtype), None, max_product=1.0)
    return c, s, local, d


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
