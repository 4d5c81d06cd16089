r"""Negative sampling for hierarchy embeddings, vectorised on tensors.

For a batch of related pairs ``(u, v)`` Nickel & Kiela (2017) draw ``k`` negatives
``v'`` that are *not* related to ``u``: ``N(u) = {v' : (u, v') not in D}``.  Here the
relation is checked in both directions (a node's descendants are not negatives for it
either, since the distance is symmetric) and ``u`` itself is excluded.

Draws are uniform over the nodes, or proportional to ``degree^0.75`` (the unigram
distribution of word2vec that Nickel & Kiela use during burn-in).  All ``B x k`` draws
happen at once; draws that hit a related node are redrawn up to ``retries`` times and
whatever is still invalid is returned masked (``mask`` is ``False``), so the loss can
ignore it.  No Python loop runs per pair.
"""

from __future__ import annotations

import torch

from .compiled_sampling import partner_lists, sample_negatives
from .relations import Relations


class NegativeSampler:
    """Draw negatives for ``(u, v)`` pairs of ``relations``.

    Parameters
    ----------
    relations:
        The related pairs (a :class:`Relations`, e.g. a transitive closure).
    symmetric:
        Treat ``(v', u)`` as related too (default), not only ``(u, v')``.
    retries:
        How many times invalid draws are redrawn before being masked out.
    generator:
        A :class:`torch.Generator` on the relations' device, for reproducible draws.
    """

    def __init__(self, relations: Relations, symmetric: bool = True, retries: int = 2,
                 generator: torch.Generator | None = None):
        self.relations = relations
        self.symmetric = bool(symmetric)
        self._check = relations.symmetric() if symmetric else relations
        self.retries = int(retries)
        self.generator = generator
        self.n = relations.n
        deg = relations.degree().to(torch.float64)
        self._unigram = (deg.clamp_min(1.0) ** 0.75)
        self._unigram = (self._unigram / self._unigram.sum()).to(torch.float32)

    def to(self, device) -> NegativeSampler:
        """A sampler on ``device`` (a new generator seeded from the current one)."""
        seed = int(torch.randint(0, 2**62, (1,), generator=self.generator, device=self.generator.device)) \
            if self.generator is not None else None
        g = None
        if seed is not None:
            g = torch.Generator(device=device)
            g.manual_seed(seed)
        return NegativeSampler(self.relations.to(device), self.symmetric, self.retries, g)

    def _draw(self, shape, unigram: bool) -> torch.Tensor:
        device = self._check.device
        if unigram:
            flat = torch.multinomial(self._unigram.to(device), int(torch.Size(shape).numel()), replacement=True,
                                     generator=self.generator)
            return flat.reshape(shape)
        return torch.randint(0, self.n, shape, device=device, generator=self.generator)

    def valid(self, u: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
        """``neg[i, j]`` is a valid negative for ``u[i]`` (not ``u`` and not related)."""
        uu = u[:, None].expand_as(neg)
        return (neg != uu) & ~self._check.contains(uu, neg)

    def sample_compiled(self, u: torch.Tensor, k: int, unigram: bool = False,
                        positives: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Like :meth:`sample`, in one compiled call
        (:mod:`~hypermem.hierarchy.compiled_sampling`; needs numba and CPU tensors): the
        same distribution, other numbers (seeded from this sampler's generator).  With
        ``positives`` ``(B,)``: ``(candidates, valid)`` of shape ``(B, 1 + k)``, the
        positives in column 0 (see :func:`~hypermem.hierarchy.compiled_sampling.sample_negatives`)."""
        if k < 1:
            raise ValueError(f"need at least one negative, got k={k}")
        lists = self.__dict__.get("_partner_lists")
        if lists is None:
            lists = self._partner_lists = partner_lists(self._check)
        return sample_negatives(*lists, u, k, self._unigram if unigram else None, self.retries, self.generator,
                                positives)

    def sample(self, u: torch.Tensor, k: int, unigram: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``(negatives, mask)``, both ``(B, k)``; ``mask`` is ``False`` where no valid
        negative was found."""
        if k < 1:
            raise ValueError(f"need at least one negative, got k={k}")
        u = u.to(self._check.device)
        neg = self._draw((u.shape[0], k), unigram)
        ok = self.valid(u, neg)
        for _ in range(self.retries):
            bad = ~ok
            nbad = int(bad.sum())
            if nbad == 0:
                break
            redraw = self._draw((nbad,), unigram)
            neg[bad] = redraw
            ok[bad] = self.valid(u[:, None].expand_as(neg)[bad], redraw[:, None])[:, 0]
        return neg, ok
