r"""WordNet reader task: a retriever trained through a reader, with no retrieval labels.

The task: predict a held-out noun synset's lexicographer class (``lex_filenum`` of
``data.noun``, the 26 files ``noun.Tops`` ... ``noun.time``) from its ``"lemma: gloss"``
MiniLM embedding and what it reads from a memory of the other synsets.  The memory's keys
are the store's points (hyperbolic) or their directions (Euclidean); its values are the
synsets' embeddings, never their labels.  The loss is ``-log p(y | x)`` of
:class:`hypermem.nn.LatentRetrievalReader` (marginalised over the top-``k`` read, REALM /
RAG), so the query map and the keys learn only through the read weights.

The mammal subtree is degenerate for this task (1,179 of its 1,180 synsets are
``noun.animal``), so the data is a random sample of all nouns with every ancestor
(:func:`hypermem.data.wordnet.sampled_hierarchy`), split by :func:`~experiments.rag.data.build_rag_data`
(validation leaves carved out of the training leaves; test touched once).  Training queries
are every memory slot but the root, each with its own slot excluded from its read.

Systems, at the same budget (steps, batch, reader, optimizer, early stopping on validation
accuracy):

* ``reader alone``: :class:`~hypermem.nn.PairReader` on ``x``, no memory;
* ``Euclidean memory``: linear query map (identity init), :class:`~hypermem.nn.CosineKeys`
  at the store's key directions (trained), ``cos / tau``;
* ``hyperbolic memory``: :class:`~hypermem.nn.BallEncoder` (identity init), a
  :class:`~hypermem.nn.HyperbolicMemory` from the store (keys trained with Riemannian Adam),
  ``-d / tau`` with the configured metric.

Options of the memories (``memory`` in the config): ``k``; ``values``: ``None`` (the slots'
embeddings, fixed) or a trainable value per slot (``"copy"``: from the embedding, ``"zero"``),
a key-value memory, with its own ``train.value_lr``; ``learn_keys`` / ``train.key_lr``; the
initial read temperatures; ``see_score`` (the reader sees the detached read weight); the
geometry lever ``metric="hyperbolic"`` with ``query_depth="learned"`` (a per-query radius: a
query near the origin reads more general slots) and its Euclidean twin ``depth_bias`` (a
learned per-query pull ``beta(q) level_j`` towards shallow or deep slots,
:class:`~hypermem.nn.latent_reader.CosineKeys`).

Metrics: accuracy (a tie with the answer counts against it), macro-F1 (argmax), NLL.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import geoopt
import torch
import torch.nn.functional as F
from torch import nn

from hypermem.data import wordnet
from hypermem.nn import BallEncoder, CosineKeys, HyperbolicMemory, LatentRetrievalReader, PairReader
from hypermem.nn.latent_reader import full_select

from .baselines import build_store, identity_linear, store_directions
from .comparison import merge_config
from .data import RAGData, build_rag_data

SYSTEMS = ("reader alone", "Euclidean memory", "hyperbolic memory")

DEFAULTS: dict[str, Any] = {
    "data": {"n_sample": 2000, "sample_seed": 0, "n_test": 400, "n_val": 400, "cache": True},
    "reader": {"hidden": 128, "dropout": 0.1},
    "memory": {"k": 8, "euclid_temperature": 0.05, "hyp_temperature": 0.1, "metric": "shell",
               "query_depth": None, "learn_keys": True, "values": None, "see_score": False,
               "depth_bias": False},
    "systems": list(SYSTEMS),
    "train": {"steps": 300, "batch": 256, "lr": 3e-3, "key_lr": None, "value_lr": None, "val_every": 20,
              "patience": 4},
}


@dataclass
class ReaderData:
    """A :class:`RAGData` split with the class of every slot and held-out query (0-based:
    ``lex_filenum - 3``)."""

    rag: RAGData
    slot_y: torch.Tensor
    val_y: torch.Tensor
    test_y: torch.Tensor
    n_classes: int = len(wordnet.NOUN_LEX_FILES)

    def train_queries(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Features, classes and own slot of every slot but the root(s)."""
        rows = torch.nonzero(self.rag.slot_parent >= 0).squeeze(1)
        return self.rag.slot_emb[rows].float(), self.slot_y[rows], rows


def lex_labels(names) -> torch.Tensor:
    """0-based lexicographer classes ``lex_filenum - 3`` of noun synsets."""
    lex = wordnet.lex_classes(names)
    return torch.tensor([lex[n] - min(wordnet.NOUN_LEX_FILES) for n in names], dtype=torch.long)


def build_reader_data(n_sample: int = 2000, sample_seed: int = 0, seed: int = 0, n_test: int = 400,
                      n_val: int = 400, cache=True, embedder=None, log=None) -> ReaderData:
    """The sampled hierarchy (fixed by ``sample_seed``, so the embedding cache is shared) split by
    ``seed`` into memory, validation and test leaves, with their classes."""
    h = wordnet.sampled_hierarchy(n_sample, sample_seed)
    rag = build_rag_data(hierarchy=h, n_test=n_test, n_val=n_val, seed=seed, cache=cache, embedder=embedder,
                         log=log)
    return ReaderData(rag, lex_labels(rag.slot_names), lex_labels(rag.val_names), lex_labels(rag.test_names))


