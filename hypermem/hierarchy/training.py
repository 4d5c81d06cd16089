r"""Training Poincaré (and Euclidean) hierarchy embeddings with geoopt.

Nickel & Kiela, "Poincaré Embeddings for Learning Hierarchical Representations"
(NeurIPS 2017):

* one point per node in the unit ball (:class:`~hypermem.hierarchy.model.HierarchyEmbedding`);
* the softmax loss over the positive and ``k`` negatives not related to the source
  (:func:`~hypermem.hierarchy.ranking_loss.softmax_ranking_loss`, eq. 6), negatives drawn on
  tensors by :class:`~hypermem.hierarchy.sampling.NegativeSampler`;
* Riemannian SGD: ``theta <- proj(theta - lr (1 - ||theta||^2)^2 / 4 grad)`` (eqs. 4-5),
  i.e. :class:`geoopt.optim.RiemannianSGD` on hypermem's ball (``optimizer="rsgd"``,
  the default) or :class:`geoopt.optim.RiemannianAdam` (``optimizer="radam"``);
* a *burn-in*: the first ``burn_in`` epochs use ``lr * burn_in_lr_factor`` and draw
  negatives by ``degree^0.75``, which places the points roughly before the real
  learning rate spreads them out; then ``lr`` itself, constant unless a
  ``final_lr_factor < 1`` asks for a linear decay (:func:`lr_factor`).

``lr`` is the step on the loss *summed* over a batch (each pair's gradient adds to the
rows it touches; no division by the batch size), as in poincare-memory's trainer, so
the same ``lr`` and ``batch_size`` mean the same steps in both.

Everything is batched on tensors: one epoch is a random permutation of the pairs cut
into batches.  With Riemannian SGD and the default loss, the negatives of the whole
epoch are drawn at once and every batch is one closed-form step
(:func:`~hypermem.hierarchy.fused_sgd.softmax_sgd_step`: the update of geoopt's
``RiemannianSGD`` to rounding, without autograd or a pass over the whole table);
on a CPU with numba installed (the ``fast`` extra) the whole epoch of such steps is one
compiled call (:func:`~hypermem.hierarchy.fused_sgd.softmax_sgd_steps`, Poincaré and
Euclidean);
otherwise (Riemannian Adam, a custom ``loss_fn`` or ``after_step``) each batch draws its
negatives and runs a forward, a backward and a geoopt optimizer step.  The same code
runs on a GPU with ``device="cuda"``.
:mod:`hypermem.train` wraps the same pieces in a Lightning loop.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import geoopt
import torch

from ..geometry import PoincareBall
from .fused_sgd import sample_epoch, softmax_sgd_steps
from .ranking_loss import softmax_ranking_loss
from .model import HierarchyEmbedding
from .relations import Relations, as_relations
from .sampling import NegativeSampler

OPTIMIZERS = ("rsgd", "radam")


@dataclass
class TrainingReport:
    """What happened during training: epochs run, the mean loss of every epoch, the last
    one, wall time, and evaluations (``history``: dicts with ``epoch``, ``map``,
    ``mean_rank``) when an ``eval_every`` was given."""

    epochs: int
    final_loss: float
    losses: list[float]
    seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    settings: dict = field(default_factory=dict)


def make_optimizer(params, optimizer: str = "rsgd", lr: float = 1.0, sparse: bool = False
                   ) -> torch.optim.Optimizer:
    """geoopt's Riemannian SGD (``"rsgd"``) or Adam (``"radam"``), sparse variants when
    ``sparse``."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be a finite positive number, got {lr!r}")
    if optimizer == "rsgd":
        cls = geoopt.optim.SparseRiemannianSGD if sparse else geoopt.optim.RiemannianSGD
    else:
        cls = geoopt.optim.SparseRiemannianAdam if sparse else geoopt.optim.RiemannianAdam
    return cls(params, lr=lr)


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


LossFn = Callable[[HierarchyEmbedding, torch.Tensor, bool], torch.Tensor]


