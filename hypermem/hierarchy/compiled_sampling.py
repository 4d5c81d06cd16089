r"""Negative sampling for a whole epoch in one compiled call (CPU, numba).

The same draws as :class:`~hypermem.hierarchy.sampling.NegativeSampler` (Nickel & Kiela
2017): for every pair ``(u, v)``, ``k`` nodes ``v'`` uniform over all nodes (or, during
the burn-in, proportional to ``degree^0.75``), each redrawn up to ``retries`` times while
it is ``u`` itself or related to ``u`` (in either direction), and masked out if still
invalid.  The torch sampler checks every draw with a binary search over all pairs of the
relation (1.5 million keys on the WordNet nouns: cache misses dominate); here each node's
partners are a sorted slice of one array, so a check searches a few entries that sit
together.  Draws come from numba's generator seeded from the caller's torch generator, so
an epoch is reproducible; the numbers differ from the torch sampler's, not their
distribution.
"""

from __future__ import annotations

import numpy as np
import torch

from .lazy_jit import HAVE_NUMBA, lazy_njit
from .relations import Relations


def compiled_sampling_available(relations: Relations) -> bool:
    """Whether :func:`sample_negatives` can run: numba installed, relations on a CPU."""
    return HAVE_NUMBA and relations.device.type == "cpu"


def partner_lists(check: Relations) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, partners)`` of :meth:`Relations.csr` as NumPy arrays: the partners of
    ``u`` are ``partners[offsets[u]:offsets[u + 1]]``, sorted (the relation keeps its
    pairs in key order)."""
    offsets, partners = check.csr()
    return offsets.cpu().numpy(), np.ascontiguousarray(partners.cpu().numpy())


def sample_negatives(offsets: np.ndarray, partners: np.ndarray, anchors: torch.Tensor, k: int,
                     weights: torch.Tensor | None, retries: int, generator: torch.Generator | None,
                     positives: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(negatives, valid)``, both ``(P, k)``, for the anchors ``(P,)``; ``weights``
    (``(n,)``, summing to 1) draws by weight instead of uniformly.

    With ``positives`` ``(P,)`` the result is ``(candidates, valid)``, both ``(P, 1 + k)``:
    column 0 the positive (always valid), then the negatives, written in place (the
    layout of :func:`~hypermem.hierarchy.fused_sgd.candidates`, without a copy)."""
    if not HAVE_NUMBA:
        raise RuntimeError("compiled sampling needs numba (pip install 'hypermem-torch[fast]')")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    n = offsets.shape[0] - 1
    cdf = np.cumsum(weights.to(torch.float64).cpu().numpy()) if weights is not None else np.zeros(1)
    a = np.ascontiguousarray(anchors.cpu().numpy(), dtype=np.int64)
    col = 0 if positives is None else 1
    neg = np.empty((a.shape[0], col + int(k)), dtype=np.int64)
    ok = np.empty((a.shape[0], col + int(k)), dtype=np.bool_)
    if positives is not None:
        neg[:, 0] = positives.cpu().numpy()
        ok[:, 0] = True
    _draw(offsets, partners, a, int(k), n, cdf, weights is not None, int(retries), seed, neg, ok, col)
    return torch.from_numpy(neg), torch.from_numpy(ok)


def _draw_py(offsets, partners, anchors, k, n, cdf, weighted, retries, seed, neg, ok, col):  # pragma: no cover
    np.random.seed(seed)
    P = anchors.shape[0]
    for p in range(P):
        u = anchors[p]
        lo, hi = offsets[u], offsets[u + 1]
        for j in range(k):
            good = False
            v = 0
            for _ in range(retries + 1):
                if weighted:
                    v = min(np.searchsorted(cdf, np.random.random() * cdf[-1], side="right"), n - 1)
                else:  # uniform; a scaled float draw is several times faster than randint
                    v = min(int(np.random.random() * n), n - 1)
                if v == u:
                    continue
                a, b = lo, hi  # is v among u's sorted partners?
                while a < b:
                    mid = (a + b) >> 1
                    if partners[mid] < v:
                        a = mid + 1
                    else:
                        b = mid
                if a == hi or partners[a] != v:
                    good = True
                    break
            neg[p, col + j] = v
            ok[p, col + j] = good


_draw = lazy_njit(_draw_py)
