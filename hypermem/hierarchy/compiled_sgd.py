r"""Many SGD steps on Nickel & Kiela's loss in one compiled call (CPU, numba).

The update is the one of :func:`~hypermem.hierarchy.fused_sgd.softmax_sgd_step` (itself
geoopt's :class:`~geoopt.optim.RiemannianSGD` on the summed softmax loss of Nickel &
Kiela, NeurIPS 2017, eqs. 4-6), applied batch after batch over a whole epoch of pairs:
for the batch ``b`` (pairs ``s .. s + B``) every gradient is taken at the current points,

``d_bj = arcosh(1 + 2 c ||x - y_j||^2 / ((1 - c||x||^2)(1 - c||y_j||^2))) / sqrt(c)``,
``dL/dd_bj = [j = 0] - softmax(-d_b)_j``,

the updates ``-lr ((1 - c||.||^2)^2 / 4) grad`` are summed per row, added, and the rows
touched are projected back into the ball, before the next batch starts.  The Euclidean
baseline (``geometry="euclidean"``) takes the same steps with ``d_bj = ||x - y_j||``,
``dd/dx = (x - y) / d`` and the plain update ``-lr grad`` (no projection).

In torch every batch costs about 60 small tensor operations, whose dispatch dominates a
CPU epoch at the batch sizes hierarchy embeddings use (32-128 pairs); here the whole
epoch is one loop nest compiled by `numba <https://numba.pydata.org>`_ (the ``fast``
extra), which computes the same numbers (to rounding: sums run in another order).
:func:`compiled_epoch_available` says whether it can run;
:func:`~hypermem.hierarchy.steps.choose_tier` picks the torch steps otherwise (no
numba, a GPU tensor).  A numba kernel cannot call torch, so the distance is a copy of
:func:`hypermem.geometry.poincare.arcosh_distance` in scalar code;
``tests/test_formula_contract.py`` checks the kernel's steps against the torch tiers.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from ..geometry.numerics import ball_margin, tiny
from ..geometry.poincare import project
from .lazy_jit import HAVE_NUMBA, lazy_njit

GEOMETRIES = ("poincare", "euclidean")


def compiled_epoch_available(weight: torch.Tensor, geometry: str = "poincare") -> bool:
    """Whether :func:`softmax_sgd_epoch` can run on ``weight``: numba installed, a CPU
    float32/float64 table, Poincaré or Euclidean geometry."""
    return (HAVE_NUMBA and geometry in GEOMETRIES and weight.device.type == "cpu"
            and weight.dtype in (torch.float32, torch.float64) and weight.dim() == 2)


def softmax_sgd_epoch(weight: torch.Tensor, anchors: torch.Tensor, cand: torch.Tensor, masked_out: torch.Tensor,
                      lr: float, batch_size: int, curvature: float = 1.0, workers: int = 1,
                      geometry: str = "poincare") -> float:
    """Riemannian SGD steps over all pairs, ``batch_size`` pairs a step, in place on
    ``weight`` ``(n, d)``; returns the summed loss.  ``geometry="euclidean"``: plain SGD
    steps on the Euclidean distance (``curvature`` is ignored).

    ``anchors`` ``(P,)``, ``cand`` ``(P, 1 + k)`` (column 0 the positive), ``masked_out``
    ``(P, 1 + k)`` candidates to ignore, as for
    :func:`~hypermem.hierarchy.fused_sgd.softmax_sgd_step`.

    ``workers > 1`` splits the (shuffled) pairs into that many contiguous parts whose
    steps run at the same time in threads (the compiled loop releases the GIL) on the
    shared table, without locks: Hogwild! (Niu, Recht, Ré & Wright, NeurIPS 2011), as in
    Nickel & Kiela's own trainer.  Two steps rarely touch the same row at the same time
    (each touches ``batch_size * (1 + k)`` of ``n`` rows), and when they do one update can
    be lost, so results are no longer bit-for-bit reproducible; every row is projected
    back into the ball at the end.
    """
    if geometry not in GEOMETRIES:
        raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")
    if not compiled_epoch_available(weight, geometry):
        raise RuntimeError("the compiled epoch needs numba (pip install 'hypermem-torch[fast]') and a CPU table")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if int(workers) != workers or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    W = weight.detach().numpy()  # shares memory: updated in place
    if not W.flags.c_contiguous:
        raise ValueError("weight must be contiguous")
    c = float(curvature)
    limit = (1.0 - ball_margin(weight.dtype)) / math.sqrt(c)
    a = np.ascontiguousarray(anchors.numpy(), dtype=np.int64)
    cnd = np.ascontiguousarray(cand.numpy(), dtype=np.int64)
    m = np.ascontiguousarray(masked_out.numpy(), dtype=np.bool_)
    poincare = geometry == "poincare"
    rest = (float(lr), int(batch_size), c, limit, tiny(weight.dtype) if poincare else _EUCLIDEAN_FLOOR, poincare)
    P = a.shape[0]
    workers = min(int(workers), max(1, -(-P // batch_size)))
    if workers == 1:
        return float(_epoch(W, a, cnd, m, *rest))
    # contiguous parts of whole batches, one per thread
    per = -(-P // (workers * batch_size)) * batch_size
    parts = [(s, min(s + per, P)) for s in range(0, P, per)]
    with ThreadPoolExecutor(len(parts)) as pool:
        totals = list(pool.map(lambda se: _epoch(W, a[se[0]:se[1]], cnd[se[0]:se[1]], m[se[0]:se[1]], *rest),
                               parts))
    if poincare:
        with torch.no_grad():  # rows that two threads pushed out together
            weight.copy_(project(weight, c))
    return float(sum(totals))


_EUCLIDEAN_FLOOR = 1e-15
"""Smallest Euclidean distance in a step (as the torch step's clamp): a candidate on
top of its anchor gets a finite gradient."""


def _epoch_py(W, anchors, cand, masked, lr, batch_size, c, limit, floor, poincare):  # pragma: no cover - compiled
    n, dim = W.shape
    P, K = cand.shape
    sc = math.sqrt(c)
    k = -lr * sc
    # 1 - c||x||^2 of a point on the projection's limit: the least a row inside the ball
    # can have.  Under Hogwild a row can be read halfway through another thread's write;
    # clamping there keeps such a read's step finite (one thread alone never needs it).
    least = 1.0 - c * limit * limit
    # The batch's summed update lives in a compact buffer, one row per distinct row the
    # batch touches (slot[r] says which; -1 when untouched), so the scattered writes stay
    # in cache on tables far larger than it (82,115 nouns).
    slot = np.full(n, -1, dtype=np.int32)
    rows = np.empty(batch_size * (K + 1), dtype=np.int64)
    delta = np.zeros((batch_size * (K + 1), dim), dtype=W.dtype)
    d = np.empty(K, dtype=np.float64)
    ex = np.empty(K, dtype=np.float64)
    root = np.empty(K, dtype=np.float64)
    beta = np.empty(K, dtype=np.float64)
    e = np.empty(K, dtype=np.float64)
    xy = np.empty(K, dtype=np.float64)
    total = 0.0
    for s in range(0, P, batch_size):
        stop = min(s + batch_size, P)
        nrows = 0
        for p in range(s, stop):
            u = anchors[p]
            xx = 0.0
            for t in range(dim):
                xx += W[u, t] * W[u, t]
            xx *= c
            alpha = max(1.0 - xx, least)
            top = -np.inf
            for j in range(K):
                v = cand[p, j]
                if poincare:
                    yy = 0.0
                    xyj = 0.0
                    for t in range(dim):
                        yy += W[v, t] * W[v, t]
                        xyj += W[v, t] * W[u, t]
                    yy *= c
                    xyj *= c
                    xy[j] = xyj
                    beta[j] = max(1.0 - yy, least)
                    e[j] = yy - 2.0 * xyj
                    z = (e[j] + xx) / (beta[j] * (alpha * 0.5))
                    if z < floor:
                        z = floor
                    root[j] = math.sqrt((z + 2.0) * z)
                    d[j] = math.log1p(z + root[j]) / sc
                else:
                    sq = 0.0
                    for t in range(dim):
                        diff = W[u, t] - W[v, t]
                        sq += diff * diff
                    d[j] = max(math.sqrt(sq), floor)
                if not masked[p, j] and -d[j] > top:
                    top = -d[j]
            norm = 0.0
            for j in range(K):
                ex[j] = 0.0 if masked[p, j] else math.exp(-d[j] - top)
                norm += ex[j]
            lse = top + math.log(norm)
            total += d[0] + lse  # -log p_0
            if slot[u] < 0:
                slot[u] = nrows
                rows[nrows] = u
                nrows += 1
            su = slot[u]
            coef_x = 0.0
            for j in range(K):
                g = (1.0 if j == 0 else 0.0) - ex[j] / norm  # dL/dd_j = [j = 0] - softmax(-d)_j
                if g == 0.0:
                    continue  # a masked candidate: no update
                v = cand[p, j]
                if slot[v] < 0:
                    slot[v] = nrows
                    rows[nrows] = v
                    nrows += 1
                sv = slot[v]
                if not poincare:  # x -= lr g (x - y) / d,  y += lr g (x - y) / d
                    w = lr * g / d[j]
                    for t in range(dim):
                        step = w * (W[u, t] - W[v, t])
                        delta[su, t] -= step
                        delta[sv, t] += step
                    continue
                g /= root[j]
                cu = g / beta[j]
                coef_x += cu * (e[j] + 1.0)
                cv = g * (k / alpha)
                a_y = (xx + 1.0 - 2.0 * xy[j]) * cv
                b_y = -cv * beta[j]
                ua = -k * alpha * cu
                for t in range(dim):
                    delta[su, t] += ua * W[v, t]
                    delta[sv, t] += a_y * W[v, t] + b_y * W[u, t]
            coef_x *= k
            for t in range(dim):
                delta[su, t] += coef_x * W[u, t]
        # apply the batch's summed update, project the rows it touched (Poincaré), reset the
        # buffer; the new row is formed in the buffer and written once, already projected,
        # so another thread never reads a row that this step pushed out of the ball
        for i in range(nrows):
            r = rows[i]
            sq = 0.0
            for t in range(dim):
                delta[i, t] += W[r, t]
                sq += delta[i, t] * delta[i, t]
            nr = math.sqrt(sq)
            f = limit / nr if poincare and nr > limit else 1.0
            for t in range(dim):
                W[r, t] = delta[i, t] * f if f != 1.0 else delta[i, t]
                delta[i, t] = 0.0
            slot[r] = -1
    return total


_epoch = lazy_njit(_epoch_py)