# -- the systems -----------------------------------------------------------------------------------
class ReaderAlone(nn.Module):
    """``p(y | x)`` from the reader alone (no memory)."""

    def __init__(self, dim: int, n_classes: int, hidden: int, dropout: float):
        super().__init__()
        self.reader = PairReader(dim, 0, n_classes, hidden, dropout)

    def log_probs(self, x, exclude=None):
        return torch.log_softmax(self.reader(x), dim=-1)


class MemoryReader(nn.Module):
    """A query map then the marginalised top-``k`` read of a memory."""

    def __init__(self, query_map: nn.Module, latent: LatentRetrievalReader):
        super().__init__()
        self.query_map = query_map
        self.latent = latent

    def log_probs(self, x, exclude=None):
        return self.latent(self.query_map(x), x, exclude).log_probs

    def key_params(self) -> list[nn.Parameter]:
        keys = self.latent.memory.keys
        return [keys] if keys.requires_grad else []

    def value_params(self) -> list[nn.Parameter]:
        return [self.latent.values] if isinstance(self.latent.values, nn.Parameter) else []


def make_systems(data: ReaderData, cfg: Mapping[str, Any]) -> dict[str, nn.Module]:
    """The three systems of the module docstring, from one store placement."""
    rag, rc, mc = data.rag, cfg["reader"], cfg["memory"]
    d, C = rag.dim, data.n_classes
    store = build_store(rag)
    values = rag.slot_emb.float()

    def reader():
        return PairReader(d, d + int(mc["see_score"]), C, rc["hidden"], rc["dropout"])

    read = {"k": mc["k"], "learn_values": mc["values"], "see_score": mc["see_score"]}

    euclid = CosineKeys(store_directions(store), mc["euclid_temperature"], mc["learn_keys"], values=values,
                        sparse_grad=True, depth=rag.slot_level.float() if mc["depth_bias"] else None)
    hyp = HyperbolicMemory.from_memory(store, learn_keys=mc["learn_keys"], temperature=mc["hyp_temperature"],
                                       dtype=torch.float32, sparse_grad=True)
    hyp.metric = mc["metric"]
    depth = store.base_depth if mc["query_depth"] is None else mc["query_depth"]
    # a learned query depth starts at the keys' mean hyperbolic radius (where the slots are)
    init_depth = float(hyp.key_geometry()[1].mean()) if depth == "learned" else store.base_depth
    enc = BallEncoder(d, store.dim, curvature=store.curvature, depth=depth, init="identity", init_depth=init_depth)
    return {
        SYSTEMS[0]: ReaderAlone(d, C, rc["hidden"], rc["dropout"]),
        SYSTEMS[1]: MemoryReader(identity_linear(d), LatentRetrievalReader(euclid, reader(), **read)),
        SYSTEMS[2]: MemoryReader(enc, LatentRetrievalReader(hyp, reader(), values=values, select=full_select(hyp),
                                                             **read)),
    }


