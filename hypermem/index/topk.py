r"""Exact top-k of ``score_ij = -g(s_ij, j) + b_j`` with ``s = Q K^T``, in bounded memory.

Every score hypermem ranks by has this shape: a matrix product of query and key vectors,
a distance ``g`` that is a monotone *decreasing* function of the product, and a
per-memory bias ``b`` (``depth_bias * depth + time_coef * log(time_weight)``; ``-inf``
excludes a memory).  For the shell metric ``s`` is the cosine between unit directions
and ``g`` the shell distance (:func:`hypermem.geometry.poincare.shell_distance_from_cosine`);
for the hyperbolic metric ``g`` also depends on the key's norm.

:func:`exact_topk` walks the keys in chunks (memory ``O(B * chunk)``, never ``O(B * N)``)
and keeps a running top-k per query.  When ``g`` does not depend on the key and its
inverse is known, it prunes: with the current k-th best score ``t_q`` and the largest bias
``b_max`` of a chunk, a key can only enter the top-k if ``s_qj >= g^{-1}(b_max - t_q)``.
Each chunk then costs one matrix product and one maximum per group of 64 products
(:func:`passing`): only the groups whose maximum clears their query's threshold (few, once
the thresholds have settled) get their passing products selected and their (costly)
distance and bias evaluated.  Only the first chunk is scored in full, and for a batch it is
small (:func:`first_chunk`).  The answer is exact either way; pruning only
skips work that cannot change it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .products import products

DistanceFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""``g(s, idx)``: distances for products ``s`` against the keys ``idx`` (a ``(C,)`` range
of a chunk, broadcast over queries, or a ``(B, m)`` gather of candidates)."""

InverseFn = Callable[[torch.Tensor], torch.Tensor]
"""``g^{-1}(y)``: smallest product whose distance is at most ``y`` (per query)."""


CHUNK_ROWS = 1 << 16
"""At most this many keys a chunk: a single query's walk prunes after its first chunk instead
of evaluating the distance of every key (at 1M x 256 one search took 97 instead of 105 ms of
CPU, benchmarks/RESULTS.md), and its working buffers stay ``O(chunk)``, not ``O(N)``."""


