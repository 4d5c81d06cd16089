r"""A compact memory for the WordNet hypernym task: d-dimensional keys (d << 384), hyperbolic
against its Euclidean twin.

Why.  A tree embeds with low distortion in a few hyperbolic dimensions, where Euclidean space
needs many (Nickel & Kiela, "Poincaré Embeddings for Learning Hierarchical Representations",
NeurIPS 2017; Sala, De Sa, Gu & Ré, "Representation Tradeoffs for Hyperbolic Embeddings", ICML
2018; Ganea, Bécigneul & Hofmann, "Hyperbolic Neural Networks", NeurIPS 2018).  Here the memory
stores one d-dimensional key per slot, placed by the tree of the memory alone, and a query map
sends the frozen 384-d MiniLM features of a held-out synset into the same space; the answer is
its hypernym.  At d = 384 with the shell metric the hyperbolic model and its twin tie (the score
is a function of the cosine only); at small d the geometry itself differs.

Keys.  Fitted to the transitive closure of the memory's tree (pairs ``(slot, ancestor)``, only
slots in memory: validation and test leaves are not) by
:func:`hypermem.hierarchy.fit_poincare_embeddings` (ball, ``c = 1``) or
:func:`hypermem.hierarchy.fit_euclidean_embeddings` (``R^d``), both the softmax ranking loss of
Nickel & Kiela over ``d(u, v)``.

Query map.  ``v = W x + b`` (``x`` the 384-d features), initialised by ridge regression onto
the memory's own keys (``min ||X W^T + b - T||^2 + lam ||W||^2`` over the slots, ``T`` the keys,
or for the ball their tangent vectors ``log_0(k) = artanh(||k||) k / ||k||``); the query point is
``q = v`` (Euclidean) or ``q = exp_0(v) = tanh(||v||) v / ||v||`` (ball, Ganea et al. 2018, Lemma 2,
``||v||`` capped at :data:`MAX_TANGENT` so that ``1 - ||q||^2`` stays representable in float64).

Scores ``s_j = -f(q, k_j) / tau`` (``tau`` learned) with, for the ball,

.. math::

    z(q, k) = \frac{2 \|q - k\|^2}{(1 - \|q\|^2)(1 - \|k\|^2)}, \qquad
    f_{dist} = d_{\mathbb B}(q, k) = \operatorname{arcosh}(1 + z), \qquad f_{sq} = z = \cosh d - 1,

and for the twin ``f_dist = ||q - k||``, ``f_sq = ||q - k||^2`` (``sq`` is the "squared" member
of each pair: ``cosh d - 1`` behaves as ``d^2 / 2`` for close points).  Both geometries score

.. math::

    s_j = -\big(f(q, k_j) - \beta\, f(0, k_j)\big) / \tau

with a learned depth offset ``beta`` (init 0): a query the map cannot place exactly is nearest to
the keys near the origin (general synsets; in the ball ``d(q, k) ~ rho_q + rho_k - 2 log(1/theta)``
for a key at angle ``theta`` and radius ``rho_k``), and ``beta`` pays a key back for its depth.  At
``beta = 1`` and a key far out, the ball score tends to the Busemann function of the key's ideal
point (``d(q, k) - d(0, k) -> B_xi(q)``, the score of ideal prototypes: Ghadimi Atigh, Keller-Ressel &
Mettes, "Hyperbolic Busemann Learning with Ideal Prototypes", NeurIPS 2021), the Euclidean one to
``-<q, k / ||k||>``.  Readout: the plain scores,
or :class:`hypermem.nn.ParentVote` over all slots (``logaddexp(s_p + a, max_{c in ch(p)} s_c +
b)``).  Loss: InfoNCE on the answer (the tree parent) over every slot, the query's own slot
excluded (as candidate and voter), :func:`experiments.rag.comparison.train_step`.

Training.  :func:`experiments.rag.comparison._fit` (early stopping on validation MRR, the best
weights restored); the query map, ``tau`` and the vote's offsets with Adam, trained keys with
geoopt's :class:`~geoopt.optim.RiemannianAdam` (on the ball it normalises by the Riemannian norm
of the gradient, so a step moves a key by about ``lr`` in hyperbolic distance however close to
the boundary it is; on ``R^d`` it is plain Adam).  The ball keys live on :class:`DeepBall`, a
geoopt ball whose projection allows norms up to ``1 - 1e-12`` (hyperbolic radius 28; geoopt's default ``1 - 1e-5``
would cut the fitted leaves, which sit at ``1 - 1e-10`` in 2-d, back to hyperbolic radius 12).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import geoopt
import torch
from geoopt.manifolds.stereographic import math as gmath
from torch import nn

from hypermem.hierarchy import (
    fit_euclidean_embeddings,
    fit_poincare_embeddings,
    reconstruction,
    transitive_closure,
)
from hypermem.nn import ParentVote

from .comparison import RAGModule, _fit, evaluate
from .data import RAGData, RAGDataModule

__all__ = ["GEOMETRIES", "DeepBall", "LowDimModule", "LowDimRAG", "closure_edges", "fit_keys", "oracle_placement", "pair_energy",
           "ridge_query_map", "run_lowdim"]

GEOMETRIES = ("poincare", "euclidean")
METRICS = ("dist", "sq")
READOUTS = ("plain", "vote")
MAX_TANGENT = 15.0  # ||v|| cap of exp_0: hyperbolic radius 30, 1 - ||q||^2 ~ 4e-13
BALL_EPS = 1e-12
# The hierarchy fit's step per geometry (each its best of a small grid on the seed-0 mammal memory's
# reconstruction MAP at d = 2 and 10: Poincaré 0.1 / 0.3 / 1.0, Euclidean 0.01 / 0.05 / 0.2 / 1.0).
FIT_LR = {"poincare": 0.3, "euclidean": 0.2}


class DeepBall(geoopt.PoincareBall):
    """geoopt's Poincaré ball (``c = 1``) whose projection keeps norms up to ``1 - BALL_EPS``."""

    def projx(self, x, *, dim=-1):
        return gmath.project(x, k=self.k, dim=dim, eps=BALL_EPS)

    def retr(self, x, u, *, dim=-1):
        return self.projx(x + u, dim=dim)