# -- metrics ----------------------------------------------------------------------------------------
def strict_correct(log_probs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``(B,)`` True where the answer's probability beats every other class (a tie counts
    against the answer)."""
    target = log_probs.gather(1, y.view(-1, 1)).squeeze(1)
    others = log_probs.scatter(1, y.view(-1, 1), -math.inf).amax(1)
    return target > others


def macro_f1(pred: torch.Tensor, y: torch.Tensor) -> float:
    """Mean F1 over the classes present in ``y`` or ``pred`` (sklearn's ``average="macro"``)."""
    f1 = []
    for c in torch.unique(torch.cat([y, pred])).tolist():
        tp = int(((pred == c) & (y == c)).sum())
        fp, fn = int(((pred == c) & (y != c)).sum()), int(((pred != c) & (y == c)).sum())
        f1.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return float(sum(f1) / len(f1))


@torch.no_grad()
def class_metrics(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 500) -> dict[str, float]:
    """Accuracy (ties against the answer), macro-F1 (argmax) and mean NLL of ``model.log_probs``."""
    was = model.training
    model.eval()
    lp = torch.cat([model.log_probs(x[i:i + batch]) for i in range(0, len(x), batch)])
    model.train(was)
    return {"accuracy": float(strict_correct(lp, y).double().mean()), "macro_f1": macro_f1(lp.argmax(1), y),
            "nll": float(F.nll_loss(lp.clamp_min(-1e4), y))}


# -- training ---------------------------------------------------------------------------------------
def fit(model: nn.Module, data: ReaderData, tc: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """At most ``steps`` batches of ``-log p(y | x)``; validation accuracy every ``val_every``
    steps (and at step 0); the best validation weights are kept (early stopping after
    ``patience`` validations without a better one).  Returns steps, CPU and wall seconds."""
    torch.manual_seed(seed)
    X, Y, own = data.train_queries()
    Xv, Yv = data.rag.val_emb.float(), data.val_y
    keys = model.key_params() if hasattr(model, "key_params") else []
    vals = model.value_params() if hasattr(model, "value_params") else []
    dense = [p for p in model.parameters() if p.requires_grad and all(p is not q for q in keys + vals)]
    groups = [{"params": dense}] + ([{"params": vals, "lr": tc["value_lr"] or tc["lr"]}] if vals else [])
    opts = [geoopt.optim.RiemannianAdam(groups, lr=tc["lr"])]
    if keys:  # sparse key gradients (the rows read): a sparse optimizer, state only where read
        opts.append(geoopt.optim.SparseRiemannianAdam(keys, lr=tc["key_lr"] or tc["lr"]))
    g = torch.Generator().manual_seed(seed)
    best = {"accuracy": -1.0, "step": 0, "state": None}
    bad, step, order, pos = 0, 0, torch.randperm(len(X), generator=g), 0
    c0, w0 = time.process_time(), time.perf_counter()

    def validate():
        nonlocal bad
        m = class_metrics(model, Xv, Yv)
        if m["accuracy"] > best["accuracy"]:
            best.update(accuracy=m["accuracy"], step=step, val=m,
                        state={k: v.detach().clone() for k, v in model.state_dict().items()})
            bad = 0
        else:
            bad += 1

    validate()
    while step < tc["steps"] and bad <= tc["patience"]:
        if pos + tc["batch"] > len(order):
            order, pos = torch.randperm(len(X), generator=g), 0
        rows = order[pos:pos + tc["batch"]]
        pos += tc["batch"]
        loss = F.nll_loss(model.log_probs(X[rows], own[rows]), Y[rows])
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        step += 1
        if step % tc["val_every"] == 0 or step == tc["steps"]:
            validate()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    model.load_state_dict(best["state"])
    return {"best_step": best["step"], "steps_run": step, "train_cpu_seconds": cpu, "train_seconds": wall,
            "val": best["val"], "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def run_reader_task(config: Mapping[str, Any] | None = None, seed: int = 0, data: ReaderData | None = None,
                    log=print, test: bool = True) -> dict[str, Any]:
    """Train every system of :data:`SYSTEMS` on one split (``seed``), choose on validation,
    then score each once on test (``test=False``: validation only, for a sweep of options).
    Returns ``{"results": {system: {...}}, "data": ...}``."""
    cfg = merge_config(DEFAULTS, config)
    say = log or (lambda m: None)
    if data is None:
        dc = cfg["data"]
        data = build_reader_data(dc["n_sample"], dc["sample_seed"], seed, dc["n_test"], dc["n_val"], dc["cache"])
    results: dict[str, dict[str, Any]] = {}
    torch.manual_seed(seed)  # the initial weights depend on the seed only
    models = {n: m for n, m in make_systems(data, cfg).items() if n in cfg["systems"]}
    for name, model in models.items():
        info = fit(model, data, cfg["train"], seed)
        results[name] = info
        v = info["val"]
        say(f"{name:20s} val acc {100 * v['accuracy']:5.1f}  F1 {100 * v['macro_f1']:5.1f}  NLL {v['nll']:.3f}  "
            f"step {info['best_step']}/{info['steps_run']}  {info['train_cpu_seconds']:.0f} CPU s")
    Xt = data.rag.test_emb.float()
    for name, model in (models.items() if test else ()):  # every choice is made: test, once
        results[name]["test"] = class_metrics(model, Xt, data.test_y)
        results[name].pop("state", None)
    counts = torch.bincount(data.slot_y, minlength=data.n_classes)
    return {"results": results, "data": repr(data.rag), "config": copy.deepcopy(cfg), "models": models,
            "classes_in_memory": int((counts > 0).sum()), "majority_share": float(counts.max() / counts.sum()),
            "test_majority": float(torch.bincount(data.test_y).max() / len(data.test_y))}


def reader_table(out: Mapping[str, Any]) -> str:
    """A Markdown table of one :func:`run_reader_task` result: test accuracy, macro-F1 and NLL,
    validation accuracy, the step kept, train CPU seconds and trained parameters per system."""
    rows = ["| system | test acc | macro-F1 | NLL | val acc | step kept | train CPU s | trained params |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in out["results"].items():
        t = r.get("test", {"accuracy": math.nan, "macro_f1": math.nan, "nll": math.nan})
        rows.append(f"| {name} | {100 * t['accuracy']:.1f} | {100 * t['macro_f1']:.1f} | {t['nll']:.3f} | "
                    f"{100 * r['val']['accuracy']:.1f} | {r['best_step']} | {r['train_cpu_seconds']:.1f} | "
                    f"{r['trainable_params']:,} |")
    return "\n".join(rows)
