r"""The baselines of the WordNet RAG benchmark (:mod:`experiments.rag.comparison`).

(a) flat cosine, (b) the untrained store, (c) a learned linear map scored by cosine, (d)
the training-free sibling vote, (f) direction cosine + vote, (g) the Euclidean twin of (e),
(h) the linear map (c) with the readout of (e); each is a function of the query features that returns
scores ``(B, N)`` over all slots (or, for (c), a module with ``answer_scores`` and
``train_scores`` like :class:`hypermem.nn.HyperbolicRAG`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from hypermem.embed import HashingEmbedder
from hypermem.nn import HyperbolicMemory, ParentVote
from hypermem.nn.rag_model import cosine_topk
from hypermem.store import Memory

from .data import RAGData


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


def identity_linear(d: int) -> nn.Linear:
    """``nn.Linear(d, d)`` initialised to the identity map (weight ``I``, bias 0)."""
    lin = nn.Linear(d, d)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(d))
        lin.bias.zero_()
    return lin


class LinearCosine(nn.Module):
    """(c) ``cos(W x + b, e_j) / tau`` over all slots, ``W`` initialised to the identity."""

    def __init__(self, slot_emb: torch.Tensor, temperature: float = 0.05):
        super().__init__()
        d = slot_emb.shape[1]
        self.linear = identity_linear(d)
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)))
        self.register_buffer("slots", F.normalize(slot_emb.float(), dim=1))

    def answer_scores(self, x: torch.Tensor) -> torch.Tensor:
        # (q / tau) @ E^T: the temperature divides the (B, d) queries, not the (B, N) scores
        return (F.normalize(self.linear(x), dim=1) / self.log_temperature.exp()) @ self.slots.T

    def train_scores(self, x, targets, exclude):
        """Scores over all slots (``exclude`` masked, in place: the matmul's backward does not
        need its output); the label is the target itself."""
        s = self.answer_scores(x)
        ex = exclude.view(len(s), -1).to(s.device).long()
        rows = torch.arange(len(s), device=s.device).unsqueeze(1).expand_as(ex)
        ok = ex >= 0
        s[rows[ok], ex[ok]] = -math.inf
        return None, s


# -- the Euclidean twin of (e) and its training-free version ------------------------------------------
def store_directions(store: Memory) -> torch.Tensor:
    """Unit directions ``(N, d)`` (float32) of the store's keys (its hierarchy placement)."""
    keys = HyperbolicMemory.from_memory(store, learn_keys=False, learn_temperature=False).keys
    return F.normalize(keys.detach().float(), dim=1)


class CosineMemory(nn.Module):
    """A Euclidean memory with the interface :meth:`ParentVote.topk` reads: unit keys, scores
    ``cos(q, k_j) / tau`` (``tau`` learned), exact top-``k`` by :func:`cosine_topk`."""

    def __init__(self, dirs: torch.Tensor, temperature: float, learn_keys: bool = False):
        super().__init__()
        self.keys = nn.Parameter(dirs.clone(), requires_grad=bool(learn_keys))
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature)))

    def __len__(self) -> int:
        return self.keys.shape[0]

    def _unit_keys(self, idx=None):
        K = self.keys if idx is None else self.keys[idx.clamp_min(0)]
        return F.normalize(K, dim=-1)

    def select(self, queries, k, exclude=None, at_time=None):
        return cosine_topk(F.normalize(queries, dim=1), self._unit_keys(), k, exclude)

    def score_all(self, queries, at_time=None):
        s = F.normalize(queries, dim=1) @ self._unit_keys().T / self.log_temperature.exp()
        return s, -s

    def score_slots(self, queries, indices, at_time=None):
        q = F.normalize(queries, dim=1).unsqueeze(1)
        s = (q * self._unit_keys(indices)).sum(-1) / self.log_temperature.exp()
        s = s.masked_fill(indices < 0, -math.inf)
        return s, -s


class EuclideanTwin(nn.Module):
    """(g) the Euclidean twin of (e): the same linear query map (identity init), the same
    :class:`ParentVote` readout trained through the same exact top-``k`` reads, keys at the
    store's directions, but cosine scores ``cos(W x + b, k_j) / tau`` instead of the
    hyperbolic (shell) distance."""

    def __init__(self, dirs: torch.Tensor, parent: torch.Tensor, temperature: float = 0.05, k: int = 32,
                 learn_keys: bool = False, combine: str = "logaddexp", children: str = "max"):
        super().__init__()
        d = dirs.shape[1]
        self.linear = identity_linear(d)
        self.memory = CosineMemory(dirs, temperature, learn_keys)
        self.readout = ParentVote(parent, combine=combine, children=children)
        self.k = int(k)

    def answer_scores(self, x: torch.Tensor) -> torch.Tensor:
        return self.readout.full(self.memory.score_all(self.linear(x))[0])

    def train_scores(self, x, targets, exclude):
        """Candidates (answer first) and their scores; the label is position 0."""
        return self.readout.topk(self.memory, self.linear(x), None, self.k, targets=targets, exclude=exclude)


def linear_readout(slot_emb: torch.Tensor, parent: torch.Tensor, temperature: float = 0.05, k: int = 32,
                   combine: str = "logaddexp", children: str = "max") -> EuclideanTwin:
    """(h) the linear map (c) with the readout of (e) and (g): ``cos(W x + b, e_j) / tau`` with the
    slots' own (unit) sentence embeddings ``e_j`` — what (c) scores against — through the same
    :class:`ParentVote`, trained like (g) through exact top-``k`` reads.  It differs from (g) only
    in the keys (raw embeddings instead of the store's hierarchy-placed directions), and from
    (c) only in the readout, so (e) - (h) is the hyperbolic memory against a plain vector store
    with the same learned readout."""
    return EuclideanTwin(F.normalize(slot_emb.float(), dim=1), parent, temperature, k=k, learn_keys=False,
                         combine=combine, children=children)


def direction_vote(dirs: torch.Tensor, parent: torch.Tensor, temperature: float = 0.05
                   ) -> Callable[[torch.Tensor], torch.Tensor]:
    """(f) training-free: ``cos(x, k_j) / tau`` with the store's key directions, through the
    untrained ``logaddexp`` vote of :class:`ParentVote` (biases 0)."""
    vote = ParentVote(parent, learn=False)
    return lambda x: vote.full(F.normalize(x, dim=1) @ dirs.T / temperature)
