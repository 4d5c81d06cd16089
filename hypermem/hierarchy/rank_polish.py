r"""Rank polishing: exact coordinate descent on the reconstruction mean rank, one node at a time.

Training (Nickel & Kiela 2017) lowers a softmax surrogate over a few sampled negatives;
the reconstruction protocol then ranks *all* nodes.  A node pulled towards two far-apart
parents (a second hypernym in another branch) settles where the surrogate balances, which
can leave single pairs ranked in the thousands.  This module moves single nodes to where
the exact protocol counts fewer intruders.

With partners ``R(u)`` (the ancestors of ``u`` in a ``(hyponym, hypernym)`` closure) and
``d`` the Poincaré distance, the summed rank excess is

``S = sum_{(u, v)} #{w not in R(u) + {u} : d(u, w) < d(u, v)} = |pairs| (MR - 1)``,

so lowering ``S`` lowers the mean rank ``MR`` exactly.  Moving one node ``x`` to a new
point changes only three groups of terms:

* ``S_row(x)``: the pairs of ``x``'s own row, ``sum_{v in R(x)} #{w : d(x, w) < d(x, v)}``;
* ``S_intruder(x)``: ``x`` as an intruder in other rows,
  ``#{(w, v) : x not in R(w), w != x, d(w, x) < d(w, v)}``;
* ``S_desc(x)``: the pairs ``(w, x)`` of the rows where ``x`` is a partner,
  ``sum_{w : x in R(w)} #{z not in R(w) + {w} : d(w, z) < d(w, x)}``.

For each node :func:`polish_ranks` scores a set of candidate points (one at hyperbolic
distance 0.7 in a random direction from each partner and from each of the node's few
worst-ranked descendants, then two rounds of random steps of 2, 1, 0.5 and 0.25 around the
best so far) and moves the node when the sum of the three terms drops.  Every move lowers
``S`` (so the mean rank) by the amount reported.  The three terms are non-negative, so
candidates are scored term by term, cheapest first, and one whose partial sum already
reaches the cost of the best point so far is dropped.  The per-node context
(partners, descendants and their key rows) is built once per visit.

Nodes are visited worst first: alternately the query whose row holds the most
excess in pairs ranked above ``min_rank`` and the partner that holds the most.

Distances are compared through the monotone key ``||x - y||^2 / ((1 - c||x||^2)(1 -
c||y||^2))`` of :func:`~hypermem.hierarchy.evaluation.reconstruction`.  ``S_intruder``
needs, for every row ``w``, the number of its pair keys above ``key(w, x)``: all pair keys
are kept as one sorted array of ``w * 400 + log(key)`` (rows apart, each row sorted), and
one :func:`torch.searchsorted` answers every row at once.  The ``log`` is clamped to
``[-199, 199]`` and resolves keys to about ``1e-8`` relative: pairs closer to a tie than
that may be counted on either side, which the final evaluation settles.

The nodes it helps most have a second parent in another branch of the hierarchy: such
pairs hold much of the rank excess that training leaves.  Measured runs (the WordNet nouns):
``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from ..geometry import PoincareBall
from ..geometry.poincare import boundary_gap
from .evaluation import count_below, poincare_rank_key, points_tensor, reconstruction
from .relations import Relations, as_relations

_ROW_SPACING = 400.0
"""Offset between rows in the sorted array of ``row * spacing + log(key)`` keys."""

_LOG_CLAMP = 199.0
"""``log(key)`` is clamped to ``[-_LOG_CLAMP, _LOG_CLAMP]`` so rows never overlap."""

_AROUND = (0.7,)
"""Hyperbolic distances of the random candidates around each partner and worst descendant."""

_REFINE = (2.0, 1.0, 0.5, 0.25)
"""Hyperbolic step lengths of the random candidates around the best point so far."""

_RANK_GROUP = 8
"""Reconstruction blocks ranked between two checks of the time budget (:func:`_pair_ranks`)."""


@dataclass
class PolishReport:
    """What :func:`polish_ranks` did: nodes visited and moved, the summed rank excess before and
    its change (the mean rank changes by ``excess_change / pairs``), the time spent, the pairs
    whose rank it computed (``ranked_pairs``, all passes) and the visit lists it made
    (``lists``).  ``excess_before`` is NaN when the time budget ran out before the first
    ranking was complete (nothing visited then, the points unchanged)."""

    visited: int
    moved: int
    excess_before: float
    excess_change: float
    pairs: int
    seconds: float
    ranked_pairs: int = 0
    lists: int = 0

    @property
    def mean_rank_before(self) -> float:
        return 1.0 + self.excess_before / self.pairs if self.pairs else float("nan")

    @property
    def mean_rank_after(self) -> float:
        return 1.0 + (self.excess_before + self.excess_change) / self.pairs if self.pairs else float("nan")


class _RankState:
    """Points, pairs in CSR form both ways, every pair's key, and the sorted row keys."""

    def __init__(self, x: torch.Tensor, rel: Relations, c: float):
        self.x, self.c, self.n = x, c, rel.n
        self.pairs = rel.pairs
        self.off, self.tgt = rel.csr()
        self.rev = torch.argsort(self.pairs[:, 1], stable=True)  # pair indices grouped by partner
        self.roff = torch.zeros(rel.n + 1, dtype=torch.int64, device=x.device)
        self.roff[1:] = torch.bincount(self.pairs[:, 1], minlength=rel.n).cumsum(0)
        self.row = self.pairs[:, 0]
        self.row_end = self.off[1:]
        self.row_len = self.off[1:] - self.off[:-1]
        self._key_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
        self.key = self.pair_keys(torch.arange(self.pairs.shape[0], device=x.device))
        self.sorted_keys = torch.empty(self.pairs.shape[0], dtype=torch.float64, device=x.device)
        self.max_key = torch.full((rel.n,), -math.inf, dtype=x.dtype, device=x.device)
        self._refresh_rows(torch.arange(rel.n, device=x.device))
        self._visit: _Visit | None = None

    @staticmethod
    def _row_keys(rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``row * spacing + log(key)``: sorting these sorts by row, then by key within a row."""
        return rows.to(torch.float64) * _ROW_SPACING + torch.log(keys.to(torch.float64)).clamp(-_LOG_CLAMP, _LOG_CLAMP)

    def _segments(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For the CSR rows ``rows``: each of their pairs' position in ``rows`` and pair index."""
        lens = self.row_len[rows]
        local = torch.repeat_interleave(torch.arange(rows.numel(), device=rows.device), lens)
        shift = torch.repeat_interleave(self.off[rows] - (lens.cumsum(0) - lens), lens)
        return local, shift + torch.arange(local.numel(), device=rows.device)

    def _refresh_rows(self, rows: torch.Tensor) -> None:
        """Re-sort the keys of ``rows`` into their segments of :attr:`sorted_keys` (ascending
        :meth:`_row_keys`) and refresh their :attr:`max_key`: the rows' pairs, taken in row
        order, sorted together, fill exactly those segments."""
        rows = rows.unique()
        _, idx = self._segments(rows)
        self.sorted_keys[idx] = self._row_keys(self.row[idx], self.key[idx]).sort().values
        self.max_key[rows] = -math.inf
        self.max_key.scatter_reduce_(0, self.row[idx], self.key[idx], "amax")

    def keys(self, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        """``(m, n)`` keys of the evaluation.  The key function caches ``p``'s norms by tensor
        object; :meth:`move` changes :attr:`x` in place, so it drops the one kept for ``x``."""
        if p is not self.x:
            return poincare_rank_key(self.c)(q, p)
        if self._key_fn is None:
            self._key_fn = poincare_rank_key(self.c)
        return self._key_fn(q, p)

    def pair_keys(self, idx: torch.Tensor) -> torch.Tensor:
        """The same key for the listed pairs only (row by row, no ``(m, n)`` block)."""
        a, b = self.x[self.pairs[idx, 0]], self.x[self.pairs[idx, 1]]
        a2, b2 = (a * a).sum(-1), (b * b).sum(-1)
        sq_diff = (a2 + b2 - 2.0 * (a * b).sum(-1)).clamp(min=0.0)
        return sq_diff / (boundary_gap(a2, self.c) * boundary_gap(b2, self.c))

    def partners(self, u: int) -> torch.Tensor:
        return self.tgt[self.off[u]:self.off[u + 1]]

    def reverse_pairs(self, u: int) -> torch.Tensor:
        return self.rev[self.roff[u]:self.roff[u + 1]]

    def visit(self, u: int) -> _Visit:
        """What the costs of ``u``'s candidates share (kept until ``u`` or another node moves)."""
        if self._visit is not None and self._visit.u == u:
            return self._visit
        n, dev = self.n, self.x.device
        anc = self.partners(u)
        related = torch.zeros(n, dtype=torch.bool, device=dev)
        related[anc] = True
        related[u] = True
        desc = self.pairs[self.reverse_pairs(u), 0]
        skip = torch.zeros(n, dtype=torch.bool, device=dev)
        skip[desc] = True
        skip[u] = True
        dw = None
        if desc.numel():  # keys from each descendant w to every z, w's partners and w itself at inf
            dw = self.keys(self.x[desc], self.x)
            local, idx = self._segments(desc)
            dw[local, self.tgt[idx]] = math.inf
            dw[torch.arange(desc.numel(), device=dev), desc] = math.inf
        self._visit = _Visit(u, anc, related, desc, skip, dw)
        return self._visit

    def cost(self, u: int, cand: torch.Tensor, bound: float = math.inf) -> torch.Tensor:
        """``S_row + S_intruder + S_desc`` (module docstring) with ``u`` at each row of ``cand``.

        The three terms are non-negative, so a candidate whose partial sum already reaches
        ``bound`` cannot cost less than ``bound``: it gets ``inf`` and its remaining terms are
        skipped (the others are exact)."""
        v = self.visit(u)
        m, dev = cand.shape[0], cand.device
        d = self.keys(cand, self.x)
        d[:, u] = math.inf
        # S_row: each unrelated w is closer than the partners whose key is above its own; only
        # the w below the farthest partner count
        total = torch.zeros(m, dtype=torch.float64, device=dev)
        k = v.anc.numel()
        if k:
            # the candidates' partner keys as one sorted array of ``i * spacing + log(key)``
            d_anc = d[:, v.anc]
            flat = self._row_keys(torch.arange(m, device=dev)[:, None], d_anc).sort(dim=1).values.flatten()
            ii, ww = torch.nonzero(d < d_anc.amax(1, keepdim=True), as_tuple=True)
            keep = ~v.related[ww]
            ii, ww = ii[keep], ww[keep]
            above = (ii + 1) * k - torch.searchsorted(flat, self._row_keys(ii, d[ii, ww]), right=True)
            total.index_add_(0, ii, above.to(torch.float64))
        alive = torch.nonzero(total < bound).squeeze(1)
        # S_intruder: rows of the nodes that do not have u as a partner
        if alive.numel():
            da = d[alive]
            ii, ww = torch.nonzero((da < self.max_key[None, :]) & ~v.skip[None, :], as_tuple=True)
            total.index_add_(0, alive[ii], self._count_above(ww, da[ii, ww]))
            alive = alive[total[alive] < bound]
        # S_desc: rank of (w, u) in the rows of u's descendants
        if alive.numel() and v.dw is not None:
            dx, order = self.keys(self.x[v.desc], cand[alive]).sort(dim=1)  # (|desc|, alive)
            below = count_below(v.dw, dx)
            total[alive] += torch.zeros_like(below).scatter_(1, order, below).sum(0).to(torch.float64)
        total[total >= bound] = math.inf
        return total

    def _count_above(self, rows: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """``#{v in R(w) : key(w, v) > q}`` for each ``(w, q)``: one :func:`torch.searchsorted`
        of ``w * spacing + log(q)`` in :attr:`sorted_keys` answers every row at once."""
        return (self.row_end[rows] - torch.searchsorted(self.sorted_keys, self._row_keys(rows, q),
                                                        right=True)).to(torch.float64)

    def move(self, u: int, point: torch.Tensor) -> None:
        """Put ``u`` at ``point`` and refresh the keys of its pairs and of the rows they sit in."""
        self.x[u] = point
        self._visit = None
        self._key_fn = None
        rev = self.reverse_pairs(u)
        idx = torch.cat([torch.arange(int(self.off[u]), int(self.off[u + 1]), device=self.x.device), rev])
        self.key[idx] = self.pair_keys(idx)
        rows = torch.cat([torch.tensor([u], device=self.x.device), self.pairs[rev, 0]])
        self._refresh_rows(rows)


@dataclass
class _Visit:
    """Per-node context of :meth:`_RankState.cost`: partners, the related and skipped masks,
    the descendants and their key rows."""

    u: int
    anc: torch.Tensor
    related: torch.Tensor
    desc: torch.Tensor
    skip: torch.Tensor
    dw: torch.Tensor | None


def _steps_around(ball: PoincareBall, y: torch.Tensor, lengths, per_length: int,
                  g: torch.Generator) -> torch.Tensor:
    """Random points at the given hyperbolic distances from ``y`` (``per_length`` each)."""
    lengths = torch.tensor(lengths, dtype=y.dtype, device=y.device).repeat_interleave(per_length)
    v = torch.randn(lengths.numel(), y.shape[0], generator=g, dtype=y.dtype).to(y.device)
    v = v / v.norm(dim=1, keepdim=True) * (lengths / ball.lambda_x(y))[:, None]
    return ball.expmap(y[None].expand(v.shape[0], -1), v)


def _candidates(state: _RankState, ball: PoincareBall, u: int, worst_desc: torch.Tensor,
                g: torch.Generator) -> torch.Tensor:
    x = state.x[u]
    out = [x[None]]
    for a in state.partners(u).tolist() + worst_desc.tolist():
        out.append(_steps_around(ball, state.x[a], _AROUND, 1, g))
    return ball.project(torch.cat(out))


def _visit_order(rel: Relations, ranks: torch.Tensor, min_rank: float) -> list[int]:
    """Nodes with a pair ranked above ``min_rank``, worst first: alternately the query whose
    row holds the most excess in such pairs and the partner that holds the most."""
    bad = (ranks - 1.0) * (ranks > min_rank)
    dev = ranks.device
    by_query = torch.zeros(rel.n, dtype=torch.float64, device=dev).index_add_(0, rel.pairs[:, 0], bad)
    by_partner = torch.zeros(rel.n, dtype=torch.float64, device=dev).index_add_(0, rel.pairs[:, 1], bad)
    queries = [u for u in torch.argsort(by_query, descending=True).tolist() if by_query[u] > 0]
    partners = [u for u in torch.argsort(by_partner, descending=True).tolist() if by_partner[u] > 0]
    order = [u for pair in zip(queries, partners) for u in pair]
    return order + queries[len(partners):] + partners[len(queries):]


def _pair_ranks(x: torch.Tensor, rel: Relations, ball: PoincareBall, deadline: float | None,
                chunk_size: int | None = None, group: int = _RANK_GROUP) -> tuple[torch.Tensor | None, int]:
    """Every pair's rank, ``reconstruction(x, rel, ball, per_pair=True).pair_ranks``, and the
    number of pairs ranked; ``None`` for the ranks when ``time.perf_counter()`` reaches
    ``deadline`` first (checked before each run of ``group`` blocks of ``chunk_size`` queries).

    The runs follow reconstruction's own blocks (queries by number of partners, its default
    block size unless ``chunk_size``), and a row's ranks depend on its own partners alone, so
    each pair's rank comes out of the same distance block as in one call: the same numbers."""
    if deadline is None:
        return reconstruction(x, rel, ball, chunk_size=chunk_size, per_pair=True).pair_ranks, rel.pairs.shape[0]
    n = rel.n
    offsets, _ = rel.csr()
    counts = offsets[1:] - offsets[:-1]
    queries = torch.nonzero(counts > 0).flatten()
    queries = queries[torch.argsort(counts[queries], stable=True)]  # reconstruction's order
    chunk = chunk_size or max(1, min(4096, (1 << 25) // max(n, 1)))  # and its default block
    ranks = torch.zeros(rel.pairs.shape[0], dtype=torch.float64, device=x.device)
    done = 0
    for at in range(0, int(queries.numel()), chunk * group):
        if time.perf_counter() >= deadline:
            return None, done
        keep = torch.zeros(n, dtype=torch.bool, device=x.device)
        keep[queries[at:at + chunk * group]] = True
        idx = torch.nonzero(keep[rel.pairs[:, 0]]).flatten()   # the rows' pairs, in order
        part = Relations(rel.pairs[idx], nodes=rel.nodes, device=x.device)
        ranks[idx] = reconstruction(x, part, ball, chunk_size=chunk, per_pair=True, progress=False).pair_ranks
        done += int(idx.numel())
    return ranks, done


def polish_ranks(points: Mapping[Hashable, object] | torch.Tensor,
                 closure: Sequence[tuple[Hashable, Hashable]] | Relations, *,
                 nodes: Sequence[Hashable] | None = None, ball: PoincareBall | None = None,
                 max_seconds: float | None = None, max_nodes: int | None = None,
                 min_rank: float = 100.0, max_descendants: int = 300, worst_descendants: int = 4,
                 refine_rounds: int = 2, passes: int = 1, seed: int = 0, pair_ranks: torch.Tensor | None = None,
                 log: Callable[[str], None] | None = None) -> tuple[torch.Tensor, PolishReport]:
    """Move single nodes so the reconstruction mean rank drops (see the module docstring).

    Parameters
    ----------
    points:
        Poincaré points, an ``(n, d)`` tensor in the order of ``nodes`` (or of the
        :class:`Relations` nodes when ``closure`` is one), or a ``node -> point`` mapping.
    closure:
        ``(u, v)`` pairs as for :func:`~hypermem.hierarchy.evaluation.reconstruction`.
    nodes:
        The node of each row of a tensor ``points`` (as for
        :func:`~hypermem.hierarchy.evaluation.reconstruction`; default: the :class:`Relations` nodes).
    ball:
        The ball of the points (default: curvature 1).
    max_seconds, max_nodes:
        Stop after this much time / this many visited nodes (``None``: no limit; the
        visit list holds every node with a pair ranked above ``min_rank``, queries and
        partners alternately, worst first).  The time includes the per-pair ranks, which are
        computed in runs of reconstruction blocks with the budget checked before each: a
        budget spent before the first ranking is complete returns the points unchanged
        (``report.excess_before`` NaN); one spent in a later pass's ranking, the points so far.
    min_rank:
        Only pairs ranked above this count towards a node's priority, and only nodes with
        such a pair are visited (once each): lower it when the time budget outlasts the list
        (on the nouns, 100 lists ~3,100 nodes, 5 about 46,000).
    max_descendants:
        Skip nodes that are the partner of more than this many pairs (their ``S_desc``
        costs a distance row per pair).
    worst_descendants:
        Candidates also lie around this many of the node's worst-ranked descendants.
    refine_rounds:
        Rounds of random steps around the best candidate.
    seed:
        Seed of those random steps (the same seed and budget give the same points).
    passes:
        Lists to work through: when one is done within the limits, the per-pair ranks are
        computed again and the nodes listed afresh.
    pair_ranks:
        Every pair's rank if already known (``reconstruction(..., per_pair=True)``); computed
        otherwise (counted in the time).
    log:
        Called with a progress line every 100 nodes.

    Returns the polished ``(n, d)`` points (a new tensor, same dtype and device) and a
    :class:`PolishReport` whose ``excess_change / pairs`` is the exact change of the mean
    rank (up to the ``1e-8`` ties of the module docstring).

    Example (``d`` has two parents, ``b`` and ``c``, but sits among ``b``'s children)::

        >>> import torch
        >>> from hypermem.hierarchy import Relations, reconstruction
        >>> closure = [("b", "a"), ("c", "a"), ("d", "a"), ("d", "b"), ("d", "c"),
        ...            ("e", "a"), ("e", "b"), ("f", "a"), ("f", "c")]
        >>> rel = Relations(closure)   # nodes a, b, c, d, e, f
        >>> x = torch.tensor([[0.0, 0.0], [0.5, 0.0], [-0.5, 0.0], [0.8, 0.1], [0.8, -0.1], [-0.8, 0.0]],
        ...                  dtype=torch.float64)
        >>> reconstruction(x, rel).mean_rank
        1.5555555555555556
        >>> y, report = polish_ranks(x, rel, min_rank=1)
        >>> reconstruction(y, rel).mean_rank, report.mean_rank_after, report.moved
        (1.0, 1.0, 1)
    """
    start = time.perf_counter()
    ball = ball if ball is not None else PoincareBall(1.0)
    if isinstance(closure, Relations) and nodes is None and not isinstance(points, Mapping):
        nodes = closure.nodes
    x, labels = points_tensor(points, nodes)
    rel = as_relations(closure, nodes=labels, device=x.device)
    if rel.n != x.shape[0]:
        raise ValueError(f"{x.shape[0]} points but {rel.n} nodes in the closure")
    outside = ~ball.is_inside(x)
    if bool(outside.any()):
        bad = int(torch.nonzero(outside)[0])
        raise ValueError(f"point of node {labels[bad]!r} lies outside the Poincaré ball of curvature "
                         f"{ball.curvature}")
    if min_rank < 1:
        raise ValueError(f"min_rank must be at least 1, got {min_rank}")
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    x = x.clone()
    n_pairs = rel.pairs.shape[0]
    deadline = None if max_seconds is None else start + max_seconds
    ranked = 0
    if pair_ranks is None:
        pair_ranks, ranked = _pair_ranks(x, rel, ball, deadline)
        if pair_ranks is None:   # the budget ran out while ranking: nothing visited
            return x, PolishReport(visited=0, moved=0, excess_before=math.nan, excess_change=0.0, pairs=n_pairs,
                                   seconds=time.perf_counter() - start, ranked_pairs=ranked, lists=0)
    elif pair_ranks.shape != (n_pairs,):
        raise ValueError(f"pair_ranks must have shape ({n_pairs},), got {tuple(pair_ranks.shape)}")
    ranks = pair_ranks.to(device=x.device, dtype=torch.float64)
    excess = ranks - 1.0
    state = _RankState(x, rel, ball.curvature)
    order = _visit_order(rel, ranks, min_rank)
    g = torch.Generator().manual_seed(int(seed))
    visited = moved = 0
    lists = 1
    change = 0.0

    def spent() -> bool:
        return (max_nodes is not None and visited >= max_nodes) or (
            max_seconds is not None and time.perf_counter() - start > max_seconds)

    for pass_ in range(passes):
        if pass_:
            if spent():
                break
            fresh, done = _pair_ranks(state.x, rel, ball, deadline)
            ranked += done
            if fresh is None:   # the budget ran out while ranking afresh
                break
            ranks = fresh.to(torch.float64)
            lists += 1
            order = _visit_order(rel, ranks, min_rank)
            if log:
                log(f"polish: pass {pass_ + 1}, {len(order)} nodes listed ({time.perf_counter() - start:.0f}s)")
        seen: set[int] = set()
        for u in order:
            if spent():
                break
            if u in seen:
                continue
            seen.add(u)
            rev = state.reverse_pairs(u)
            if rev.numel() > max_descendants:
                continue
            visited += 1
            worst = state.pairs[rev[torch.argsort(ranks[rev], descending=True)[:worst_descendants]], 0]
            cand = _candidates(state, ball, u, worst, g)
            now = float(state.cost(u, cand[:1])[0])
            cost = state.cost(u, cand[1:], bound=now)
            i = int(torch.argmin(cost))
            best, best_cost = cand[0], now
            if float(cost[i]) < now:
                best, best_cost = cand[1 + i], float(cost[i])
            for _ in range(refine_rounds):
                more = ball.project(_steps_around(ball, best, _REFINE, 4, g))
                c = state.cost(u, more, bound=best_cost)
                j = int(torch.argmin(c))
                if float(c[j]) < best_cost:
                    best, best_cost = more[j], float(c[j])
            if best_cost < now:
                state.move(u, best)
                moved += 1
                change += best_cost - now
            if log and visited % 100 == 0:
                log(f"polish: {visited} nodes visited, {moved} moved, mean rank {change / n_pairs:+.4f} "
                    f"({time.perf_counter() - start:.0f}s)")
    report = PolishReport(visited=visited, moved=moved, excess_before=float(excess.sum()), excess_change=change,
                          pairs=n_pairs, seconds=time.perf_counter() - start, ranked_pairs=ranked, lists=lists)
    return state.x, report
