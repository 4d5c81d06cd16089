r"""Training Poincaré / Euclidean hierarchy embeddings and entailment cones.

Nickel & Kiela, "Poincaré Embeddings for Learning Hierarchical Representations"
(NeurIPS 2017):

* one point per node in the unit ball (:class:`~hypermem.hierarchy.model.HierarchyEmbedding`);
* the softmax loss over the positive and ``k`` negatives not related to the source
  (:func:`~hypermem.hierarchy.ranking_loss.softmax_ranking_loss`, eq. 6), negatives drawn on
  tensors by :class:`~hypermem.hierarchy.sampling.NegativeSampler`;
* Riemannian SGD: ``theta <- proj(theta - lr (1 - ||theta||^2)^2 / 4 grad)`` (eqs. 4-5)
  (``optimizer="rsgd"``, the default) or :class:`geoopt.optim.RiemannianAdam`
  (``optimizer="radam"``);
* a *burn-in*: the first ``burn_in`` epochs use ``lr * burn_in_lr_factor`` and draw
  negatives by ``degree^0.75``, which places the points roughly before the real
  learning rate spreads them out; then ``lr`` itself, constant unless a
  ``final_lr_factor < 1`` asks for a linear decay (:func:`lr_factor`).

Ganea, Bécigneul & Hofmann's entailment cones (ICML 2018) train with the same loop
(:func:`fit_entailment_cones`).

``lr`` is the step on the loss *summed* over a batch (each pair's gradient adds to the
rows it touches; no division by the batch size), as in poincare-memory's trainer, so
the same ``lr`` and ``batch_size`` mean the same steps in both.

The settings are one frozen dataclass per objective
(:class:`~hypermem.hierarchy.objectives.PoincareConfig`, ``EuclideanConfig``,
``ConeConfig``); the ``fit_*`` functions build them from their arguments and call
:func:`fit_hierarchy`, whose loop is :func:`train_embedding`.  One epoch is a random
permutation of the pairs cut into batches; each step runs in the speed tier
:func:`~hypermem.hierarchy.steps.choose_tier` picks (autograd, closed form, compiled).
In the closed-form tiers the negatives of the whole epoch are drawn at once and the
epoch's steps run in one call; otherwise each batch draws its negatives and takes one
autograd step.  The same code runs on a GPU with ``device="cuda"``.
:mod:`hypermem.train` runs the same objectives and steps in a Lightning loop.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..geometry import PoincareBall
from .cones import DEFAULT_K, DEFAULT_MARGIN
from .evaluation import reconstruction
from .fused_sgd import sample_epoch
from .model import HierarchyEmbedding
from .objectives import (
    ConeConfig,
    EuclideanConfig,
    LossFn,
    PoincareConfig,
    RankingConfig,
    RankingObjective,
    softmax_objective,
)
from .relations import Relations, as_relations
from .steps import OPTIMIZERS, autograd_step, choose_tier, make_optimizer, make_step_optimizer, take_step

__all__ = ["OPTIMIZERS", "TrainingReport", "fit_entailment_cones", "fit_euclidean_embeddings", "fit_hierarchy",
           "fit_poincare_embeddings", "lr_factor", "make_optimizer", "poincare_start", "radius_limit_message",
           "softmax_objective", "train_embedding"]

LIMIT_SHARE = 0.1
"""Share of the points at the radius limit (:func:`radius_limit_message`) from which training warns."""


@dataclass
class TrainingReport:
    """What happened during training: epochs run, the mean loss of every epoch, the last
    one, wall time, and evaluations (``history``: dicts with ``epoch``, ``map``,
    ``mean_rank``) when an ``eval_every`` was given.  ``seconds`` is the whole wall time,
    evaluations included; ``eval_seconds`` is their part (0 without ``eval_every``), so
    ``seconds - eval_seconds`` is the training alone."""

    epochs: int
    final_loss: float
    losses: list[float]
    seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    settings: dict = field(default_factory=dict)
    eval_seconds: float = 0.0


def _check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def lr_factor(epoch: int, epochs: int, burn_in: int, burn_in_lr_factor: float, final_lr_factor: float) -> float:
    """Learning-rate multiplier at ``epoch`` (0-based): ``burn_in_lr_factor`` during the
    burn-in, then a linear decay from 1 to ``final_lr_factor`` over the remaining epochs."""
    if epoch < burn_in:
        return burn_in_lr_factor
    span = max(epochs - burn_in - 1, 1)
    t = min(max(epoch - burn_in, 0) / span, 1.0)
    return 1.0 + (final_lr_factor - 1.0) * t


def radius_limit_message(model: HierarchyEmbedding, how: str = "dtype=torch.float64",
                         share: float = LIMIT_SHARE) -> str | None:
    r"""Why a Poincaré embedding in a dtype narrower than float64 lost its levels, or ``None``.

    The projection after each step (Nickel & Kiela 2017, eq. 5, with hypermem's margin ``m``
    of the dtype: ``1e-3`` in float32) keeps ``sqrt(c) ||x|| <= 1 - m``, i.e. hyperbolic radii
    up to ``r_max = (2 / sqrt(c)) artanh(1 - m)`` (7.6 in float32, 23.7 in float64).  Points
    that training pushes further all stop on that one sphere, where their depths merge.  A
    point counts as *at the limit* when ``sqrt(c) ||x|| >= 1 - 1.5 m``; when at least
    ``share`` of the points are (small dimensions in float32 reach it: RESULTS, "Reconstruction
    cost by size"), the
    message counts them and names float64 (``how``: the setting that asks for it).  ``None`` for Euclidean embeddings, float64 and fewer points at the limit.
    """
    w = model.weight.detach()
    if model.geometry != "poincare" or w.dtype == torch.float64 or w.shape[0] == 0:
        return None
    m = model.ball.margin(w.dtype)
    at = int((torch.linalg.vector_norm(w, dim=1) * math.sqrt(model.ball.curvature) >= 1 - 1.5 * m).sum())
    if at < share * w.shape[0]:
        return None
    return (f"{at} of {w.shape[0]} points ({at / w.shape[0]:.0%}) sit at the largest radius {w.dtype} holds "
            f"(norm {(1 - m) / math.sqrt(model.ball.curvature):.6g}, hyperbolic radius {model.ball.max_radius(w.dtype):.3g}): their levels merge there "
            f"and the rankings among them are lost; train in float64 ({how}), whose limit is "
            f"{model.ball.max_radius(torch.float64):.3g}")


def train_embedding(model: HierarchyEmbedding, relations: Relations, *, epochs: int, lr: float,
                    batch_size: int, negatives: int = 50, burn_in: int = 0, burn_in_lr_factor: float = 0.1,
                    final_lr_factor: float = 1.0, symmetric_negatives: bool = False,
                    optimizer: str = "rsgd", seed: int = 0, loss_fn: LossFn | None = None,
                    after_step: Callable[[HierarchyEmbedding], None] | None = None,
                    eval_every: int = 0, evaluate: Callable[[HierarchyEmbedding], dict] | None = None,
                    log: Callable[[str], None] | None = None, workers: int = 1, objective=None,
                    generator: torch.Generator | None = None) -> TrainingReport:
    """Train ``model`` on the pairs of ``relations`` (on the model's device).

    ``objective`` (default: Nickel & Kiela's loss in the model's geometry,
    :class:`~hypermem.hierarchy.objectives.RankingObjective`) draws ``negatives`` per pair
    (from ``generator``, default the loop's, seeded by ``seed``), gives the loss and the
    constraint after each step.  A custom ``loss_fn(model, batch, burning)`` (and
    ``after_step(model)``, e.g. a constraint) replaces it, through autograd.  Each epoch
    shuffles the pairs; the steps run in the tier of
    :func:`~hypermem.hierarchy.steps.choose_tier` (closed form for ``optimizer="rsgd"`` on
    the ranking loss: negatives drawn once per epoch).  The learning rate follows
    :func:`lr_factor`.  ``evaluate(model) -> dict`` runs every ``eval_every`` epochs and
    after the last one; its results go to the report's ``history``.  ``workers > 1`` runs
    the compiled closed-form epoch in that many threads at once (Hogwild, see
    :func:`~hypermem.hierarchy.compiled_sgd.softmax_sgd_epoch`; no effect elsewhere).
    """
    epochs = _check_positive_int("epochs", epochs)
    burn_in = _check_positive_int("burn_in", burn_in)
    if _check_positive_int("workers", workers) < 1:
        raise ValueError("workers must be at least 1")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if not (0 < burn_in_lr_factor <= 1):
        raise ValueError(f"burn_in_lr_factor must lie in (0, 1], got {burn_in_lr_factor}")
    if not (0 < final_lr_factor <= 1):
        raise ValueError(f"final_lr_factor must lie in (0, 1], got {final_lr_factor}")
    if len(relations) == 0:
        raise ValueError("no related pairs to train on")
    device = model.weight.device
    rel = relations.to(device)
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    custom = loss_fn is not None or after_step is not None
    if loss_fn is None and _check_positive_int("negatives", negatives) < 1:
        raise ValueError("negatives must be at least 1")
    objective = objective if objective is not None else RankingObjective(model.geometry)
    tier = choose_tier(objective, optimizer, model.weight, custom=custom)
    if tier != "autograd":
        sampler = objective.sampler(rel, g, symmetric_negatives)
    elif loss_fn is None:
        draw = objective.draw(rel, negatives, generator if generator is not None else g, symmetric_negatives)
    opt = make_step_optimizer(tier, model, optimizer, lr)
    pairs = rel.pairs
    n_pairs = pairs.shape[0]
    losses: list[float] = []
    history: list[dict] = []
    start, eval_seconds = time.perf_counter(), 0.0
    for epoch in range(epochs):
        burning = epoch < burn_in
        for group in opt.param_groups:
            group["lr"] = lr * lr_factor(epoch, epochs, burn_in, burn_in_lr_factor, final_lr_factor)
        perm = torch.randperm(n_pairs, device=device, generator=g)
        total = torch.zeros((), dtype=torch.float64, device=device)
        if tier != "autograd":
            shuffled = pairs[perm]
            cand, masked_out = sample_epoch(sampler, shuffled, negatives, unigram=burning)
            total += opt.steps(shuffled[:, 0], cand, masked_out, batch_size, workers)
        else:
            for b in range(0, n_pairs, batch_size):
                batch = pairs[perm[b:b + batch_size]]
                if loss_fn is None:
                    loss = take_step(opt, tier, objective, model, batch, *draw(batch, burning))
                else:
                    loss = autograd_step(opt, lambda b=batch, burn=burning: loss_fn(model, b, burn),
                                         None if after_step is None else lambda: after_step(model))
                total += loss.to(torch.float64)
        mean = float(total) / n_pairs
        if not math.isfinite(mean):
            raise FloatingPointError(f"loss became {mean} at epoch {epoch + 1}; lower lr (now {lr})")
        losses.append(mean)
        last = epoch + 1 == epochs
        if evaluate is not None and ((eval_every and (epoch + 1) % eval_every == 0) or last):
            t_eval = time.perf_counter()
            result = dict(evaluate(model))
            eval_seconds += time.perf_counter() - t_eval
            result["epoch"] = epoch + 1
            history.append(result)
            if log:
                log(f"epoch {epoch + 1}: loss {mean:.4f} " + " ".join(
                    f"{k} {v:.4f}" for k, v in result.items() if k != "epoch" and isinstance(v, float)))
        elif log and (epoch + 1) % max(1, epochs // 10) == 0:
            log(f"epoch {epoch + 1}: loss {mean:.4f}")
    return TrainingReport(epochs=epochs, final_loss=losses[-1] if losses else float("nan"), losses=losses,
                          seconds=time.perf_counter() - start, history=history, eval_seconds=eval_seconds)


def fit_hierarchy(edges, config: RankingConfig | ConeConfig, *, nodes: Sequence[Hashable] | None = None,
                  log: Callable[[str], None] | None = None, init: Mapping | torch.Tensor | None = None
                  ) -> tuple[dict, TrainingReport]:
    """Train the objective of ``config`` on ``edges`` (``(u, v)`` related pairs or a
    :class:`Relations`): :class:`~hypermem.hierarchy.objectives.PoincareConfig`,
    ``EuclideanConfig`` or ``ConeConfig``.  ``nodes`` fixes the node order, ``init`` the
    starting points (see :func:`fit_poincare_embeddings` and :func:`fit_entailment_cones`),
    ``log`` receives progress lines.  Returns ``node -> point`` and a :class:`TrainingReport`.
    """
    if isinstance(config, ConeConfig):
        return _fit_cones(edges, config, nodes, log, init)
    if not isinstance(config, RankingConfig):
        raise TypeError(f"config must be a PoincareConfig, EuclideanConfig or ConeConfig, got {type(config).__name__}")
    rel = as_relations(edges, nodes=nodes, device=config.device)
    rel.check_acyclic()
    sparse = rel.n > 20000 if config.sparse is None else config.sparse
    model = HierarchyEmbedding(rel.n, config.dim, geometry=config.geometry, ball=config.ball, sparse=sparse,
                               seed=config.seed, dtype=config.dtype, device=config.device)
    if init is not None:
        _load_init(model, rel, init)
    evaluate = None
    if config.eval_every:
        def evaluate(m):
            r = reconstruction(m.points(), rel, m)
            return {"map": r.mean_average_precision, "mean_rank": r.mean_rank}

    c = config
    if 0 < c.epochs <= c.burn_in:   # the default burn_in=20 of a short run (the caller of fit_*_embeddings)
        warnings.warn(f"the burn-in lasts {c.burn_in} epochs but training lasts {c.epochs}: every epoch runs at lr * "
                      f"{c.burn_in_lr_factor:g} with burn-in negatives (degree^0.75); lower burn_in (e.g. burn_in=0) "
                      f"or train more epochs", UserWarning, stacklevel=3)
    report = train_embedding(model, rel, epochs=c.epochs, lr=c.lr, negatives=c.negatives, batch_size=c.batch_size,
                             burn_in=c.burn_in, burn_in_lr_factor=c.burn_in_lr_factor,
                             final_lr_factor=c.final_lr_factor, optimizer=c.optimizer, seed=c.seed,
                             eval_every=c.eval_every, evaluate=evaluate, log=log, workers=c.workers,
                             objective=c.objective())
    report.settings = c.settings(model.weight.device, sparse)
    limit = radius_limit_message(model)
    if limit:
        warnings.warn(limit, RuntimeWarning, stacklevel=3)
    pts = model.points()
    return {node: pts[i] for i, node in enumerate(rel.nodes)}, report


def _load_init(model: HierarchyEmbedding, rel: Relations, init) -> None:
    """Copy starting points into ``model``: a ``node -> point`` mapping covering every
    node, or an ``(n, dim)`` tensor in the order of ``rel.nodes``; Poincaré points are
    projected into the ball."""
    if isinstance(init, Mapping):
        missing = [n for n in rel.nodes if n not in init]
        if missing:
            raise KeyError(f"init has no point for {len(missing)} node(s), e.g. {missing[0]!r}")
        init = torch.stack([torch.as_tensor(init[n], dtype=torch.float64) for n in rel.nodes])
    init = torch.as_tensor(init)
    if init.shape != model.weight.shape:
        raise ValueError(f"init must have shape {tuple(model.weight.shape)} (nodes, dim), got {tuple(init.shape)}")
    if not bool(torch.isfinite(init).all()):
        raise ValueError("init has non-finite coordinates")
    init = init.to(dtype=model.weight.dtype, device=model.weight.device)
    if model.geometry == "poincare":
        projected = model.ball.projx(init)
        clipped = int((projected != init).any(dim=1).sum())
        if clipped:
            warnings.warn(f"init: {clipped} of {init.shape[0]} points lie beyond the ball's margin for "
                          f"{init.dtype} (radius {model.ball.max_radius(init.dtype):.3g}) and are projected onto it, "
                          f"which merges their levels; a shallower start (e.g. shadow_layout with larger shrink "
                          f"and max_shrink) keeps them apart", RuntimeWarning, stacklevel=4)
        init = projected
    with torch.no_grad():
        model.weight.copy_(init)


def fit_poincare_embeddings(edges, dim: int = 10, epochs: int = 200, lr: float = 0.3, negatives: int = 50,
                            burn_in: int = 20, burn_in_lr_factor: float = 0.1, batch_size: int = 32,
                            seed: int = 0, ball: PoincareBall | None = None, *, optimizer: str = "rsgd",
                            final_lr_factor: float = 1.0,
                            device: torch.device | str | None = None, dtype: torch.dtype = torch.float64,
                            sparse: bool | None = None, nodes: Sequence[Hashable] | None = None,
                            eval_every: int = 0, log: Callable[[str], None] | None = None,
                            init: Mapping | torch.Tensor | None = None, workers: int = 1
                            ) -> tuple[dict, TrainingReport]:
    """Learn points for every node so related pairs are close in the Poincaré ball.

    ``edges`` are ``(u, v)`` related pairs (typically the transitive closure of a
    hierarchy, ``(hyponym, hypernym)``) or a :class:`Relations`.  Returns ``node -> point``
    (1-D tensors, in the ball of ``ball``'s curvature) and a :class:`TrainingReport`.

    The arguments shared with poincare-memory's function of the same name (``dim`` to
    ``ball``) mean the same training: Riemannian SGD with step ``lr`` on the loss summed
    over each batch of ``batch_size`` pairs, ``negatives`` per pair, ``burn_in`` epochs at
    ``lr * burn_in_lr_factor``, then ``lr`` (constant: ``final_lr_factor=1``).  Two
    differences follow Nickel & Kiela more closely: a negative is never ``u`` itself or a
    node related to ``u`` (poincare-memory draws uniformly over all nodes, related ones
    included), and burn-in negatives are drawn by ``degree^0.75``.
    The defaults, on the WordNet mammal closure at ``dim=10`` (reconstruction MAP / mean
    rank, seed 0; ``benchmarks/bench_seed_parity.py``):

    =========================  ===================  ===================
    argument                   hypermem's default   poincare-memory's
    =========================  ===================  ===================
    ``epochs``                 200                  100
    ``lr``                     0.3                  0.1
    ``negatives``              50                   10
    ``burn_in``                20                   10
    ``burn_in_lr_factor``      0.1                  0.1
    ``batch_size``             32                   64
    ``final_lr_factor``        1.0 (constant lr)    (constant lr)
    hypermem, MAP / mean rank  0.976 / 1.20         0.909 / 1.47
    poincare-memory            (not measured)       0.899 / 1.57
    =========================  ===================  ===================

    ``final_lr_factor=0.01`` (after the burn-in, a linear decay to ``lr/100``) gives 0.974
    / 1.20 with the defaults and 0.833 / 2.42 with poincare-memory's values, whose 100
    epochs at ``lr=0.1`` need the full step.
    Smaller batches mean more updates per epoch; with the autograd-free step of
    :mod:`~hypermem.hierarchy.fused_sgd` (used for ``optimizer="rsgd"``) an epoch of the
    mammals takes a fraction of a second.
    ``optimizer="radam"`` uses Riemannian Adam; ``sparse`` (default: for more
    than 20,000 nodes) uses sparse gradients and geoopt's sparse optimizers;
    ``eval_every`` records the reconstruction MAP during training: each evaluation ranks every
    node against all ``n`` (:func:`~hypermem.hierarchy.evaluation.reconstruction`, about
    ``n^2 (dim + log m)``, soon more than an epoch: RESULTS, "Reconstruction cost by size"), and
    ``report.eval_seconds`` says what it cost.  ``init`` starts from
    given points instead of Nickel & Kiela's small random ones (a ``node -> point``
    mapping, or an ``(n, dim)`` tensor in the order of the relation's nodes), e.g. the
    shadow layout ``shadow_layout(tree, dim=dim)`` of a spanning tree,
    which training then adapts to the pairs the tree leaves out (second parents).  Start
    points beyond the ball's margin (a layout deeper than ``ball.max_radius(dtype)``) are
    projected onto it with a warning; keep deep trees inside with
    ``shadow_layout(tree, dim=dim, shrink=1.5, max_shrink=0.6)``.
    ``workers=2`` (or more) runs each epoch's steps in that many threads on the shared
    table (Hogwild, as Nickel & Kiela's trainer does; needs numba, CPU, ``rsgd``), not
    bit-for-bit reproducible.
    """
    return fit_hierarchy(edges, PoincareConfig(dim, epochs, lr, negatives, burn_in, burn_in_lr_factor, batch_size, seed,
                                              ball, optimizer, final_lr_factor, device, dtype, sparse, eval_every,
                                              workers), nodes=nodes, log=log, init=init)


def fit_euclidean_embeddings(edges, dim: int = 10, epochs: int = 200, lr: float = 0.05, negatives: int = 50,
                             batch_size: int = 128, seed: int = 0, *, burn_in: int = 0,
                             burn_in_lr_factor: float = 0.1, final_lr_factor: float = 1.0,
                             optimizer: str = "rsgd",
                             device: torch.device | str | None = None, dtype: torch.dtype = torch.float64,
                             sparse: bool | None = None, nodes: Sequence[Hashable] | None = None,
                             eval_every: int = 0, log: Callable[[str], None] | None = None
                             ) -> tuple[dict, TrainingReport]:
    """Same loss and sampling as :func:`fit_poincare_embeddings` with the Euclidean
    distance ``||u - v||`` (the baseline of Nickel & Kiela): plain SGD with step ``lr``
    on the loss summed over each batch, constant (no burn-in, ``final_lr_factor=1``), as
    poincare-memory's function of the same name, whose defaults are 100 epochs, 10
    negatives and batches of 64 (hypermem's: 200, 50, 128)."""
    config = EuclideanConfig(dim=dim, epochs=epochs, lr=lr, negatives=negatives, burn_in=burn_in,
                             burn_in_lr_factor=burn_in_lr_factor, batch_size=batch_size, seed=seed, optimizer=optimizer,
                             final_lr_factor=final_lr_factor, device=device, dtype=dtype, sparse=sparse,
                             eval_every=eval_every)
    return fit_hierarchy(edges, config, nodes=nodes, log=log)


def poincare_start(relations: Relations, dim: int, epochs: int, seed: int = 0, ball: PoincareBall | None = None,
                   device=None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The ``(n, dim)`` Poincaré embedding (in the order of ``relations.nodes``) that cone
    training starts from: ``epochs`` of :func:`fit_poincare_embeddings` with the defaults
    and a decay to ``lr / 100`` (``final_lr_factor=0.01``); ``epochs`` up to the burn-in's 20 all
    run at its ``lr / 10``, without the warning of :func:`fit_poincare_embeddings` (whose
    ``burn_in`` is not the caller's to lower)."""
    with warnings.catch_warnings():   # its burn-in is not the caller's to lower (cones: init_epochs)
        warnings.filterwarnings("ignore", "the burn-in lasts", UserWarning)
        pts, _ = fit_poincare_embeddings(relations, dim=dim, epochs=epochs, seed=seed, ball=ball, device=device,
                                         dtype=dtype, final_lr_factor=0.01)
    return torch.stack([pts[n] for n in relations.nodes])


def fit_entailment_cones(edges, dim: int = 5, epochs: int = 100, lr: float = 0.01, negatives: int = 10,
                         batch_size: int = 256, K: float = DEFAULT_K, margin: float = DEFAULT_MARGIN,
                         init=None, init_epochs: int = 100, init_max_radius: float = 3.0, seed: int = 0,
                         ball=None, *,
                         optimizer: str = "radam", device=None, dtype: torch.dtype = torch.float64,
                         nodes=None, log=None):
    """Entailment-cone embeddings of ``(hyponym, hypernym)`` pairs (Ganea et al. 2018).

    ``init`` is a starting embedding (``node -> point`` mapping or an ``(n, dim)`` tensor
    in the node order); by default a Poincaré embedding is trained first for
    ``init_epochs`` epochs (:func:`poincare_start`).  Its hyperbolic radii are scaled to at
    most ``init_max_radius`` (:func:`~hypermem.hierarchy.cones.squash_radii`), and training
    keeps the points in the shell of :func:`~hypermem.hierarchy.cones.constrain_cone_shell`.
    Returns ``node -> point`` and a :class:`TrainingReport`.
    """
    config = ConeConfig(dim, epochs, lr, negatives, batch_size, K, margin, init_epochs, init_max_radius, seed, ball,
                        optimizer, device, dtype)
    return fit_hierarchy(edges, config, nodes=nodes, log=log, init=init)


def _fit_cones(edges, config: ConeConfig, nodes, log, init) -> tuple[dict, TrainingReport]:
    c = config
    rel = as_relations(edges, nodes=nodes, device=c.device)
    rel.check_acyclic()
    if init is None:
        init = poincare_start(rel, c.dim, c.init_epochs, c.seed, c.ball, c.device, c.dtype)
    elif isinstance(init, dict):
        init = torch.stack([torch.as_tensor(init[n]) for n in rel.nodes])
    init = torch.as_tensor(init).to(dtype=c.dtype, device=c.device if c.device is not None else init.device)
    if init.shape != (rel.n, c.dim):
        raise ValueError(f"init must have shape {(rel.n, c.dim)}, got {tuple(init.shape)}")
    model = HierarchyEmbedding(rel.n, c.dim, "poincare", ball=c.ball, seed=c.seed, dtype=c.dtype, device=init.device)
    objective = c.objective()
    objective.start(model, init, c.init_max_radius)
    g = torch.Generator(device=model.weight.device)
    g.manual_seed(int(c.seed) + 1)
    report = train_embedding(model, rel, epochs=c.epochs, lr=c.lr, batch_size=c.batch_size, negatives=c.negatives,
                             optimizer=c.optimizer, seed=c.seed, objective=objective, generator=g, log=log)
    report.settings = c.settings()
    pts = model.points()
    return {n: pts[i] for i, n in enumerate(rel.nodes)}, report
