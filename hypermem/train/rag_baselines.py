r"""The baselines of the WordNet RAG benchmark (:mod:`hypermem.train.rag`).

(a) flat cosine, (b) the untrained store, (c) a learned linear map scored by cosine, (d)
the training-free sibling vote; each is a function of the query features that returns
scores ``(B, N)`` over all slots (or, for (c), a module with ``answer_scores`` and
``train_scores`` like :class:`hypermem.train.rag.HyperbolicRAG`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..embed import HashingEmbedder
from ..nn import HyperbolicMemory, ParentVote
from ..store import Memory
from .rag_data import RAGData


def flat_cosine(data: RAGData) -> Callable[[torch.Tensor], torch.Tensor]:
    """(a) cosine between query and slot embeddings."""
    E = F.normalize(data.slot_emb, dim=1)
    return lambda x: F.normalize(x, dim=1) @ E.T


def sibling_vote(data: RAGData) -> Callable[[torch.Tensor], torch.Tensor]:
    """(d) ``max(cos(q, e_p), max_{c in ch(p)} cos(q, e_c))`` for every slot ``p``."""
    cos = flat_cosine(data)
    vote = ParentVote(data.slot_parent, learn=False)
    return lambda x: torch.maximum(cos(x), vote.children_vote(cos(x)))


def build_store(data: RAGData, base_depth: float = 1.0, depth_step: float = 0.5, inherit: float = 0.25,
                dtype: torch.dtype = torch.float32) -> Memory:
    """The memory as a :class:`hypermem.store.Memory`: one record per slot (id = synset name,
    text, parent), its embedding given, placed by the hierarchy."""
    store = Memory(embedder=HashingEmbedder(dim=data.dim), base_depth=base_depth, depth_step=depth_step, inherit=inherit, dtype=dtype)
    names, par = data.slot_names, data.slot_parent.tolist()
    emb = data.slot_emb.double()
    store.add_many([{"id": names[i], "text": data.slot_texts[i], "parent": None if par[i] < 0 else names[par[i]],
                     "embedding": emb[i]} for i in range(data.n_slots)])
    return store


def store_scores(store: Memory) -> Callable[[torch.Tensor], torch.Tensor]:
    """(b) the store's own score (shell metric, query at ``base_depth``) against every memory,
    through :meth:`HyperbolicMemory.from_memory` (which scores like ``Memory.search``)."""
    layer = HyperbolicMemory.from_memory(store, learn_keys=False, learn_temperature=False)
    return lambda x: layer.score_all(store.ball.point_at(x.to(layer.keys.dtype), store.base_depth))[0]


class LinearCosine(nn.Module):
    """(c) ``cos(W x + b, e_j) / tau`` over all slots, ``W`` initialised to the identity."""

    def __init__(self, slot_emb: torch.Tensor, temperature: float = 0.05):
        super().__init__()
        d = slot_emb.shape[1]
        self.linear = nn.Linear(d, d)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(d))
            self.linear.bias.zero_()
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)))
        self.register_buffer("slots", F.normalize(slot_emb.float(), dim=1))

    def answer_scores(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.linear(x), dim=1) @ self.slots.T / self.log_temperature.exp()

    def train_scores(self, x, targets, exclude):
        """Scores over all slots (``exclude`` masked); the label is the target itself."""
        s = self.answer_scores(x)
        s = s.scatter(1, exclude.view(-1, 1), -math.inf)
        return None, s
