r"""Evaluating hierarchy embeddings: reconstruction (MAP, mean rank) and link prediction (F1).

Reconstruction (Nickel & Kiela, "Poincaré Embeddings for Learning Hierarchical
Representations", NeurIPS 2017, Sec. 4.1).  Every node ``u`` that has partners
``R(u) = {v : (u, v) in closure}`` is a query; all other nodes are ranked by distance
to ``u``.

* **mean rank** — for each pair ``(u, v)``: ``1 + #{w not in R(u), w != u : d(u, w) < d(u, v)}``
  (other related nodes do not count against ``v``), averaged over all pairs;
* **MAP** — the average precision of ``R(u)`` in the ranking of all other nodes,
  ``AP(u) = (1/|R(u)|) sum_k k / rank_k`` where ``rank_k = k + #{unrelated closer than
  the k-th nearest related node}``, averaged over queries.

Ties count in favour of the related node (a strict ``<``).  With WordNet closures in
the ``(hyponym, hypernym)`` orientation (as in the authors' data) every node is queried
for its ancestors; reverse the pairs to query ancestors for their descendants.

The computation is chunked over queries: each chunk takes one ``(B, n)`` block of
distances, places every distance among the (few) related distances of its row with a
batched :func:`torch.searchsorted` and counts with one :func:`torch.bincount` (no sort of
the ``n`` distances), so the 82,115 WordNet nouns evaluate in minutes on a CPU and in
seconds on a GPU.

Link prediction (Ganea, Bécigneul & Hofmann, "Hyperbolic Entailment Cones", ICML 2018,
Sec. 5): a score ``s(u, v)`` (lower = more likely related) and a threshold chosen on
validation pairs to maximise F1, then F1 on test pairs (:func:`best_threshold`,
:func:`f1_at`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..data.dag import CycleError
from ..geometry import PoincareBall
from ..geometry.conversion import as_tensor
from ..geometry.poincare import boundary_gap
from .progress import progress_bar, show_progress
from .relations import Relations, as_relations

PROGRESS_DISTANCES = 1 << 27
"""A :func:`reconstruction` of at least this many query-node distances (about 11,600 nodes all
queried; a few seconds on a CPU) shows a progress bar on a terminal or in a notebook."""


@dataclass
class ReconstructionResult:
    """MAP, mean rank, and the number of queries (nodes with at least one partner) and pairs."""

    mean_average_precision: float
    mean_rank: float
    n_queries: int
    n_pairs: int = 0
    per_query: dict | None = None
    """With ``per_query=True``: ``{"query": index tensor, "ap": AP tensor, "mean_rank": tensor}``."""
    pair_ranks: torch.Tensor | None = None
    """With ``per_pair=True``: the rank of every pair, ``float64``, in the order of
    :attr:`Relations.pairs <hypermem.hierarchy.relations.Relations.pairs>` (sorted by
    ``(u, v)``, duplicates removed)."""

    @property
    def map(self) -> float:
        """Alias of :attr:`mean_average_precision`."""
        return self.mean_average_precision


def euclidean_pairwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """All-pairs Euclidean distances ``(n, d), (m, d) -> (n, m)``."""
    return torch.cdist(x, y)


def poincare_rank_key(c: float) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """All-pairs ``||x - y||^2 / ((1 - c||x||^2)(1 - c||y||^2))``: the Poincaré distance is
    ``arcosh(1 + 2c * key) / sqrt(c)`` (:func:`hypermem.geometry.poincare.arcosh_distance`
    of the same parts), increasing in the key, so ranks are the same and the ``arcosh``
    (several passes over the ``(B, n)`` block) is skipped.  The block is built in place
    (one ``(B, n)`` allocation); ``tests/test_formula_contract.py`` checks it against
    :mod:`hypermem.geometry`."""
    cache: dict = {}

    def key(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        if cache.get("p") is not p:
            p2 = (p * p).sum(-1)
            cache.update(p=p, p2=p2, ip=1.0 / boundary_gap(p2, c))
        q2 = (q * q).sum(-1)
        iq = 1.0 / boundary_gap(q2, c)
        out = q @ p.T
        out.mul_(-2.0).add_(q2[:, None]).add_(cache["p2"][None, :]).clamp_(min=0.0)
        return out.mul_(iq[:, None]).mul_(cache["ip"][None, :])

    return key


def _euclidean_rank_key(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """All-pairs squared Euclidean distances (same ranks as the distances)."""
    out = q @ p.T
    return out.mul_(-2.0).add_((q * q).sum(-1)[:, None]).add_((p * p).sum(-1)[None, :]).clamp_(min=0.0)


def _ball_curvature(distance) -> float | None:
    """The curvature of the Poincaré ball ``distance`` names, or None (another geometry)."""
    if distance is None or (isinstance(distance, str) and distance == "poincare"):
        return 1.0
    if getattr(distance, "geometry", None) == "poincare":  # a HierarchyEmbedding
        return distance.ball.curvature
    if isinstance(distance, PoincareBall):
        return distance.curvature
    return None


def _pairwise_fn(distance) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Turn the ``distance`` argument into an all-pairs function ``(B, d), (n, d) -> (B, n)``
    whose values rank like the distances (reconstruction only needs the ranking)."""
    if isinstance(distance, str) and distance == "euclidean":
        return _euclidean_rank_key
    if getattr(distance, "geometry", None) == "euclidean":
        return _euclidean_rank_key
    c = _ball_curvature(distance)
    if c is not None and not getattr(distance, "learnable", False):
        return poincare_rank_key(c)
    if hasattr(distance, "pairwise_distance"):
        return _as_tensor_output(distance.pairwise_distance)
    if callable(distance):
        # a row-wise distance that broadcasts, like ball.distance (NumPy results are fine)
        fn = _as_tensor_output(distance)
        return lambda q, p: fn(q[:, None, :], p[None, :, :])
    raise ValueError(f"distance must be 'poincare', 'euclidean', an object with pairwise_distance "
                     f"(a PoincareBall) or a broadcasting callable, got {distance!r}")