def closure_edges(parent: Sequence[int]) -> list[tuple[int, int]]:
    """Pairs ``(slot, ancestor)`` of the tree given by parent indices (``-1``: root): the
    transitive closure that the hierarchy embeddings are trained on
    (:func:`hypermem.hierarchy.transitive_closure`), by slot, each slot's ancestors from its
    parent up."""
    par = list(parent)
    children: dict[int, list[int]] = {}
    for c, p in enumerate(par):
        if p >= 0:
            children.setdefault(p, []).append(c)
    up: dict[int, list[int]] = {}
    for root in (i for i, p in enumerate(par) if p < 0):
        for a, d in transitive_closure(children, root):  # ancestors from the root down
            up.setdefault(d, []).append(a)
    return [(d, a) for d in sorted(up) for a in reversed(up[d])]


def fit_keys(data: RAGData, geometry: str, dim: int, seed: int = 0, epochs: int = 200, lr: float | None = None
             ) -> tuple[torch.Tensor, dict[str, float]]:
    """Keys ``(N, dim)`` (float64) of the memory's slots fitted to the closure of the memory's tree,
    with their reconstruction MAP / mean rank (Nickel & Kiela) and the CPU seconds of the fit."""
    edges = closure_edges(data.slot_parent.tolist())
    nodes = list(range(data.n_slots))
    lr = FIT_LR[geometry] if lr is None else lr
    fit = fit_poincare_embeddings if geometry == "poincare" else fit_euclidean_embeddings
    c0 = time.process_time()
    pts, _ = fit(edges, dim=dim, epochs=epochs, lr=lr, seed=seed, nodes=nodes)
    cpu = time.process_time() - c0
    K = torch.stack([pts[n] for n in nodes]).double()
    return K, {"fit_cpu_seconds": cpu, **key_quality(K, data, geometry)}


