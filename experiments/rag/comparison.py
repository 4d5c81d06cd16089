r"""End-to-end retrieval-augmented model trained through the hyperbolic memory (WordNet hypernyms).

The task (data: :mod:`experiments.rag.data`): a memory of WordNet noun synsets, each
``"lemma: gloss"`` embedded by the frozen all-MiniLM-L6-v2; a held-out synset must retrieve
its hypernym.  Seven systems are compared on the same held-out queries (Hits@1, Hits@10,
MRR; the rank of the best accepted answer among all slots, ties counted against it, see
:func:`target_ranks`).

The protocol: every choice (the number of steps by early stopping on validation MRR) is
made on the validation queries; the test queries are scored once, at the end, for every
system (the training-free ones included).

(a) ``flat cosine`` — cosine between the query's and the slots' MiniLM embeddings (a plain
    vector store);
(b) ``untrained store`` — :class:`hypermem.store.Memory` with the hierarchy placement
    (children pulled toward their parent, depth by level) and the shell metric, the query
    at ``base_depth``: what the NumPy reference would do;
(c) ``learned linear`` — a linear map of the query features (identity init), scored by
    cosine with the slots' embeddings over a learned temperature, trained with the same
    loss (InfoNCE on the answer; here over *all* slots), data and steps;
(d) ``sibling vote`` — training-free use of the hierarchy: a candidate parent scores the
    best cosine among itself and its children (the query's nearest siblings vote for
    their parent);
(e) ``hyperbolic (trained)`` — :class:`hypermem.nn.HyperbolicRAG`: frozen sentence features, a learnable
    :class:`~hypermem.nn.BallEncoder`, a :class:`~hypermem.nn.HyperbolicMemory` whose keys
    start at the store's hierarchy placement and are trained, and the hierarchy-aware
    readout :class:`~hypermem.nn.ParentVote` (each candidate scored from its own key and its
    children's keys), trained end to end through exact top-k reads with InfoNCE on the
    answer only;
(f) ``direction cosine + vote`` — training-free: cosine with the store's key directions
    over ``linear.temperature``, through the untrained ``logaddexp`` vote;
(g) ``Euclidean twin`` — everything as (e) (linear query map, the same readout trained
    through the same top-k reads, keys at the store's directions, frozen) but cosine scores
    (:class:`~experiments.rag.baselines.EuclideanTwin`): what the hyperbolic memory
    must beat to show the geometry is the reason;
(h) ``learned linear + readout`` — the linear map (c) (cosine with the slots' own MiniLM
    embeddings) with the same readout as (e) and (g), trained like (g) through exact top-k
    reads (:func:`~experiments.rag.baselines.linear_readout`): a plain vector store with the
    learned readout.

(c) can get its own step budget (``linear.epochs``, default ``train.epochs``) so that it is
trained to convergence on validation (cheap on a subtree; on all nouns its full-softmax step
over every slot is the most expensive one); (e), (g) and (h) share ``train.epochs``.

:class:`RAGModule` is the Lightning module that trains (c), (e) or (g) and logs to TensorBoard;
:func:`run_comparison` runs the whole side-by-side evaluation from a config (see
``experiments/rag/rag_wordnet.yaml`` and ``experiments/rag/train_rag.py``).
"""

from __future__ import annotations

import copy
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import geoopt
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from hypermem.nn import HyperbolicRAG

from .baselines import (
    EuclideanTwin,
    LinearCosine,
    build_store,
    direction_vote,
    flat_cosine,
    linear_readout,
    sibling_vote,
    store_directions,
    store_scores,
)
from .data import RAGData, RAGDataModule, build_rag_data

__all__ = ["DEFAULTS", "SYSTEMS", "HyperbolicRAG", "LinearCosine", "RAGModule", "build_store", "evaluate",
           "flat_cosine", "ranking_metrics", "results_table", "run_comparison", "sibling_vote", "store_scores",
           "target_ranks", "train_step"]

