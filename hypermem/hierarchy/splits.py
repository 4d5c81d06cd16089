r"""Train / validation / test splits of a transitive closure for link prediction.

Ganea, Bécigneul & Hofmann ("Hyperbolic Entailment Cones for Learning Hierarchical
Embeddings", ICML 2018, Sec. 5.1): the *basic* edges — the transitive reduction, i.e.
the pairs not implied by two other pairs — always go to training (without them a part
of the hierarchy could be unrecoverable); the *non-basic* edges are shuffled, 5% go to
validation, 5% to test, and a fraction (0%, 10%, 25% or 50%) of the remaining ones is
added to training.  Every validation and test positive gets ``negatives`` (10) negative
pairs made by corrupting one of its two ends (half the head, half the tail) with a
random node such that the corrupted pair is not in the closure.

Pairs are ``(hyponym, hypernym)`` index pairs of a :class:`~hypermem.hierarchy.relations.Relations`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .relations import Relations, as_relations


def transitive_reduction(closure: Relations) -> torch.Tensor:
    """Boolean mask over ``closure.pairs``: ``True`` for basic edges, i.e. ``(u, v)`` with
    no ``w`` such that ``(u, w)`` and ``(w, v)`` are both in the closure."""
    offsets, targets = closure.csr()
    anc = [set(targets[offsets[i]:offsets[i + 1]].tolist()) for i in range(closure.n)]
    implied = [set() for _ in range(closure.n)]
    for u in range(closure.n):
        s = implied[u]
        for w in anc[u]:
            s |= anc[w]
    return torch.tensor([v not in implied[u] for u, v in closure.pairs.tolist()], dtype=torch.bool,
                        device=closure.device)


@dataclass
class LinkSplit:
    """Index pairs for link prediction: ``train`` (a :class:`Relations` over all nodes),
    ``val_pairs``/``val_labels`` and ``test_pairs``/``test_labels`` (``(m, 2)`` and
    ``(m,)`` tensors, labels ``True`` for real edges), plus the sizes."""

    train: Relations
    val_pairs: torch.Tensor
    val_labels: torch.Tensor
    test_pairs: torch.Tensor
    test_labels: torch.Tensor
    n_basic: int
    n_non_basic_train: int


def _corrupt(pos: torch.Tensor, k: int, closure: Relations, g: torch.Generator) -> torch.Tensor:
    """``k`` corrupted pairs per positive (alternately the head and the tail replaced),
    redrawn until not in the closure (and not a self-pair); an end that cannot be
    corrupted (every node is a hyponym of the root) falls back to the other end."""
    rep = pos.repeat_interleave(k, dim=0)
    side = (torch.arange(rep.shape[0]) % 2).to(rep.device)
    out = rep.clone()
    todo = torch.ones(rep.shape[0], dtype=torch.bool, device=rep.device)
    for attempt in range(100):
        if attempt == 20:  # e.g. (x, root) cannot be corrupted at the head: switch ends
            side = torch.where(todo, 1 - side, side)
        m = int(todo.sum())
        if m == 0:
            break
        r = torch.randint(0, closure.n, (m,), generator=g).to(rep.device)
        cand = rep[todo].clone()
        s = side[todo]
        cand[s == 0, 0] = r[s == 0]
        cand[s == 1, 1] = r[s == 1]
        ok = (cand[:, 0] != cand[:, 1]) & ~closure.contains(cand[:, 0], cand[:, 1])
        idx = torch.nonzero(todo).flatten()
        out[idx[ok]] = cand[ok]
        todo[idx[ok]] = False
    if bool(todo.any()):
        raise ValueError("could not draw negative pairs outside the closure (is the graph complete?)")
    return out


def link_prediction_split(closure, non_basic_fraction: float = 0.5, val_fraction: float = 0.05,
                          test_fraction: float = 0.05, negatives: int = 10, seed: int = 0,
                          nodes=None) -> LinkSplit:
    """Split ``closure`` (pairs or :class:`Relations`) as Ganea et al. (2018) do.

    ``non_basic_fraction`` is the share of the non-basic edges left after validation and
    test that is added to training (their "X%": 0, 0.1, 0.25, 0.5).
    """
    rel = as_relations(closure, nodes=nodes)
    for name, f in [("non_basic_fraction", non_basic_fraction), ("val_fraction", val_fraction),
                    ("test_fraction", test_fraction)]:
        if not 0 <= f <= 1:
            raise ValueError(f"{name} must lie in [0, 1], got {f}")
    if val_fraction + test_fraction >= 1:
        raise ValueError("val_fraction + test_fraction must be below 1")
    basic = transitive_reduction(rel)
    g = torch.Generator().manual_seed(int(seed))
    nb = torch.nonzero(~basic).flatten()
    nb = nb[torch.randperm(nb.numel(), generator=g).to(nb.device)]
    n_val = int(round(val_fraction * nb.numel()))
    n_test = int(round(test_fraction * nb.numel()))
    val_idx, test_idx, rest = nb[:n_val], nb[n_val:n_val + n_test], nb[n_val + n_test:]
    n_extra = int(round(non_basic_fraction * rest.numel()))
    train_idx = torch.cat([torch.nonzero(basic).flatten(), rest[:n_extra]])
    train = Relations(rel.pairs[train_idx], nodes=rel.nodes, device=rel.device)

    def with_negatives(idx):
        pos = rel.pairs[idx]
        neg = _corrupt(pos, negatives, rel, g) if negatives and pos.numel() else pos[:0]
        pairs = torch.cat([pos, neg])
        labels = torch.cat([torch.ones(pos.shape[0], dtype=torch.bool), torch.zeros(neg.shape[0], dtype=torch.bool)])
        return pairs, labels.to(pairs.device)

    vp, vl = with_negatives(val_idx)
    tp, tl = with_negatives(test_idx)
    return LinkSplit(train=train, val_pairs=vp, val_labels=vl, test_pairs=tp, test_labels=tl,
                     n_basic=int(basic.sum()), n_non_basic_train=n_extra)