def oracle_placement(data: RAGData, geometry: str, dim: int, seed: int = 0, epochs: int = 200,
                     betas: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)) -> dict[str, Any]:
    """What the geometry could do with a perfectly placed query: keys fitted (as :func:`fit_keys`)
    to the closure of the whole tree, the validation and test leaves included with their tree
    parent (so a held-out leaf's point knows its answer: a diagnostic, not a system), then each
    held-out leaf's accepted answers ranked among the memory's slots by
    ``-(f_dist(p, k_j) - beta f_dist(0, k_j))`` from its fitted point ``p`` (ties against the
    answer).  Returns the test metrics at ``beta = 0`` and at the ``beta`` of ``betas`` with the
    best validation MRR."""
    from .comparison import ranking_metrics, target_ranks

    par = data.slot_parent.tolist()
    n, held = data.n_slots, torch.cat([data.val_target, data.test_target]).tolist()
    edges = closure_edges(par)
    for i, t in enumerate(held):
        while t >= 0:  # the held-out leaf, then its tree parent and the parent's ancestors
            edges.append((n + i, t))
            t = par[t]
    nodes = list(range(n + len(held)))
    fit = fit_poincare_embeddings if geometry == "poincare" else fit_euclidean_embeddings
    pts, _ = fit(edges, dim=dim, epochs=epochs, lr=FIT_LR[geometry], seed=seed, nodes=nodes)
    P = torch.stack([pts[v] for v in nodes]).double()
    if geometry == "poincare":
        P = gmath.project(P, k=torch.tensor(-1.0, dtype=P.dtype), eps=BALL_EPS)
    K = P[:n]
    f = pair_energy(P[n:], K, geometry, "dist")
    depth = pair_energy(K.new_zeros(1, dim), K, geometry, "dist")
    v = data.n_val

    def metrics(beta, rows, targets):
        return ranking_metrics(target_ranks(-(f[rows] - beta * depth), targets))

    best = max(betas, key=lambda b: metrics(b, slice(0, v), data.val_targets)["mrr"])
    return {"beta0": metrics(0.0, slice(v, None), data.test_targets), "beta": best,
            "chosen": metrics(best, slice(v, None), data.test_targets)}


def key_quality(K: torch.Tensor, data: RAGData, geometry: str) -> dict[str, float]:
    """Reconstruction MAP and mean rank of keys ``K`` on the memory's closure."""
    edges = closure_edges(data.slot_parent.tolist())
    K = K.detach().double()
    if geometry == "poincare":  # reconstruction checks ||x|| < 1 strictly
        K = gmath.project(K, k=torch.tensor(-1.0, dtype=K.dtype), eps=BALL_EPS)
    r = reconstruction(K, edges, geometry, nodes=list(range(data.n_slots)))
    return {"map": float(r.mean_average_precision), "mean_rank": float(r.mean_rank)}


def tangent_of(K: torch.Tensor) -> torch.Tensor:
    """``log_0(k) = artanh(||k||) k / ||k||`` (row-wise, ``c = 1``)."""
    n = K.norm(dim=1, keepdim=True).clamp(1e-15, 1 - BALL_EPS)
    return torch.atanh(n) * K / n