DEFAULTS: dict[str, Any] = {
    "data": {"root": None, "n_test": 2000, "n_val": None, "seed": 0, "cache": True},
    "store": {"base_depth": 1.0, "depth_step": 0.5, "inherit": 0.25},
    "model": {"temperature": 0.1, "learn_keys": True, "two_heads": False, "k": 32, "query_depth": None,
              "combine": "logaddexp", "children": "max", "metric": "shell"},
    "linear": {"temperature": 0.05, "epochs": None},
    "train": {"epochs": 1, "max_steps": None, "batch_size": 256, "lr": 0.003, "key_lr": None, "seed": 0,
              "threads": 0, "val_every": None, "patience": None},
    "eval": {"batch_size": 250},
    "out": "runs/rag_wordnet",
}

SYSTEMS = ("(a) flat cosine", "(b) untrained store (shell)", "(c) learned linear", "(d) sibling vote",
           "(e) hyperbolic (trained)", "(f) direction cosine + vote", "(g) Euclidean twin (trained)",
           "(h) learned linear + readout")


# -- ranking ---------------------------------------------------------------------------------------
def target_ranks(scores: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Rank ``(B,)`` of the best accepted answer in each row, ties counted against it.

    ``targets`` is ``(B,)`` or ``(B, m)`` (every accepted answer, ``-1`` padded).  With ``t``
    the best accepted score of the row, the rank is ``1 + #{j not accepted : s_j >= t}``: a
    slot that ties with the answer outranks it (a rule that does not know the answer would
    break the tie at random; counting it against the answer is the pessimistic bound), and
    the other accepted answers never count (the "filtered" rank).
    """
    t = targets.view(len(scores), -1).to(scores.device).long()
    valid = t >= 0
    acc = scores.gather(1, t.clamp_min(0))
    best = acc.masked_fill(~valid, -math.inf).amax(1, keepdim=True)
    # #{j : s_j >= t} minus the distinct accepted answers among them (no (B, N) mask of answers)
    m = t.shape[1]
    earlier = torch.ones(m, m, dtype=torch.bool, device=t.device).tril(-1)
    first = valid & ~((t.unsqueeze(2) == t.unsqueeze(1)) & earlier).any(2)
    return 1 + (scores >= best).sum(1) - (first & (acc >= best)).sum(1)


def ranking_metrics(ranks: torch.Tensor) -> dict[str, float]:
    """Hits@1, Hits@10 (fractions) and mean reciprocal rank of 1-based ranks."""
    r = ranks.double()
    return {"hits@1": float((r <= 1).double().mean()), "hits@10": float((r <= 10).double().mean()),
            "mrr": float((1.0 / r).mean())}


@torch.no_grad()
def evaluate(score_fn: Callable[[torch.Tensor], torch.Tensor], queries: torch.Tensor, targets: torch.Tensor,
             batch_size: int = 250) -> dict[str, float]:
    """:func:`ranking_metrics` of ``score_fn(query batch) -> (B, N)`` over all queries."""
    ranks = []
    for i in range(0, len(queries), batch_size):
        ranks.append(target_ranks(score_fn(queries[i:i + batch_size]), targets[i:i + batch_size]).cpu())
    return ranking_metrics(torch.cat(ranks))


# -- training -----------------------------------------------------------------------------------------
def train_step(model: nn.Module, optimizers, x: torch.Tensor, targets: torch.Tensor, exclude: torch.Tensor,
               backward: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
    """One step of InfoNCE on the answer: ``model.train_scores``, cross-entropy, backward
    (``backward(loss)``, default ``loss.backward()``), every optimizer's step, then
    ``model.after_step()`` when the model has one.  Returns the loss."""
    cand, scores = model.train_scores(x, targets, exclude)
    labels = targets if cand is None else torch.zeros_like(targets)
    loss = F.cross_entropy(scores, labels)
    for o in optimizers:
        o.zero_grad()
    (backward or torch.Tensor.backward)(loss)
    for o in optimizers:
        o.step()
    after = getattr(model, "after_step", None)
    if after is not None:
        after()
    return loss


class RAGModule(L.LightningModule):
    """Trains :class:`LinearCosine` or :class:`HyperbolicRAG` with InfoNCE on the answer and
    logs ``train/loss``, ``train/temperature`` and the *validation* ``val/hits@1``,
    ``val/hits@10``, ``val/mrr`` to the logger (TensorBoard).

    Early stopping on validation: the weights with the best ``val/mrr`` so far are kept
    (:meth:`restore_best` puts them back after the run), and training stops after
    ``patience`` validations without a better one (``None``: never early).

    Trainable keys get :class:`geoopt.optim.SparseRiemannianAdam` (only the rows a step read
    move); everything else :class:`geoopt.optim.RiemannianAdam` (manual optimisation, two
    optimizers).  Frozen keys get no optimizer and no optimizer state.
    """

    def __init__(self, model: nn.Module, lr: float = 3e-3, key_lr: float | None = None, eval_batch: int = 250,
                 patience: int | None = None):
        super().__init__()
        self.model = model
        self.lr = float(lr)
        self.key_lr = float(key_lr) if key_lr is not None else float(lr)
        self.eval_batch = int(eval_batch)
        self.patience = None if patience is None else int(patience)
        self.automatic_optimization = False
        self._ranks: list[torch.Tensor] = []
        self.best: dict[str, Any] = {"mrr": -math.inf, "step": 0, "state": None, "metrics": None}
        self._bad = 0
        self.batches = 0

    def _keys(self):
        mem = getattr(self.model, "memory", None)
        return mem.keys if mem is not None and mem.keys.requires_grad else None

    def configure_optimizers(self):
        keys = self._keys()
        dense = [p for p in self.model.parameters() if p.requires_grad and p is not keys]
        opts = [geoopt.optim.RiemannianAdam(dense, lr=self.lr)]
        if keys is not None:
            opts.append(geoopt.optim.SparseRiemannianAdam([keys], lr=self.key_lr))
        return opts

    def training_step(self, batch, batch_idx):
        x, targets, exclude = batch
        opts = self.optimizers()
        opts = opts if isinstance(opts, list) else [opts]
        loss = train_step(self.model, opts, x, targets, exclude, backward=self.manual_backward)
        self.batches += 1
        self.log("train/loss", loss, prog_bar=False, on_step=True, on_epoch=False, batch_size=len(x))
        t = getattr(getattr(self.model, "memory", self.model), "log_temperature", None)
        if t is not None:
            self.log("train/temperature", t.detach().exp(), on_step=True, on_epoch=False, batch_size=len(x))
        return loss

    def validation_step(self, batch, batch_idx):
        x, targets = batch
        self._ranks.append(target_ranks(self.model.answer_scores(x), targets).cpu())

    def on_validation_epoch_end(self):
        if not self._ranks:
            return
        m = ranking_metrics(torch.cat(self._ranks))
        self._ranks = []
        for key, value in m.items():
            self.log(f"val/{key}", value)
        self.consider(m)

    def consider(self, m: Mapping[str, float]) -> None:
        """Keep the weights when the validation metrics ``m`` have the best MRR so far; ask the
        trainer to stop after ``patience`` validations without improvement."""
        if m["mrr"] > self.best["mrr"]:
            state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
            self.best = {"mrr": m["mrr"], "step": self.batches, "state": state, "metrics": m}
            self._bad = 0
        else:
            self._bad += 1
            if self.patience is not None and self._bad > self.patience and self._trainer is not None:
                self.trainer.should_stop = True

    def restore_best(self) -> None:
        """Put back the weights of the best validation MRR (no-op before any validation)."""
        if self.best["state"] is not None:
            self.model.load_state_dict(self.best["state"])
            reset = getattr(self.model, "after_load", None)
            if reset is not None:
                reset()


# -- the side-by-side run ----------------------------------------------------------------------------
def merge_config(base: Mapping[str, Any], over: Mapping[str, Any] | None) -> dict[str, Any]:
    """Nested dict merge: ``over``'s leaves replace ``base``'s (unknown keys are an error)."""
    out = copy.deepcopy(dict(base))
    for key, value in (over or {}).items():
        if key not in out:
            raise KeyError(f"unknown config key {key!r}; known: {sorted(out)}")
        if isinstance(out[key], dict):
            if not isinstance(value, Mapping):
                raise TypeError(f"config key {key!r} must be a mapping")
            out[key] = merge_config(out[key], value)
        else:
            out[key] = value
    return out


def quiet_lightning() -> None:
    """Lightning's INFO lines (accelerator, parameter counts) off for the comparison's short fits
    (set when a fit starts, not at import)."""
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _validate(module: RAGModule, X: torch.Tensor, y: torch.Tensor, batch: int) -> None:
    """Score the validation queries now and keep the weights if they are the best so far."""
    was = module.model.training
    module.model.eval()
    module.consider(evaluate(module.model.answer_scores, X, y, batch))
    module.model.train(was)


def _fit(module: RAGModule, dm: RAGDataModule, steps: int, logdir: Path, name: str, seed: int,
         val_every: int | None = None) -> dict[str, float]:
    """Train at most ``steps`` batches, validating before, every ``val_every`` batches and at
    the end; the best validation weights are restored.  Returns wall and CPU seconds, the
    steps run and the step chosen."""
    from lightning.pytorch.loggers import TensorBoardLogger

    quiet_lightning()
    L.seed_everything(seed, workers=True, verbose=False)
    Xv, yv = dm.val_queries()
    _validate(module, Xv, yv, dm.eval_batch)  # step 0 is a candidate too
    # In manual optimisation Lightning counts every optimizer step: scale to count batches.
    n_opt = len(module.configure_optimizers())
    every = max(1, int(val_every or steps))
    trainer = L.Trainer(max_steps=steps * n_opt, max_epochs=-1,
                        logger=TensorBoardLogger(str(logdir), name=name, version=""),
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, val_check_interval=every, check_val_every_n_epoch=None,
                        log_every_n_steps=1, accelerator="cpu", devices=1)
    t0, c0 = time.perf_counter(), time.process_time()
    trainer.fit(module, datamodule=dm)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    if module.batches % every:
        _validate(module, Xv, yv, dm.eval_batch)
    module.restore_best()
    return {"train_seconds": seconds, "train_cpu_seconds": cpu, "steps_run": module.batches,
            "best_step": module.best["step"]}


def run_comparison(config: Mapping[str, Any] | None = None, data: RAGData | None = None,
                   log: Callable[[str], None] | None = print) -> dict[str, Any]:
    """Build the data, score (a)-(h) on the validation queries, train (c), (e), (g) and (h) on
    the same data and batches (one step budget, (c) its own) (early stopping on validation MRR; TensorBoard logs
    under ``<out>/tb``), then score every system once on the test queries, and write
    ``<out>/results.json`` and ``<out>/results.md``.  Returns the results dict
    (``results[system]`` holds ``val`` and ``test`` metrics), plus the trained models under
    ``"models"`` (``linear``, ``hyperbolic``, and the ``store``).

    ``config`` overrides :data:`DEFAULTS` (nested keys).  ``data`` skips building the data
    (tests pass a small one; it needs validation queries).
    """
    cfg = merge_config(DEFAULTS, config)
    say = log or (lambda m: None)
    if cfg["train"]["threads"]:
        torch.set_num_threads(int(cfg["train"]["threads"]))
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    t0, c0 = time.perf_counter(), time.process_time()
    if data is None:
        dc = cfg["data"]
        data = build_rag_data(dc["root"], n_test=dc["n_test"], n_val=dc["n_val"], seed=dc["seed"],
                              cache=dc["cache"], log=say)
    say(f"{data} ({time.perf_counter() - t0:.0f}s)")
    if data.n_val == 0:
        raise ValueError("the data has no validation queries: every choice needs them (build it with n_val >= 1)")
    tc = cfg["train"]
    dm = RAGDataModule(data, batch_size=tc["batch_size"], eval_batch=cfg["eval"]["batch_size"], seed=tc["seed"])
    Xv, yv = dm.val_queries()
    ev = cfg["eval"]["batch_size"]
    scorers: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
    results: dict[str, dict[str, Any]] = {}

    def record(name, score_fn, info=None):
        scorers[name] = score_fn
        info = dict(info or {})
        # a trained system's validation metrics are those of its restored best weights (scored by _fit)
        val = info.pop("val", None) or evaluate(score_fn, Xv, yv, ev)
        results[name] = {"val": val, **info}
        m = results[name]["val"]
        say(f"{name:30s} val Hits@1 {100 * m['hits@1']:5.1f}  Hits@10 {100 * m['hits@10']:5.1f}  MRR {m['mrr']:.3f}")

    record(SYSTEMS[0], flat_cosine(data))
    sc = cfg["store"]
    store = build_store(data, sc["base_depth"], sc["depth_step"], sc["inherit"])
    record(SYSTEMS[1], store_scores(store))
    record(SYSTEMS[3], sibling_vote(data))
    def budget(epochs):
        return tc["max_steps"] or max(1, int(epochs * len(data.train_slots) / tc["batch_size"]))

    steps = budget(tc["epochs"])
    linear_steps = budget(cfg["linear"]["epochs"] or tc["epochs"])

    def fit(model, name, key_lr=None, n=steps):
        module = RAGModule(model, tc["lr"], key_lr, eval_batch=ev, patience=tc["patience"])
        info = _fit(module, dm, n, out / "tb", name, tc["seed"], tc["val_every"])
        info["val"] = module.best["metrics"]
        info["trainable_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
        return info

    linear = LinearCosine(data.slot_emb, cfg["linear"]["temperature"])
    record(SYSTEMS[2], linear.answer_scores, fit(linear, "linear", n=linear_steps))
    mc = cfg["model"]
    model = HyperbolicRAG(store, data.slot_parent, data.dim, temperature=mc["temperature"],
                          learn_keys=mc["learn_keys"], two_heads=mc["two_heads"], k=mc["k"],
                          query_depth=mc["query_depth"], combine=mc["combine"], children=mc["children"],
                          metric=mc["metric"])
    untrained = copy.deepcopy(model)
    record("(e0) hyperbolic (untrained)", untrained.answer_scores)
    record(SYSTEMS[4], model.answer_scores, fit(model, "hyperbolic", tc["key_lr"]))
    dirs = store_directions(store)
    tau = cfg["linear"]["temperature"]
    record(SYSTEMS[5], direction_vote(dirs, data.slot_parent, tau))
    twin = EuclideanTwin(dirs, data.slot_parent, tau, k=mc["k"], learn_keys=False, combine=mc["combine"],
                         children=mc["children"])
    record(SYSTEMS[6], twin.answer_scores, fit(twin, "euclidean_twin"))
    lin_vote = linear_readout(data.slot_emb, data.slot_parent, tau, k=mc["k"], combine=mc["combine"],
                              children=mc["children"])
    record(SYSTEMS[7], lin_vote.answer_scores, fit(lin_vote, "linear_readout"))
    # every choice is made: the test queries, once, for every system
    Xt, yt = dm.test_queries()
    for name, fn in scorers.items():
        results[name]["test"] = evaluate(fn, Xt, yt, ev)
    base = [SYSTEMS[i] for i in (0, 1, 2, 3, 5, 6, 7)]
    best = max(base, key=lambda s: results[s]["test"]["hits@10"])
    e = results[SYSTEMS[4]]["test"]
    summary = {
        "date": str(date.today()), "config": cfg, "data": repr(data), "steps": steps, "linear_steps": linear_steps,
        "train_queries": len(data.train_slots), "results": results, "best_baseline": best,
        "hits@10_gain_points": 100 * (e["hits@10"] - results[best]["test"]["hits@10"]),
        "mrr_gain": e["mrr"] - max(results[s]["test"]["mrr"] for s in base),
        "twin_gain": {m: e[m] - results[SYSTEMS[6]]["test"][m] for m in e},
        "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=str))
    (out / "results.md").write_text(results_table(summary))
    summary["models"] = {"linear": linear, "hyperbolic": model, "twin": twin, "linear_readout": lin_vote,
                         "store": store}
    say(f"(e) vs best baseline {best} on test: {summary['hits@10_gain_points']:+.1f} Hits@10 points, "
        f"MRR {summary['mrr_gain']:+.3f}; wrote {out / 'results.json'}")
    return summary


def results_table(summary: Mapping[str, Any]) -> str:
    """The results as a Markdown table (test metrics; validation MRR and the chosen step beside)."""
    lines = ["| system | Hits@1 | Hits@10 | MRR | val MRR | steps chosen / run | trained params | train CPU (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in summary["results"].items():
        m = r.get("test", r["val"])
        steps = f"{r['best_step']} / {r['steps_run']}" if "best_step" in r else ""
        t = f"{r['train_cpu_seconds']:.0f}" if "train_cpu_seconds" in r else ""
        n = f"{r['trainable_params']:,}" if "trainable_params" in r else ""
        lines.append(f"| {name} | {100 * m['hits@1']:.1f} | {100 * m['hits@10']:.1f} | {m['mrr']:.3f} | "
                     f"{r['val']['mrr']:.3f} | {steps} | {n} | {t} |")
    return "\n".join(lines) + "\n"
