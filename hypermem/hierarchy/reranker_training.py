r"""Training a placement reranker on a store's own filed tree.

A :class:`~hypermem.embed.reranker.PlacementReranker` corrects the store's choice among the
candidate parents of a new text (:mod:`hypermem.embed.reranker`).  It learns from the tree the
store already holds, nothing domain-specific: for each filed child ``t`` with parent ``p``,
the candidates a vote would offer are the filed parents and grandparents of ``t``'s nearest
memories (cosine of the store's vectors), so the training list is ``p`` against up to
``negatives`` of those (``t``'s own parent and grandparent left out), and the loss is the
listwise softmax cross-entropy (ListNet with one relevant item; Cao et al., "Learning to
rank: from pairwise approach to listwise approach", ICML 2007)::

    L(t) = -log( exp ce(t, p) / sum_{c in {p} + N(t)} exp ce(t, c) )

over ``group`` children a step (AdamW, every layer of the cross-encoder).  One pass over a
tree's children is an epoch; ``max_minutes`` stops earlier (after one step at least), with a
warning when that leaves some list unseen.  On WordNet's 72,913 filed nouns
one pass of 19,876 lists took about 2 CPU hours on 2 cores (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import math
import random
import sys
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from ..embed.reranker import CANDIDATES, WEIGHT, PlacementReranker, check_save_folder
from .progress import progress_bar, show_progress
from .torch_state import private_rng

__all__ = ["fit_placement_reranker", "training_lists"]


def training_lists(edges: Iterable[tuple[Any, Any]], vectors: Mapping[Any, torch.Tensor], *, negatives: int = 7,
                   neighbours: int = 10, seed: int = 0) -> list[tuple[Any, Any, list[Any]]]:
    """``(child, parent, [negative parents])`` for every child of ``edges`` (``(child, parent)``
    pairs; the first parent of a child counts) that has a vector and at least one negative:
    the filed parents and grandparents of its ``neighbours`` nearest entities of ``vectors``
    (cosine), other than itself, its parent and its grandparent; at most ``negatives`` of them,
    drawn with ``seed``.  The lists come in a random order."""
    par: dict[Any, Any] = {}
    for c, p in edges:
        par.setdefault(c, p)
    ids = list(vectors)
    if not ids:
        return []
    at = {e: i for i, e in enumerate(ids)}
    X = torch.nn.functional.normalize(torch.stack([torch.as_tensor(vectors[i]) for i in ids]).to(torch.float32),
                                      dim=1)
    rng = random.Random(seed)
    kids = [c for c in par if c in at]
    rng.shuffle(kids)
    k = min(neighbours + 1, len(ids))
    out = []
    for s in range(0, len(kids), 512):
        chunk = kids[s:s + 512]
        top = (X[[at[c] for c in chunk]] @ X.T).topk(k, dim=1).indices.tolist()
        for c, row in zip(chunk, top):
            p = par[c]
            near, cands = {c, p, par.get(p)}, []
            for j in row:
                a, d = par.get(ids[j]), 0
                while a is not None and d < 2:
                    if a not in near and a not in cands:
                        cands.append(a)
                    a, d = par.get(a), d + 1
            if cands:
                out.append((c, p, rng.sample(cands, min(negatives, len(cands)))))
    return out


def fit_placement_reranker(edges: Iterable[tuple[Any, Any]], names: Mapping[Any, str],
                           vectors: Mapping[Any, torch.Tensor], *, base: str | None = None, epochs: float = 1.0,
                           max_minutes: float | None = None, seed: int = 0, negatives: int = 7, neighbours: int = 10,
                           group: int = 8, lr: float = 4e-5, max_length: int = 96, weight: float = WEIGHT,
                           candidates: int = CANDIDATES, out: str | None = None, progress: bool | None = None,
                           device: str | None = None) -> PlacementReranker:
    """Train a :class:`~hypermem.embed.reranker.PlacementReranker` on a filed tree (module docstring).

    ``edges``: the tree's ``(child, parent)`` ids; ``names``: id -> the memory's text;
    ``vectors``: id -> the store's vector of each memory (the neighbours that make the
    candidates).  ``base``: a sentence-transformers or cross-encoder folder (default the
    offline all-MiniLM-L6-v2); ``epochs`` passes over the lists, stopped after ``max_minutes``;
    ``weight`` and ``candidates`` are what the store will use; ``out``: save the reranker there.
    A progress bar shows on a terminal or in a notebook (``progress`` forces it on or off).

    From a store that holds a tree::

        ids = mem.ids
        edges = [(i, mem.parent(i)) for i in ids if mem.parent(i) is not None]
        rr = fit_placement_reranker(edges, {i: mem.get(i).text for i in ids},
                                    dict(zip(ids, mem.embeddings)), max_minutes=60, out="reranker")
        mem.reranker = rr
    """
    if not (isinstance(epochs, (int, float)) and epochs > 0 and math.isfinite(epochs)):
        raise ValueError(f"epochs must be a positive number, got {epochs!r}")
    if max_minutes is not None and not max_minutes > 0:
        raise ValueError(f"max_minutes must be positive, got {max_minutes!r}")
    if group < 1 or negatives < 1 or neighbours < 1:
        raise ValueError("group, negatives and neighbours must be >= 1")
    edges = list(edges)
    missing = sorted({str(e) for pair in edges for e in pair if e not in names})[:3]
    if missing:
        raise ValueError(f"every id of edges needs a text in names; missing e.g. {missing}")
    if out is not None:
        check_save_folder(out)   # refused before the training, not after it (the rule save applies)
    with private_rng(device or "cpu") as seed_all:   # the caller's generators kept (the head's init, dropout)
        seed_all(seed)
        lists = training_lists(edges, vectors, negatives=negatives, neighbours=neighbours, seed=seed)
        if not lists:
            raise ValueError("the tree offers no training list: a child needs neighbours filed under another parent")
        rr = PlacementReranker(base, weight=weight, candidates=candidates, max_length=max_length, device=device)
        net, tok = rr.model.model, rr.model.tokenizer
        dev = next(net.parameters()).device
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.01)
        steps = max(1, math.ceil(epochs * len(lists) / group))
        show = show_progress(progress)
        bar = progress_bar(steps, "placement reranker", "step", show)
        net.train()
        t0, losses, stopped = time.monotonic(), [], None
        try:
            for step in range(steps):
                if step and max_minutes is not None and time.monotonic() - t0 > max_minutes * 60:
                    stopped = step
                    break
                batch = [lists[(step * group + j) % len(lists)] for j in range(group)]   # epochs wrap around
                a, b, sizes = [], [], []
                for c, p, negs in batch:
                    for x in (p, *negs):
                        a.append(names[c])
                        b.append(names[x])
                    sizes.append(1 + len(negs))
                enc = tok(a, b, truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(dev)
                logits = net(**enc).logits.reshape(-1)
                loss = torch.stack([-torch.log_softmax(x, 0)[0] for x in logits.split(sizes)]).mean()
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"the reranker's loss is {loss.item()} at step {step}; lower lr")
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}")
        finally:
            if bar is not None:
                bar.close()
        net.eval()
    if stopped is not None and stopped * group < len(lists):
        warnings.warn(f"fit_placement_reranker: max_minutes={max_minutes} stopped the training after {stopped} of "
                      f"{steps} steps, before it saw each of the {len(lists)} training lists once "
                      f"({stopped * group} seen). A reranker trained on few lists can place worse than the store's "
                      "rule alone (5 steps lowered WordNet's placement within 2 hops by 0.022; "
                      "benchmarks/RESULTS.md): give it more minutes, or compare the two on texts you hold out.",
                      UserWarning, stacklevel=2)
    rr.forget_checksum()   # the weights changed in place
    rr.config = {"lists": len(lists), "steps": len(losses), "planned_steps": steps, "group": group,
                 "negatives": negatives, "neighbours": neighbours, "lr": lr, "seed": seed, "seconds": round(time.monotonic() - t0, 1),
                 "first_loss": losses[0], "last_loss": sum(losses[-50:]) / len(losses[-50:])}
    if out is not None:
        rr.save(out)
        if show:
            print(f"placement reranker saved to {out}", file=sys.stderr)
    return rr