def _budget_rows(batch: int, budget: int) -> int:
    return int(max(1024, budget // max(1, batch)))


def exact_topk(queries: torch.Tensor, keys: torch.Tensor, k: int, distance: DistanceFn,
               bias: torch.Tensor | None = None, inverse: InverseFn | None = None,
               chunk_elements: int = 1 << 20, max_product: float | None = None,
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact top-k of ``-distance(Q K^T) + bias`` over all keys.

    Parameters
    ----------
    queries: ``(B, d)``.
    keys: ``(N, d)`` (same dtype and device).
    k: number of results per query.
    distance: ``g(s, idx)`` mapping products to distances (see :data:`DistanceFn`).
    bias: ``(N,)`` per-key bias; ``-inf`` excludes a key.  ``None`` means zero.
    inverse: ``g^{-1}`` for a key-independent ``g`` (enables pruning); ``None`` disables it.
    chunk_elements: products held at once (``B * chunk``), bounding memory.
    max_product: an upper bound on every product ``q . k`` (1 for unit directions); with
        pruning and a bias that varies it lets the walk stop early.  ``None`` computes
        ``max ||q|| * max ||k||``.

    Returns
    -------
    scores ``(B, k)``, indices ``(B, k)`` (int64), distances ``(B, k)``; sorted by
    descending score, ties by ascending index.  Excluded or missing entries have score
    ``-inf`` and index ``-1``.  The scan keeps ``k +`` :data:`TIE_PAD` candidates, whose
    scores :func:`rescore` recomputes pair by pair (copies of a key score exactly alike,
    wherever they sit); a query whose ``(k + TIE_PAD)``-th scan score is within the scan's
    rounding (:func:`tie_tolerance`) of its ``k``-th has the batch scanned again with more.
    """
    if queries.dim() != 2 or keys.dim() != 2 or queries.shape[1] != keys.shape[1]:
        raise ValueError(f"queries (B, d) and keys (N, d) must agree, got {tuple(queries.shape)} "
                         f"and {tuple(keys.shape)}")
    B, N = queries.shape[0], keys.shape[0]
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    kk = min(k, N)
    if N == 0 or B == 0 or queries.device.type == "meta":
        return _pad(*scan_topk(queries, keys, kk, distance, bias, inverse, chunk_elements, max_product), k)
    m = min(N, kk + TIE_PAD)
    while True:  # every query each round: a distance may hold per-query terms for the whole batch
        scan_s, scan_i, scan_d = scan_topk(queries, keys, m, distance, bias, inverse, chunk_elements, max_product)
        s, i, d = rescore(queries, keys, scan_i, distance, bias)
        s, i, d = s[:, :kk], i[:, :kk], d[:, :kk]
        if m >= N:
            break
        # complete where the m-th scan score, plus the products' rounding, is below the k-th
        last_s, last_d = scan_s[:, -1], scan_d[:, -1]
        tol = tie_tolerance(queries.shape[1], queries.dtype) * (1 + last_s.abs() + last_d.abs())
        if bool((torch.isneginf(last_s) | (last_s + tol < s[:, -1])).all()):
            break
        m = min(N, 4 * m)
    return _pad(s, i, d, k)


TIE_PAD = 4
"""Candidates the scan keeps past ``k`` (see :func:`rescore`): ties at the k-th place
straddling the cut are settled by index as long as at most this many fall outside it;
more (rare: many copies of one memory) scan the batch again with four times as many."""


def tie_tolerance(dim: int, dtype: torch.dtype) -> float:
    r"""Relative size of the scan's rounding in a score: ``4 sqrt(d) u``.

    A blocked matrix product rounds a dot product of ``d`` terms with an error of typically
    ``sqrt(d) u`` (``u`` the unit roundoff; Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., sec. 3.1: the worst case ``d u`` is seldom approached), and the
    error depends on where the BLAS kernel takes the row from (its edge tiles sum in another
    order), so two copies of one key can score a few ulps apart."""
    return 4.0 * math.sqrt(dim) * torch.finfo(dtype).eps / 2


RESCORE_ELEMENTS = 1 << 18
"""Gathered key elements :func:`pair_products` holds at once: a block that stays in cache
(2 MB at float64) and bounded memory for a large ``B k``."""


def pair_products(queries: torch.Tensor, keys: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``q_b . k_{idx[b, j]}`` ``(B, m)``, each one a sum over the same ``d`` terms in the same
    order whatever the key's place: the product of two vectors depends on them alone (unlike
    a BLAS matrix product's, which depends on the row's tile)."""
    B, m = idx.shape
    step = max(1, RESCORE_ELEMENTS // max(1, m * queries.shape[1]))
    grad = torch.is_grad_enabled() and (queries.requires_grad or keys.requires_grad)
    out = []
    for a in range(0, B, step):
        i = idx[a:a + step]
        kg = keys.index_select(0, i.reshape(-1)).view(i.shape[0], m, -1)
        q = queries[a:a + step].unsqueeze(1)
        out.append((kg * q if grad else kg.mul_(q)).sum(-1))   # in place: no second block
    return out[0] if len(out) == 1 else torch.cat(out) if out else queries.new_zeros((0, m))


def rescore(queries: torch.Tensor, keys: torch.Tensor, idx: torch.Tensor, distance: DistanceFn,
            bias: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""Scores of the scan's candidates ``idx`` ``(B, m)`` (-1: none) recomputed from
    :func:`pair_products`, sorted by descending score, ties by ascending index.

    The scan's products come from a blocked matrix product whose rounding depends on a key's
    position in the store, so copies of one memory (same direction, depth and time) would
    score a few ulps apart and rank by that noise (and differently in a store of another
    size, or in a durable backend that reads the rows in another order).  Recomputed pair by
    pair they score exactly alike, and the index breaks their tie."""
    valid = idx >= 0
    li = idx.clamp_min(0)
    d = distance(pair_products(queries, keys, li), li)
    sc = -d if bias is None else bias[li] - d
    sc = torch.where(valid, sc, torch.full_like(sc, -math.inf))
    return _sort_ties(sc, torch.where(valid, idx, torch.full_like(idx, -1)), torch.where(valid, d, torch.full_like(d, math.inf)))


def scan_topk(queries: torch.Tensor, keys: torch.Tensor, kk: int, distance: DistanceFn,
          bias: torch.Tensor | None, inverse: InverseFn | None, chunk_elements: int,
          max_product: float | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The chunked, pruned walk: the ``kk`` best by the matrix product's scores, sorted by
    descending score, ties by ascending index, as :func:`exact_topk` returns them but
    without its re-score (so copies of one key may rank by rounding noise).  For a scan
    whose candidates are re-scored anyway (:func:`hypermem.index.rescore.mirrored_topk`)."""
    B, N = queries.shape[0], keys.shape[0]
    dev, dt = queries.device, queries.dtype
    best_s = torch.full((B, kk), -math.inf, dtype=dt, device=dev)
    best_i = torch.full((B, kk), -1, dtype=torch.long, device=dev)
    best_d = torch.full((B, kk), math.inf, dtype=dt, device=dev)
    if N == 0 or B == 0:
        return best_s, best_i, best_d
    budget_rows = _budget_rows(B, chunk_elements)
    chunk = min(N, budget_rows, CHUNK_ROWS)
    if chunk > SCREEN:
        chunk -= chunk % SCREEN  # whole groups for the screen
    zero = torch.zeros((), dtype=dt, device=dev)
    state = [best_s, best_i, best_d]

    def merge(rows, sc, idx, d):
        """Fold candidate scores ``sc`` (for query ``rows``; None: all) into the running top-k."""
        if sc.shape[1] > 4 * kk:  # cut a wide block to its top kk first
            sc, pos = _top_first(sc, kk)
            idx, d = torch.gather(idx, 1, pos), torch.gather(d, 1, pos)
        bs, bi, bd = state if rows is None else (t.index_select(0, rows) for t in state)
        all_s = torch.cat([bs, sc], dim=1)
        all_i = torch.cat([bi, idx], dim=1)
        all_d = torch.cat([bd, d], dim=1)
        if by_bias:
            # Chunks come in bias order: put ties in index order first (missing last).
            o = torch.argsort(torch.where(all_i < 0, big, all_i), dim=1, stable=True)
            all_s, all_i, all_d = (torch.gather(t, 1, o) for t in (all_s, all_i, all_d))
        # Otherwise earlier chunks hold smaller indices and come first: a stable sort keeps
        # ties in index order.
        new_s, pos = torch.sort(all_s, dim=1, descending=True, stable=True)
        pos = pos[:, :kk]
        new = (new_s[:, :kk], torch.gather(all_i, 1, pos), torch.gather(all_d, 1, pos))
        for t, v in zip(state, new):
            if rows is None:
                t.copy_(v)
            else:
                t.index_copy_(0, rows, v)

    # With pruning and a bias that varies, walk the keys in descending bias: the first
    # chunk sets strong thresholds, and the walk stops once no remaining key can enter.
    # Only where the products overflow the budget: the sort and the gathers it costs pay
    # off for a batch of queries, not for one query's scan.
    by_bias = bool(inverse is not None and bias is not None and N > budget_rows
                   and bool(bias.max() > bias.min()))
    big = torch.iinfo(torch.long).max
    grad = queries.requires_grad or keys.requires_grad
    buf = None if grad else torch.empty(B * chunk, dtype=dt, device=dev)  # every chunk's products
    if by_bias:
        order = torch.argsort(bias, descending=True)
        if max_product is None:
            max_product = float(queries.norm(dim=1).max() * keys.norm(dim=1).max())
        limit = torch.tensor(max_product, dtype=dt, device=dev)
    bounds = list(_bounds(N, chunk, first_chunk(chunk, kk, B)))
    if bias is not None and not by_bias:
        # every chunk's largest bias, and which are all -inf (excluded: skipped), in one host sync
        bmaxes = torch.stack([bias[start:stop].max() for start, stop in bounds])
        excluded = (bmaxes == -math.inf).tolist()
    for j, (start, stop) in enumerate(bounds):
        if by_bias:
            cidx = torch.sort(order[start:stop]).values  # index order inside the chunk
            b = bias[cidx]
            bmax = bias[order[start]]
            if bool(bmax == -math.inf):
                break
            kc = keys.index_select(0, cidx)
        else:
            cidx = None
            b = None if bias is None else bias[start:stop]
            if b is not None and excluded[j]:
                continue
            bmax = zero if b is None else bmaxes[j]
            kc = keys[start:stop]
        if start > 0 and inverse is not None:
            s_min = inverse(bmax - state[0][:, -1])  # (B,)
            if by_bias and bool((s_min > limit).all()):
                break  # bias only falls from here: nothing left can enter
        w = stop - start
        sims = products(queries, kc, None if buf is None else buf[:B * w].view(B, w))  # (B, C)
        if inverse is None or start == 0:
            idx = torch.arange(start, stop, device=dev) if cidx is None else cidx
            d = distance(sims, idx)
            merge(None, -d if b is None else b.unsqueeze(0) - d, idx.expand(B, -1), d)
            continue
        # A key can only enter if -g(s) + b_max >= t (t: the query's current k-th best
        # score), i.e. s >= s_min.  The screen finds the few passing products, which alone
        # get distance and bias evaluated, packed into a (rows, max passing) block of the
        # rows they occur in.
        r, c, vals = passing(sims, s_min)
        if r.numel() == 0:
            continue
        counts = torch.bincount(r, minlength=B)
        active = counts.nonzero().squeeze(1)
        m = int(counts.max())
        row = torch.searchsorted(active, r)  # r's position among the active rows
        slot = torch.arange(r.numel(), device=dev) - torch.searchsorted(r, r)  # rank within its row
        idx = c + start if cidx is None else cidx[c]
        d = distance(vals, idx)
        sc = -d if b is None else b[c] - d
        block_s = d.new_full((active.numel(), m), -math.inf)
        block_i = idx.new_full((active.numel(), m), -1)
        block_d = d.new_full((active.numel(), m), math.inf)
        block_s[row, slot], block_i[row, slot], block_d[row, slot] = sc, idx, d
        merge(None if active.numel() == B else active, block_s, block_i, block_d)
    return _sort_ties(*state)


SCREEN = 64
"""Width of the column groups whose maxima :func:`passing` compares first."""


def passing(sims: torch.Tensor, s_min: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Rows, columns and values of the products ``sims[r, c] >= s_min[r]``, in row-major order.

    Few products pass once the thresholds have settled, and a broadcast comparison of the
    whole ``(B, C)`` block followed by ``nonzero`` costs several passes over it.  The screen
    compares the maxima of groups of :data:`SCREEN` columns instead (one reduction) and
    then only the groups whose maximum passes, column by column: the same set, exactly.
    Where more than an eighth of the groups pass (thresholds still loose, or a bias that
    varies), it compares every product of the block after all.
    """
    B, C = sims.shape
    if C % SCREEN == 0 and sims.is_contiguous():
        groups = sims.view(B, C // SCREEN, SCREEN)
        r, g = (groups.amax(dim=2) >= s_min.unsqueeze(1)).nonzero().unbind(1)
        if r.numel() * 8 <= B * (C // SCREEN):  # few groups pass: only theirs are compared
            sub = groups.view(-1, SCREEN).index_select(0, r * (C // SCREEN) + g)
            rr, cc = (sub >= s_min.index_select(0, r).unsqueeze(1)).nonzero().unbind(1)
            return (r.index_select(0, rr), g.index_select(0, rr) * SCREEN + cc,
                    sub.view(-1).index_select(0, rr * SCREEN + cc))
    mask = sims >= s_min.unsqueeze(1)  # whole groups or not, or loose thresholds: compare all
    r, c = mask.nonzero().unbind(1)
    return r, c, sims[mask]


FIRST_PRODUCTS = 1 << 16
"""Products of the first chunk, all of which get a distance (a batch of ``B`` queries takes
``FIRST_PRODUCTS // B`` keys, at least ``max(256, 4 k)``)."""


def first_chunk(chunk: int, k: int, batch: int = 1) -> int:
    """Keys of the first chunk, the one scored in full (distance of every product).

    Its k-th best scores set each query's first threshold: the more keys, the stronger
    the threshold (with a bias that varies, a weak one lets many products of the next
    chunk through), but the full evaluation costs ``B * first`` distances.  One query
    takes :data:`FIRST_PRODUCTS` keys (a millisecond of distances); a batch takes a few
    times ``k`` per query, so that its full evaluation costs ``O(B k)``, not ``O(B chunk)``."""
    return min(chunk, max(256, 4 * k, FIRST_PRODUCTS // max(1, batch)))


def _bounds(n: int, chunk: int, first: int):
    """``(start, stop)`` of the chunks: ``first`` keys, then ``chunk`` at a time."""
    start = 0
    while start < n:
        stop = min(n, start + (first if start == 0 else chunk))
        yield start, stop
        start = stop


def _top_first(sc: torch.Tensor, top: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``top`` largest per row, ties broken by position (the lower column wins)."""
    if sc.shape[1] <= 4 * top + 64:
        vals, pos = torch.sort(sc, dim=1, descending=True, stable=True)
        return vals[:, :top], pos[:, :top]
    vals, pos = torch.topk(sc, top, dim=1)
    # Only an exact tie at the cut can make topk's choice differ from the stable order.
    # (On the meta device, shape-only tracing, there are no values to compare.)
    if sc.device.type != "meta" and bool(((sc >= vals[:, -1:]).sum(dim=1) > top).any()):
        vals, pos = torch.sort(sc, dim=1, descending=True, stable=True)
        return vals[:, :top], pos[:, :top]
    return vals, pos


def _sort_ties(s: torch.Tensor, i: torch.Tensor, d: torch.Tensor):
    # Order by descending score, then ascending index; missing entries (-1) last.
    big = torch.iinfo(torch.long).max
    key_i = torch.where(i < 0, torch.full_like(i, big), i)
    order = torch.argsort(key_i, dim=1, stable=True)
    s, i, d = (torch.gather(t, 1, order) for t in (s, i, d))
    order = torch.argsort(-s, dim=1, stable=True)
    s, i, d = (torch.gather(t, 1, order) for t in (s, i, d))
    i = torch.where(torch.isinf(s) & (s < 0), torch.full_like(i, -1), i)
    return s, i, d


def _pad(s, i, d, k):
    extra = k - s.shape[1]
    if extra <= 0:
        return s, i, d
    B = s.shape[0]
    return (torch.cat([s, s.new_full((B, extra), -math.inf)], 1),
            torch.cat([i, i.new_full((B, extra), -1)], 1),
            torch.cat([d, d.new_full((B, extra), math.inf)], 1))