def softmax_objective(relations: Relations, negatives: int, generator: torch.Generator | None = None,
                      symmetric_negatives: bool = False) -> LossFn:
    """Nickel & Kiela's loss as a ``loss_fn(model, batch, burning)`` for :func:`train_embedding`.

    Negatives are nodes ``v'`` with ``(u, v')`` not in the relation (their directed
    rule; ``symmetric_negatives`` also excludes ``(v', u)``), drawn by ``degree^0.75``
    during the burn-in and uniformly afterwards.
    """
    negatives = _check_positive_int("negatives", negatives)
    if negatives < 1:
        raise ValueError("negatives must be at least 1")
    sampler = NegativeSampler(relations, symmetric=symmetric_negatives, generator=generator)

    def loss_fn(model: HierarchyEmbedding, batch: torch.Tensor, burning: bool) -> torch.Tensor:
        u, v = batch[:, 0], batch[:, 1]
        neg, mask = sampler.sample(u, negatives, unigram=burning)
        d_pos, d_neg = model(u, v, neg)
        return softmax_ranking_loss(d_pos, d_neg, mask, reduction="sum")

    return loss_fn


def train_embedding(model: HierarchyEmbedding, relations: Relations, *, epochs: int, lr: float,
                    batch_size: int, negatives: int = 50, burn_in: int = 0, burn_in_lr_factor: float = 0.1,
                    final_lr_factor: float = 1.0, symmetric_negatives: bool = False,
                    optimizer: str = "rsgd", seed: int = 0, loss_fn: LossFn | None = None,
                    after_step: Callable[[HierarchyEmbedding], None] | None = None,
                    eval_every: int = 0, evaluate: Callable[[HierarchyEmbedding], dict] | None = None,
                    log: Callable[[str], None] | None = None, workers: int = 1) -> TrainingReport:
    """Train ``model`` on the pairs of ``relations`` (on the model's device).

    Each epoch shuffles the pairs; every batch gets ``loss_fn(model, batch, burning)``
    (default: :func:`softmax_objective`), a backward pass and an optimizer step, then
    ``after_step(model)`` (e.g. a constraint).  With ``optimizer="rsgd"``, no ``loss_fn``
    and no ``after_step`` the same update runs in closed form
    (:mod:`~hypermem.hierarchy.fused_sgd`, negatives drawn once per epoch).  The learning rate follows
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
    if loss_fn is None and _check_positive_int("negatives", negatives) < 1:
        raise ValueError("negatives must be at least 1")
    fused = loss_fn is None and optimizer == "rsgd" and after_step is None
    sampler = NegativeSampler(rel, symmetric=symmetric_negatives, generator=g) if fused else None
    if loss_fn is None and not fused:
        loss_fn = softmax_objective(rel, negatives, g, symmetric_negatives)
    opt = make_optimizer([model.weight], optimizer, lr, sparse=model.sparse)
    curvature = model.ball.curvature if model.geometry == "poincare" else 1.0
    pairs = rel.pairs
    n_pairs = pairs.shape[0]
    losses: list[float] = []
    history: list[dict] = []
    start = time.perf_counter()
    for epoch in range(epochs):
        burning = epoch < burn_in
        for group in opt.param_groups:
            group["lr"] = lr * lr_factor(epoch, epochs, burn_in, burn_in_lr_factor, final_lr_factor)
        perm = torch.randperm(n_pairs, device=device, generator=g)
        total = torch.zeros((), dtype=torch.float64, device=device)
        if fused:
            step_lr = opt.param_groups[0]["lr"]
            shuffled = pairs[perm]
            cand, mask = sample_epoch(sampler, shuffled, negatives, unigram=burning)
            total += softmax_sgd_steps(model.weight.data, shuffled[:, 0], cand, mask, step_lr, batch_size,
                                       model.geometry, curvature, workers)
        else:
            for b in range(0, n_pairs, batch_size):
                loss = loss_fn(model, pairs[perm[b:b + batch_size]], burning)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if after_step is not None:
                    after_step(model)
                total += loss.detach().to(torch.float64)
        mean = float(total) / n_pairs
        if not math.isfinite(mean):
            raise FloatingPointError(f"loss became {mean} at epoch {epoch + 1}; lower lr (now {lr})")
        losses.append(mean)
        last = epoch + 1 == epochs
        if evaluate is not None and ((eval_every and (epoch + 1) % eval_every == 0) or last):
            result = dict(evaluate(model))
            result["epoch"] = epoch + 1
            history.append(result)
            if log:
                log(f"epoch {epoch + 1}: loss {mean:.4f} " + " ".join(
                    f"{k} {v:.4f}" for k, v in result.items() if k != "epoch" and isinstance(v, float)))
        elif log and (epoch + 1) % max(1, epochs // 10) == 0:
            log(f"epoch {epoch + 1}: loss {mean:.4f}")
    return TrainingReport(epochs=epochs, final_loss=losses[-1] if losses else float("nan"), losses=losses,
                          seconds=time.perf_counter() - start, history=history)


def _fit(edges, geometry: str, dim: int, epochs: int, lr: float, negatives: int, burn_in: int,
         burn_in_lr_factor: float, final_lr_factor: float, batch_size: int, seed: int,
         ball: PoincareBall | None, optimizer: str,
         device, dtype, sparse: bool | None, nodes: Sequence[Hashable] | None, eval_every: int,
         log, init=None, workers: int = 1) -> tuple[dict, TrainingReport]:
    rel = as_relations(edges, nodes=nodes, device=device)
    if sparse is None:
        sparse = rel.n > 20000
    model = HierarchyEmbedding(rel.n, dim, geometry=geometry, ball=ball, sparse=sparse, seed=seed,
                               dtype=dtype, device=device)
    if init is not None:
        _load_init(model, rel, init)
    evaluate = None
    if eval_every:
        from .evaluation import reconstruction

        def evaluate(m):
            r = reconstruction(m.points(), rel, m)
            return {"map": r.mean_average_precision, "mean_rank": r.mean_rank}

    report = train_embedding(model, rel, epochs=epochs, lr=lr, negatives=negatives, batch_size=batch_size,
                             burn_in=burn_in, burn_in_lr_factor=burn_in_lr_factor,
                             final_lr_factor=final_lr_factor, optimizer=optimizer,
                             seed=seed, eval_every=eval_every, evaluate=evaluate, log=log, workers=workers)
    report.settings = {"geometry": geometry, "dim": dim, "epochs": epochs, "lr": lr, "negatives": negatives,
                       "burn_in": burn_in, "burn_in_lr_factor": burn_in_lr_factor,
                       "final_lr_factor": final_lr_factor, "batch_size": batch_size,
                       "optimizer": optimizer, "seed": seed, "dtype": str(dtype), "device": str(model.weight.device),
                       "sparse": sparse, "workers": workers}
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
    ``eval_every`` records the reconstruction MAP during training.  ``init`` starts from
    given points instead of Nickel & Kiela's small random ones (a ``node -> point``
    mapping, or an ``(n, dim)`` tensor in the order of the relation's nodes), e.g. the
    shadow layout ``sarkar_layout(tree, dim=dim, edge_length="isa")`` of a spanning tree,
    which training then adapts to the pairs the tree leaves out (second parents).  Start
    points beyond the ball's margin (a layout deeper than ``ball.max_radius(dtype)``) are
    projected onto it with a warning; keep deep trees inside with
    ``shadow_layout(tree, dim=dim, shrink=1.5, max_shrink=0.6)``.
    ``workers=2`` (or more) runs each epoch's steps in that many threads on the shared
    table (Hogwild, as Nickel & Kiela's trainer does; needs numba, CPU, ``rsgd``), not
    bit-for-bit reproducible.
    """
    return _fit(edges, "poincare", dim, epochs, lr, negatives, burn_in, burn_in_lr_factor, final_lr_factor,
                batch_size, seed, ball, optimizer, device, dtype, sparse, nodes, eval_every, log, init, workers)


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
    return _fit(edges, "euclidean", dim, epochs, lr, negatives, burn_in, burn_in_lr_factor, final_lr_factor,
                batch_size, seed, None, optimizer, device, dtype, sparse, nodes, eval_every, log)