def _as_tensor_output(fn):
    """``fn`` with its result turned into a tensor on the inputs' device (a user's NumPy
    distance returns arrays)."""
    def wrapped(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        out = fn(q, p)
        if not isinstance(out, torch.Tensor):
            out = torch.as_tensor(np.asarray(out, dtype=np.float64), device=q.device)
        return out
    return wrapped


def points_tensor(points, nodes, device=None) -> tuple[torch.Tensor, list]:
    """``(n, d)`` points and their labels from a mapping ``{node: point}`` (in ``nodes``'
    order when given) or from a tensor (labels ``nodes`` or ``0..n-1``)."""
    if isinstance(points, Mapping):
        labels = list(points.keys()) if nodes is None else list(nodes)
        missing = [n for n in labels if n not in points]
        if missing:
            raise ValueError(f"no point for node {missing[0]!r}")
        rows = [as_tensor(points[n], name=f"points[{n!r}]") for n in labels]
        for n, r in zip(labels, rows):
            if r.dim() != 1 or r.shape != rows[0].shape:
                raise ValueError(f"points must all be vectors of one dimension: node {labels[0]!r} has shape "
                                 f"{tuple(rows[0].shape)}, node {n!r} has shape {tuple(r.shape)}")
        if not rows:
            raise ValueError("points is empty: there is nothing to evaluate")
        x = torch.stack([r.to(rows[0].dtype) for r in rows])
    else:
        x = as_tensor(points, name="points")
        if nodes is None:
            labels = list(range(x.shape[0]))
        else:
            labels = list(nodes)
        if x.dim() != 2 or x.shape[0] != len(labels):
            raise ValueError(f"points must have shape (n, d) with n = {len(labels)} nodes, got {tuple(x.shape)}")
    if device is not None:
        x = x.to(device)
    if not bool(torch.isfinite(x).all()):
        raise ValueError("points contain NaN or infinite values")
    return x, labels


def reconstruction(points: Mapping[Hashable, object] | torch.Tensor,
                   closure: Sequence[tuple[Hashable, Hashable]] | Relations,
                   distance="poincare", *, nodes: Sequence[Hashable] | None = None,
                   chunk_size: int | None = None, device: torch.device | str | None = None,
                   per_query: bool = False, per_pair: bool = False,
                   progress: bool | None = None) -> ReconstructionResult:
    """Reconstruction MAP and mean rank (Nickel & Kiela 2017); see the module docstring.

    Cost: every query ``u`` (a node with partners, ``n_q <= n`` of them) is compared with all
    ``n`` nodes, ``O(n_q n (d + log m))`` for ``d`` dimensions and ``m`` partners a query:
    the ``(B, n)`` distance blocks and the placing of each distance among the row's related
    distances (:func:`count_below`) dominate; a poor embedding (random, early in training) is
    the slow case, as most distances then fall below the farthest partner.  Quadratic in the
    nodes (measured at 5,000-40,000 nodes: benchmarks/RESULTS.md, "Reconstruction cost by size").

    Parameters
    ----------
    points:
        ``node -> point`` mapping, or an ``(n, d)`` tensor whose rows follow ``nodes``
        (or the :class:`Relations` node order when ``closure`` is one).
    closure:
        ``(u, v)`` pairs: ``u`` is a query and ``v`` one of its related nodes.
    distance:
        ``"poincare"`` (unit ball), ``"euclidean"``, a :class:`~hypermem.geometry.PoincareBall`
        or a :class:`~hypermem.hierarchy.model.HierarchyEmbedding` (ranked by a monotone key
        of the distance, one matrix product per block), an object with
        ``pairwise_distance``, or a callable ``f(x, y)`` that broadcasts row-wise.
    nodes:
        The node of each row of a tensor ``points`` (default: the :class:`Relations` node
        order when ``closure`` is one).
    chunk_size:
        Queries per block (default: blocks of about 32 M distances).
    device:
        Where to compute (default: where ``points`` are).
    per_query:
        Also return each query's AP and mean rank (``result.per_query``), to see which
        nodes are badly placed.
    per_pair:
        Also return every pair's rank (``result.pair_ranks``, in the order of the
        :class:`Relations` pairs), e.g. for :func:`~hypermem.hierarchy.rank_polish.polish_ranks`.
    progress:
        A bar over the queries (:mod:`~hypermem.hierarchy.progress`); default: on a terminal
        or in a notebook for at least :data:`PROGRESS_DISTANCES` distances (``n_q n``), else hidden.

    Refuses pairs with a missing id or one number in two types
    (:func:`~hypermem.hierarchy.node_ids.check_node_ids`); warns of a cycle
    (:meth:`Relations.check_acyclic`, naming it): the ranking is defined for any relation,
    but an is-a relation has none, and training refuses one.
    """
    if isinstance(closure, Relations) and nodes is None and not isinstance(points, Mapping):
        nodes = closure.nodes
    x, labels = points_tensor(points, nodes, device)
    c = _ball_curvature(distance)
    if c is not None:
        _check_in_ball(x, labels, c)
    rel = as_relations(closure, nodes=labels, device=x.device)
    try:
        rel.check_acyclic()
    except CycleError as exc:  # the metric is defined for any relation; an is-a one has no cycle
        warnings.warn(f"reconstruction: {exc}; an is-a relation has none and training refuses it: this MAP "
                      f"is not a hierarchy's", UserWarning, stacklevel=2)
    if rel.n != x.shape[0]:
        raise ValueError(f"{x.shape[0]} points but {rel.n} nodes in the closure")
    if rel.pairs.numel() == 0:
        raise ValueError("the closure has no pairs: reconstruction needs at least one related (u, v) pair")
    pair = _pairwise_fn(distance)
    n = rel.n
    offsets, targets = rel.csr()
    counts = offsets[1:] - offsets[:-1]
    queries = torch.nonzero(counts > 0).flatten()
    # queries with similar numbers of partners share a chunk (less padding)
    queries = queries[torch.argsort(counts[queries], stable=True)]
    if chunk_size is None:
        chunk_size = max(1, min(4096, (1 << 25) // max(n, 1)))
    nq = int(queries.numel())
    bar = progress_bar(nq, "reconstruction", "query", show_progress(progress, nq * n >= PROGRESS_DISTANCES))
    ap_sum = 0.0
    aps: list[torch.Tensor] = []
    mranks: list[torch.Tensor] = []
    rank_sum = 0.0
    n_pairs = 0
    pair_ranks = torch.zeros(targets.numel(), dtype=torch.float64, device=x.device) if per_pair else None
    for start in range(0, int(queries.numel()), chunk_size):
        q = queries[start:start + chunk_size]
        b = q.numel()
        with torch.no_grad():
            d = pair(x[q], x).to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        if d.shape != (b, n):
            raise ValueError(f"distance returned shape {tuple(d.shape)}, expected {(b, n)}")
        d[torch.arange(b, device=x.device), q] = math.inf  # the query itself is not ranked
        # related mask of the block, from the CSR lists
        cnt = counts[q]
        m = int(cnt.max())
        col = torch.arange(m, device=x.device)
        valid = col[None, :] < cnt[:, None]
        tidx = (offsets[q][:, None] + col[None, :]).clamp_max(max(targets.numel() - 1, 0))
        tgt = torch.where(valid, targets[tidx], torch.zeros_like(tidx))
        d_rel = torch.gather(d, 1, tgt).masked_fill(~valid, math.inf)
        d_rel, order = d_rel.sort(dim=1)
        # #nodes strictly closer than each related distance, minus the related ones among them
        closer_all = count_below(d, d_rel)
        closer_rel = torch.searchsorted(d_rel, d_rel, side="left")
        unrelated_closer = (closer_all - closer_rel).to(torch.float64)
        k = (col + 1).to(torch.float64)[None, :]
        prec = torch.where(valid, k / (k + unrelated_closer), torch.zeros_like(unrelated_closer))
        ap = prec.sum(1) / cnt.to(torch.float64)
        ranks = torch.where(valid, 1.0 + unrelated_closer, torch.zeros_like(prec)).sum(1)
        if per_pair:  # the k-th nearest partner of a row is pair offsets[q] + order[k]; the
            # padding (infinite) sorts last, so the valid columns stay a prefix of each row
            pair_ranks[torch.gather(tidx, 1, order)[valid]] = (1.0 + unrelated_closer)[valid]
        ap_sum += float(ap.sum())
        rank_sum += float(ranks.sum())
        if per_query:
            aps.append(ap)
            mranks.append(ranks / cnt.to(torch.float64))
        n_pairs += int(cnt.sum())
        if bar is not None:
            bar.update(b)
    if bar is not None:
        bar.close()
    if per_query and aps:
        order = torch.argsort(queries)
        queries = queries[order]
        aps, mranks = [torch.cat(aps)[order]], [torch.cat(mranks)[order]]
    return ReconstructionResult(
        mean_average_precision=ap_sum / nq if nq else float("nan"),
        mean_rank=rank_sum / n_pairs if n_pairs else float("nan"),
        n_queries=nq,
        n_pairs=n_pairs,
        per_query={"query": queries, "ap": torch.cat(aps) if aps else torch.zeros(0, dtype=torch.float64),
                   "mean_rank": torch.cat(mranks) if mranks else torch.zeros(0, dtype=torch.float64)}
        if per_query else None,
        pair_ranks=pair_ranks,
    )


def _check_in_ball(x: torch.Tensor, labels: list, c: float) -> None:
    """Points of a Poincaré evaluation must lie strictly inside the ball ``c ||x||^2 < 1``:
    on or beyond the boundary every distance is infinite or meaningless (and all ties)."""
    bad = (c * (x * x).sum(-1) >= 1.0).nonzero()
    if bad.numel():
        i = int(bad[0])
        raise ValueError(f"{bad.numel()} point(s) are not inside the Poincaré ball of curvature {c:g}: node "
                         f"{labels[i]!r} has norm {float(x[i].norm()):.6g} (radius {c ** -0.5:.6g}); project "
                         f"them (PoincareBall.project) or evaluate with distance='euclidean'")


def count_below(d: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """``out[b, k] = #{w : d[b, w] < thresholds[b, k]}`` for row-wise sorted thresholds.

    The values below each row's largest threshold are gathered and compared with the
    thresholds directly when they are few (a good embedding); otherwise each value is placed between the thresholds of its row (a batched
    :func:`torch.searchsorted` of ``(B, n)`` values into ``(B, m)`` thresholds, ``O(n log m)``
    per row), the bucket sizes are counted with one :func:`torch.bincount`, and their
    cumulative sums are the counts: no sort of the ``n`` distances is needed.
    """
    b, m = thresholds.shape
    # only values below the row's largest finite threshold can count: for a good embedding
    # they are few, and comparing just those is far cheaper than any pass per threshold
    t_max = thresholds.masked_fill(~torch.isfinite(thresholds), -math.inf).amax(1)
    rows, cols = torch.nonzero(d < t_max[:, None], as_tuple=True)
    if rows.numel() * m <= 1 << 25:
        below = d[rows, cols][:, None] < thresholds[rows]  # (C, m)
        out = torch.zeros(b, m, dtype=torch.int64, device=d.device)
        return out.index_add_(0, rows, below.to(torch.int64))
    # bucket j holds the values with exactly j thresholds <= value; d < t_k  <=>  bucket <= k
    bucket = torch.searchsorted(thresholds, d, side="right")
    flat = bucket + (m + 1) * torch.arange(b, device=d.device)[:, None]
    counts = torch.bincount(flat.flatten(), minlength=b * (m + 1)).reshape(b, m + 1)
    return counts.cumsum(dim=1)[:, :m]


# -- link prediction -------------------------------------------------------------------
@dataclass
class LinkPredictionResult:
    """F1 (and precision, recall) at the threshold chosen on validation pairs."""

    f1: float
    precision: float
    recall: float
    threshold: float
    validation_f1: float


def _confusion(scores: torch.Tensor, labels: torch.Tensor, threshold: float) -> tuple[float, float, float]:
    pred = scores <= threshold
    tp = float((pred & labels).sum())
    fp = float((pred & ~labels).sum())
    fn = float((~pred & labels).sum())
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return f, p, r


def best_threshold(scores, labels) -> tuple[float, float]:
    """Threshold ``t`` maximising F1 of the rule "related iff ``score <= t``".

    All candidate thresholds (the sorted scores) are evaluated at once with cumulative
    sums.  Returns ``(t, F1)``; for ties between scores the threshold is the midpoint to
    the next score.
    """
    s = as_tensor(scores, name="scores").flatten()
    y = torch.as_tensor(labels, device=s.device).flatten().bool()
    if s.numel() != y.numel() or s.numel() == 0:
        raise ValueError(f"need as many labels as scores (non-empty), got {s.numel()} and {y.numel()}")
    order = torch.argsort(s)
    s, y = s[order], y[order]
    tp = torch.cumsum(y.to(torch.float64), 0)
    fp = torch.cumsum((~y).to(torch.float64), 0)
    pos = float(y.sum())
    # only cut after the last of a run of equal scores
    last = torch.ones_like(y)
    last[:-1] = s[1:] != s[:-1]
    f1 = torch.where(last, 2 * tp / (tp + fp + pos), torch.zeros_like(tp))
    i = int(torch.argmax(f1))
    t = float(s[i]) if i + 1 == s.numel() else float((s[i] + s[i + 1]) / 2)
    return t, float(f1[i])


def f1_at(scores, labels, threshold: float) -> tuple[float, float, float]:
    """``(F1, precision, recall)`` of the rule "related iff ``score <= threshold``"."""
    s = as_tensor(scores, name="scores").flatten()
    y = torch.as_tensor(labels, device=s.device).flatten().bool()
    return _confusion(s, y, threshold)


def link_prediction(val_scores, val_labels, test_scores, test_labels) -> LinkPredictionResult:
    """Choose the threshold on validation scores, report F1 on test scores (lower score =
    related), as in Ganea et al. (2018)."""
    t, vf = best_threshold(val_scores, val_labels)
    f, p, r = f1_at(test_scores, test_labels, t)
    return LinkPredictionResult(f1=f, precision=p, recall=r, threshold=t, validation_f1=vf)