def ridge_query_map(X: torch.Tensor, T: torch.Tensor, lam: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(W, b)`` minimising ``||X W^T + b - T||^2 + lam ||W||^2`` (``b`` unpenalised: centred
    least squares ``W^T = (Xc^T Xc + lam I)^{-1} Xc^T Tc``, ``b = mean(T) - W mean(X)``)."""
    X, T = X.double(), T.double()
    mx, mt = X.mean(0), T.mean(0)
    Xc, Tc = X - mx, T - mt
    A = Xc.T @ Xc + lam * torch.eye(X.shape[1], dtype=X.dtype)
    Wt = torch.linalg.solve(A, Xc.T @ Tc)
    return Wt.T.contiguous(), mt - mx @ Wt


def pair_energy(q: torch.Tensor, K: torch.Tensor, geometry: str, metric: str) -> torch.Tensor:
    """``f(q_i, k_j)`` ``(B, N)`` of the module docstring (ball: ``arcosh(1 + z)`` or ``z``;
    Euclidean: ``||q - k||`` or ``||q - k||^2``)."""
    sq = torch.cdist(q, K, compute_mode="donot_use_mm_for_euclid_dist").pow(2)
    if geometry == "euclidean":
        return sq if metric == "sq" else (sq + 1e-18).sqrt()
    aq = (1 - q.pow(2).sum(1, keepdim=True)).clamp_min(1e-15)
    ak = (1 - K.pow(2).sum(1)).clamp_min(1e-15)
    z = 2 * sq / (aq * ak.unsqueeze(0))
    if metric == "sq":
        return z
    zc = z.clamp_min(1e-15)
    return torch.log1p(zc + (zc * (zc + 2)).sqrt())  # arcosh(1 + z)


class LowDimRAG(nn.Module):
    """Query map -> d-dimensional memory (ball or ``R^d``) -> plain or :class:`ParentVote` readout
    (see the module docstring).  Computes in float64; ``answer_scores`` / ``train_scores`` follow
    the interface of :func:`experiments.rag.comparison.train_step` (scores over all slots)."""

    def __init__(self, keys: torch.Tensor, parent: torch.Tensor, feature_dim: int, geometry: str = "poincare",
                 metric: str = "dist", readout: str = "plain", learn_keys: bool = False, temperature: float = 0.1,
                 init: tuple[torch.Tensor, torch.Tensor] | None = None):
        super().__init__()
        if geometry not in GEOMETRIES or metric not in METRICS or readout not in READOUTS:
            raise ValueError(f"geometry {geometry!r}, metric {metric!r}, readout {readout!r}: expected one of "
                             f"{GEOMETRIES}, {METRICS}, {READOUTS}")
        self.geometry, self.metric, self.readout_mode = geometry, metric, readout
        keys = keys.detach().double().clone()
        if geometry == "poincare":
            self.ball = DeepBall()
            self.keys = geoopt.ManifoldParameter(self.ball.projx(keys), manifold=self.ball,
                                                 requires_grad=bool(learn_keys))
        else:
            self.keys = nn.Parameter(keys, requires_grad=bool(learn_keys))
        self.query = nn.Linear(feature_dim, keys.shape[1], dtype=torch.float64)
        if init is not None:
            with torch.no_grad():
                self.query.weight.copy_(init[0])
                self.query.bias.copy_(init[1])
        self.log_temperature = nn.Parameter(torch.tensor(math.log(temperature), dtype=torch.float64))
        self.depth_bias = nn.Parameter(torch.zeros((), dtype=torch.float64))
        self.vote = ParentVote(parent) if readout == "vote" else None

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """The query points ``(B, d)``: ``W x + b``, then ``exp_0`` on the ball."""
        v = self.query(x.to(torch.float64))
        if self.geometry == "euclidean":
            return v
        n = v.norm(dim=1, keepdim=True).clamp_min(1e-15)
        return torch.tanh(n.clamp_max(MAX_TANGENT)) * v / n

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """``-(f(q, k_j) - beta f(0, k_j)) / tau`` for every slot ``(B, N)``."""
        f = pair_energy(self.embed(x), self.keys, self.geometry, self.metric)
        depth = pair_energy(self.keys.new_zeros(1, self.keys.shape[1]), self.keys, self.geometry, self.metric)
        return -(f - self.depth_bias * depth) / self.log_temperature.exp()

    def answer_scores(self, x: torch.Tensor) -> torch.Tensor:
        s = self.scores(x)
        return s if self.vote is None else self.vote.full(s)

    def train_scores(self, x, targets, exclude):
        """Scores over all slots with the own slot ``exclude`` removed (neither candidate nor
        voter); the label is the target itself."""
        rows = torch.arange(len(x))
        s = self.scores(x)
        s = s.index_put((rows, exclude), torch.tensor(-math.inf, dtype=s.dtype))
        if self.vote is not None:
            s = self.vote.full(s).index_put((rows, exclude), torch.tensor(-math.inf, dtype=s.dtype))
        return None, s

    def after_step(self) -> None:
        """Nothing cached; here so :func:`train_step`'s hook finds one."""


class LowDimModule(RAGModule):
    """:class:`RAGModule` with dense optimizers: Adam (geoopt's RiemannianAdam on Euclidean
    parameters) for the query map, ``tau`` and the vote; RiemannianAdam at ``key_lr`` for trained keys."""

    def configure_optimizers(self):
        keys = self.model.keys
        dense = [p for p in self.model.parameters() if p.requires_grad and p is not keys]
        opts = [geoopt.optim.RiemannianAdam(dense, lr=self.lr)]
        if keys.requires_grad:
            opts.append(geoopt.optim.RiemannianAdam([keys], lr=self.key_lr))
        return opts


def initial_temperature(model: LowDimRAG, X: torch.Tensor, targets: torch.Tensor, scale: float = 0.1) -> float:
    """``scale`` times the mean energy ``f(q, k_answer)`` of the untrained model on ``X`` (the same
    rule for every geometry and metric, so the starting logits have a comparable spread)."""
    with torch.no_grad():
        f = pair_energy(model.embed(X), model.keys, model.geometry, model.metric)
        return max(float(scale * f.gather(1, targets.view(-1, 1)).mean()), 1e-6)


def trained_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def run_lowdim(data: RAGData, dim: int, seed: int = 0, geometries: Sequence[str] = GEOMETRIES,
               metrics: Sequence[str] = METRICS, readouts: Sequence[str] = READOUTS,
               key_lrs: Sequence[float] = (0.003, 0.03), lrs: Sequence[float] = (0.003, 0.03), epochs: float = 10,
               batch_size: int = 64, val_every: int = 8, patience: int | None = 3, fit_epochs: int = 200,
               ridge: float = 1.0, out: str | Path = "runs/bench_rag_lowdim", keys: dict | None = None,
               log: Callable[[str], None] | None = print) -> dict[str, Any]:
    """Fit, tune on validation and test once the low-dimensional memory of each geometry.

    For each geometry: keys fitted to the memory's closure (:func:`fit_keys`, or given in
    ``keys[geometry]``), then one training run per ``metric x readout x key option`` (frozen
    keys, or trained at each of ``key_lrs``), the same grid, data, batches and step budget for
    every geometry.  Choices, all on validation MRR: per geometry, readout and variant
    (``frozen`` / ``trained``) the best metric (and key lr); then per variant the readout with
    the best validation MRR averaged over the geometries (the same readout for both).  The
    chosen models, and the keys alone (the untrained readout-free query map), are scored once
    on the test queries.
    """
    say = log or (lambda m: None)
    dm = RAGDataModule(data, batch_size=batch_size, eval_batch=250, seed=seed)
    Xv, yv = dm.val_queries()
    Xt, yt = dm.test_queries()
    Xtr, ytr, _ = dm.train_queries()
    steps = max(1, int(epochs * len(data.train_slots) / batch_size))
    res: dict[str, Any] = {"dim": dim, "seed": seed, "steps": steps, "data": repr(data), "geometries": {}}
    fits: dict[tuple, dict[str, Any]] = {}
    for g in geometries:
        if keys is not None and g in keys:
            K, quality = keys[g], key_quality(keys[g], data, g)
        else:
            K, quality = fit_keys(data, g, dim, seed=seed, epochs=fit_epochs)
        target = tangent_of(K) if g == "poincare" else K
        init = ridge_query_map(data.slot_emb, target, ridge)
        gres = {"keys": quality, "runs": []}
        res["geometries"][g] = gres
        say(f"d={dim} seed={seed} {g}: keys MAP {quality['map']:.3f} mean rank {quality['mean_rank']:.1f}")
        for r in readouts:
            for m in metrics:
                for lr, klr in [(a, b) for a in lrs for b in (None, *key_lrs)]:
                    model = LowDimRAG(K, data.slot_parent, data.dim, g, m, r, learn_keys=klr is not None, init=init)
                    with torch.no_grad():
                        model.log_temperature.fill_(math.log(initial_temperature(model, Xtr, ytr)))
                    start = evaluate(model.answer_scores, Xv, yv)
                    module = LowDimModule(model, lr=lr, key_lr=klr, patience=patience)
                    info = _fit(module, dm, steps, Path(out) / "tb", f"d{dim}_s{seed}_{g}_{r}_{m}_{lr}_{klr}", seed,
                                val_every)
                    run = {"readout": r, "metric": m, "lr": lr, "key_lr": klr, "variant": "frozen" if klr is None else "trained",
                           "val": module.best["metrics"], "val_untrained": start, **info,
                           "trainable_params": trained_params(model)}
                    if klr is not None:
                        run["trained_keys"] = key_quality(model.keys, data, g)
                    gres["runs"].append(run)
                    fits[(g, r, m, lr, klr)] = {"model": model, "run": run}
                    say(f"  {g:9s} {r:5s} {m:4s} lr {lr} key_lr {klr!s:6s} val MRR {run['val']['mrr']:.3f} "
                        f"(untrained {start['mrr']:.3f}) step {info['best_step']}/{info['steps_run']} "
                        f"{info['train_cpu_seconds']:.1f} CPU s")
        # the keys alone: the ridge query map, plain scores, nearest key (no training)
        probe = LowDimRAG(K, data.slot_parent, data.dim, g, "dist", "plain", init=init)
        gres["ridge_only"] = {"val": evaluate(probe.answer_scores, Xv, yv), "test": evaluate(probe.answer_scores, Xt, yt)}
    chosen: dict[str, Any] = {}
    for variant in ("frozen", "trained"):
        best: dict[tuple, dict] = {}
        for (g, r, *_), f in fits.items():
            if f["run"]["variant"] != variant:
                continue
            if (g, r) not in best or f["run"]["val"]["mrr"] > best[(g, r)]["run"]["val"]["mrr"]:
                best[(g, r)] = f
        r_star = max(readouts, key=lambda r: sum(best[(g, r)]["run"]["val"]["mrr"] for g in geometries))
        chosen[variant] = {"readout": r_star}
        for g in geometries:
            f = best[(g, r_star)]
            test = evaluate(f["model"].answer_scores, Xt, yt)  # the only test scoring of a trained model
            chosen[variant][g] = {**{k: v for k, v in f["run"].items() if k != "val_untrained"}, "test": test}
            say(f"d={dim} seed={seed} {variant} {g}: {r_star} {f['run']['metric']} lr {f['run']['lr']} key_lr {f['run']['key_lr']} "
                f"test Hits@1 {100 * test['hits@1']:.1f} Hits@10 {100 * test['hits@10']:.1f} MRR {test['mrr']:.3f}")
    res["chosen"] = chosen
    res["tuning_cpu_seconds"] = {g: sum(r["train_cpu_seconds"] for r in res["geometries"][g]["runs"])
                                 for g in geometries}
    return copy.deepcopy(res)
