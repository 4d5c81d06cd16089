r"""Training a hierarchy encoder on a user's hierarchy: :func:`fit_hierarchy_encoder`.

The model is a sentence encoder whose outputs are points of a Poincaré ball
(``geometry="poincare"``, HiT: He et al., "Language Models as Hierarchy Encoders",
NeurIPS 2024) or of R^d (``"euclidean"``, its twin, trained the same way).  One run:

1. the base model (all-MiniLM-L6-v2 by default, offline) with mean pooling, no normalisation
   (:meth:`hypermem.embed.HierarchyEncoder.from_pretrained`);
2. batches built around parents, every distinct entity encoded once, negatives from the
   batch (:mod:`hypermem.hierarchy.encoder_batches`), the texts tokenised once
   (:class:`~hypermem.hierarchy.encoder_step.TokenCache`);
3. the losses of :mod:`hypermem.hierarchy.encoder_losses` (HiT's clustering and
   centripetal terms by default; in-batch contrastive and entailment-cone terms by weight);
   AdamW with a linear warm-up and decay over the planned steps or the time budget;
4. validation every ``validate_every`` steps and at the end: HiT's F1 at 1:10 with random
   and with hard negatives, ``lambda`` and the threshold chosen on the validation pairs
   (:mod:`hypermem.hierarchy.encoder_eval`); the best weights by their mean F1 are kept and
   restored at the end, with the ``lambda`` and threshold chosen for them, and the ranking
   ``lambda`` chosen for them by ranking the validation children's parents among sampled
   entities (:func:`~hypermem.hierarchy.encoder_eval.choose_ranking_lambda`).

With ``max_minutes`` the run stops in time, everything after its last step included: a step
is not started when it would leave too little time for the final validation, the ranking
``lambda``'s choice and the save (:class:`~hypermem.hierarchy.encoder_step.TimeBudget`).  A
validation's time is modelled as ``fixed + per_text * texts``
(:class:`~hypermem.hierarchy.encoder_step.EncodeCost`), fitted to two validations of samples
of the validation pairs timed at the start, then to each validation of the run; the ranking
reuses the points of the validation of the weights it ranks with
(:class:`~hypermem.hierarchy.encoder_eval.CachedScorer`) and encodes only the texts that
validation did not.  The run keeps its best validated weights; it takes one step at least, and
warns (``UserWarning``) when the budget stopped it before one pass over the training edges.
The inputs are checked before the base model is loaded: ``edges`` a sequence of
``(child, parent)`` pairs, ``names`` a mapping ``id -> text`` with a non-blank string for each
id; ids are compared as text (``str(id)``), in the edges and in the keys of ``names`` alike
(:mod:`~hypermem.hierarchy.encoder_inputs`).
Without ``validation_edges``, 5% of ``edges`` (at most 2,000) are carved out for validation
and not trained on; a validation of fewer than 20 positive pairs warns (its threshold is unreliable).
The run keeps the caller's torch generators and thread count (:mod:`~hypermem.hierarchy.torch_state`).
Its one progress bar is its own: the validations' encode passes show none
(:func:`~hypermem.embed.progress.quiet_progress`); the bar's postfix shows the last validation's F1.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.hierarchy_tasks import EntityHierarchy, NegativeSampler, carve_validation
from ..embed.encoder_folder import CURVATURE_RANGE
from ..embed.hierarchy_encoder import HierarchyEncoder, check_save_folder
from .encoder_average import WeightAverage, check_average
from .encoder_batches import EdgeBatches, closure_sets
from .encoder_eval import (
    CachedScorer,
    choose_operating_point,
    choose_ranking_lambda,
    encode_entities,
    pair_terms,
    ranking_sample,
)
from .encoder_inputs import checked_inputs, warn_few_validation_pairs
from .encoder_losses import LossWeights
from .encoder_prefix import FrozenPrefix, resolve_frozen_layers
from .encoder_step import TimeBudget, TokenCache, batch_losses, lr_factor, step_seed
from .encoder_variants import TextVariants, check_alias_rate, check_aliases, distinct_aliases, variant_texts
from .progress import progress_bar, quiet_progress, show_progress
from .torch_state import private_rng

__all__ = ["EncoderTrainConfig", "fit_hierarchy_encoder", "validation_pairs", "validate_encoder",
           "EUCLIDEAN_MARGIN_SCALE"]

EUCLIDEAN_MARGIN_SCALE = 2.3
"""The twin's margins are the ball's divided by this: the ball's conformal factor
``2 / (1 - c r^2)`` at the norm ``r ~ 7`` of all-MiniLM-L6-v2's mean-pooled outputs
(``c = 1/384``), so both margins start as the same length in each space."""


@dataclass(frozen=True)
class EncoderTrainConfig:
    """Settings of :func:`fit_hierarchy_encoder` (its ``**config``); margins ``None`` mean the
    geometry's default (clustering: HiT's 5.0 in the ball; centripetal: 2.0 in the ball, HiT's
    0.5 before it was chosen on validation -- WordNet mixed-hop, 20 minutes, validation F1
    random / hard 0.850 / 0.775 at 0.5, 0.857 / 0.802 at 2.0, 0.845 / 0.804 at 4.0; level on
    Python's class hierarchy, 0.848 / 0.705 against 0.840 / 0.703, parent MRR 0.497 / 0.501;
    both divided by :data:`EUCLIDEAN_MARGIN_SCALE` in R^d, where the twin's sweep was flat
    from 0.87 to 1.74).  The in-batch contrastive term is on by default:
    on the validation entities of WordNet's unseen-entity task it raised the ball's F1 from
    0.656 to 0.678 and left the twin's level (0.663 / 0.661), 600 steps each
    (benchmarks/RESULTS.md).  ``frozen_layers`` keeps the base's embeddings and that many of
    its lowest transformer layers frozen and computes their outputs once per entity
    (:class:`~hypermem.hierarchy.encoder_prefix.FrozenPrefix`): a step costs about
    ``(L - k) / L`` of a full one; ``None`` (the default) freezes all but the last two layers
    (:func:`~hypermem.hierarchy.encoder_prefix.resolve_frozen_layers`), 0 trains every
    layer.  ``lr=3e-4`` and frozen lower layers were chosen on validation against every
    layer at 3e-5 (HiT's rate) and at 3e-4 (then with all but the last layer frozen; two
    trained layers since, :data:`~hypermem.hierarchy.encoder_prefix.DEFAULT_TRAINED`): on
    WordNet's mixed-hop task at the same 20 minutes (validation F1 0.796 / 0.707 against 0.798 / 0.675), and on Python's class
    hierarchy at ``max_minutes=10`` (validation F1 0.822 / 0.681 against 0.723 / 0.564 for the
    ball); benchmarks/RESULTS.md.  ``children_per_parent=8`` and ``hard_negatives=8`` (were 4
    and 5: at most three siblings a child in a batch) put more siblings in a batch and make
    them most of a positive's negatives: on WordNet's mixed-hop validation, hard-negative F1
    0.775 after 20 minutes against 0.758 after 45 with the old setting (random 0.850 against
    0.854).  ``dim`` (``None``: the base's width) adds a trained ``tanh`` head to that many
    coordinates (:meth:`~hypermem.embed.HierarchyEncoder.from_pretrained`).  ``cone`` and
    ``depth`` (the entailment-cone and one-depth-scale terms of
    :mod:`~hypermem.hierarchy.encoder_losses`) are off: on WordNet's mixed-hop validation
    (20 minutes) cone 1.0 gave F1 0.838 / 0.807 in the ball and 0.843 / 0.810 in the twin
    against 0.857 / 0.802 and 0.864 / 0.807 without, depth 0.1 and 1.0 0.853 / 0.796 and
    0.814 / 0.738.  ``calibration`` (every positive of a batch below every negative, margin
    ``calibration_margin``, ``None``: 1.0 in the ball, scaled like the others in the twin) is
    off too: weight 1.0 gave 0.859 / 0.790 against 0.869 / 0.816 (ball, 20 minutes), as is
    ``siblings`` (one norm for a parent's children): 0.814 / 0.759 at the same steps.
    ``curvature`` is the ball's ``c`` (``None``: HiT's ``1/dim``, whose ball of radius
    ``sqrt(dim)`` holds the base's outputs, norms 6-8 in 19.6, where the conformal factor
    ``2 / (1 - c r^2)`` is nearly flat, 2.3-2.9); a larger ``c`` bends the space where the
    points lie (``4/dim``: radius 9.8, factor 4-6); the margins stay lengths.  On WordNet's
    mixed-hop validation (20 minutes) ``4/dim`` lowered F1 by 0.04-0.05 at equal steps,
    ``0.25/dim`` gave 0.876 / 0.823 against 0.872 / 0.819 and ``0.0625/dim`` 0.873 / 0.822 (the
    twin: 0.880 / 0.822): the default stays HiT's.  ``alias_rate`` is the chance that an entity
    with ``aliases`` (an argument of :func:`fit_hierarchy_encoder`) is shown by one of them in a
    step.  ``average`` (0: off) is the decay of a moving average of the trained weights
    (:mod:`~hypermem.hierarchy.encoder_average`), validated beside them; the best of either is kept:
    off, as on WordNet's mixed-hop validation the average ends level with the annealed weights
    (0.863 / 0.803 against 0.865 / 0.805 at the same steps)."""

    batch_size: int = 128
    children_per_parent: int = 8
    negatives: int = 10
    hard_negatives: int = 8
    lr: float = 3e-4
    weight_decay: float = 0.01
    warmup: float = 0.05
    max_length: int = 32
    frozen_layers: int | None = None
    clustering: float = 1.0
    clustering_margin: float | None = None
    centripetal: float = 1.0
    centripetal_margin: float | None = None
    contrastive: float = 1.0
    temperature: float = 1.0
    cone: float = 0.0
    cone_margin: float = 0.01
    depth: float = 0.0
    siblings: float = 0.0
    calibration: float = 0.0
    calibration_margin: float | None = None
    calibration_lambda: float = 1.0
    alias_rate: float = 0.5
    average: float = 0.0
    max_steps: int | None = None
    validate_every: int = 300
    val_size: int = 1000
    threads: int | None = None
    device: str = "cpu"
    dim: int | None = None
    curvature: float | None = None

    def loss_weights(self, geometry: str) -> LossWeights:
        scale = 1.0 if geometry == "poincare" else EUCLIDEAN_MARGIN_SCALE
        return LossWeights(self.clustering,
                           5.0 / scale if self.clustering_margin is None else self.clustering_margin,
                           self.centripetal,
                           2.0 / scale if self.centripetal_margin is None else self.centripetal_margin,
                           self.contrastive, self.temperature, self.cone, self.cone_margin, depth=self.depth,
                           siblings=self.siblings,
                           calibration=self.calibration,
                           calibration_margin=(1.0 / scale if self.calibration_margin is None
                                               else self.calibration_margin),
                           calibration_lambda=self.calibration_lambda)


def check_ball_curvature(c, geometry: str, dim: int | None = None) -> float:
    """``curvature=`` checked: a finite number > 0, for the ball only; with the encoder's ``dim``
    also within the range a saved folder may hold (``encoder_folder.CURVATURE_RANGE``), so a
    finished run never writes a folder that does not load."""
    if geometry != "poincare":
        raise ValueError(f"curvature= is the Poincaré ball's; geometry={geometry!r} has none")
    if isinstance(c, bool) or not isinstance(c, (int, float)) or not math.isfinite(c) or c <= 0:
        raise ValueError(f"curvature must be a finite number > 0, got {c!r}")
    lo, hi = CURVATURE_RANGE
    if dim is not None and not lo / dim <= c <= hi / dim:
        raise ValueError(f"curvature must be between {lo:g}/dim and {hi:g}/dim for a {dim}-dimensional "
                         f"encoder (1/dim = {1.0 / dim:g} is HiT's ball), got {c!r}")
    return float(c)


def validation_pairs(edges: Sequence[tuple[str, str]], all_edges: Sequence[tuple[str, str]],
                     names: Mapping[str, str], negatives: int, size: int, seed: int):
    """A :class:`~hypermem.data.hierarchy_tasks.PairSet` of at most ``size`` of ``edges`` with
    random and hard negatives, ancestors taken from ``all_edges``."""
    sampler = NegativeSampler(EntityHierarchy(dict(names), list(all_edges)), negatives, seed)
    pos = list(edges)
    if len(pos) > size:
        pos = random.Random(seed).sample(pos, size)
    return sampler.pair_set(pos)


def validate_encoder(encoder, names: Mapping[str, str], pairs) -> dict[str, float]:
    """F1 / precision / recall and the chosen ``lambda`` and threshold of ``encoder`` on a
    :class:`~hypermem.data.hierarchy_tasks.PairSet`, random and hard negatives apart and pooled."""
    ids = [e for pos, r, h in zip(pairs.positives, pairs.random_negatives, pairs.hard_negatives)
           for e in (*pos, *r, *h)]
    pts = encode_entities(encoder, names, ids)
    out: dict[str, float] = {}
    for kind in ("random", "hard"):
        pp, labels = pairs.pairs(kind)
        op = choose_operating_point(pair_terms(encoder, pts, pp, labels))
        out.update({f"f1_{kind}": op.f1, f"precision_{kind}": op.precision, f"recall_{kind}": op.recall,
                    f"lambda_{kind}": op.centripetal_weight, f"threshold_{kind}": op.threshold})
    pooled_pairs, pooled_labels = [], []
    for (c, p), rnd, hard in zip(pairs.positives, pairs.random_negatives, pairs.hard_negatives):
        negs = list(dict.fromkeys([*rnd, *hard]))
        pooled_pairs += [(c, p)] + [(c, n) for n in negs]
        pooled_labels += [1] + [0] * len(negs)
    terms = pair_terms(encoder, pts, pooled_pairs, pooled_labels)
    op = choose_operating_point(terms)
    out.update({"f1_pooled": op.f1, "lambda": op.centripetal_weight, "threshold": op.threshold,
                "f1": (out["f1_random"] + out["f1_hard"]) / 2,
                "mrr": parent_mrr(terms.scores(op.centripetal_weight), terms.labels)})
    return out


def parent_mrr(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean reciprocal rank of each positive among the negatives that follow it (the
    layout of :meth:`PairSet.pairs <hypermem.data.hierarchy_tasks.PairSet.pairs>`: a positive,
    then its negatives: here its random and hard ones)."""
    starts = torch.nonzero(labels).flatten().tolist() + [len(labels)]
    rr = [1.0 / (1 + int((scores[a + 1:b] >= scores[a]).sum())) for a, b in zip(starts[:-1], starts[1:])]
    return sum(rr) / max(1, len(rr))


def fit_hierarchy_encoder(edges: Sequence[tuple[str, str]], names: Mapping[str, str], *,
                          base: str = "all-MiniLM-L6-v2", geometry: str = "poincare", epochs: int | None = None,
                          max_minutes: float | None = None, seed: int = 0,
                          validation_edges: Sequence[tuple[str, str]] | None = None, out: str | None = None,
                          progress: bool | None = None, aliases: Mapping[str, Sequence[str]] | None = None,
                          **config) -> HierarchyEncoder:
    """Train a hierarchy encoder on ``edges`` (``(child_id, parent_id)``) with ``names``
    (``id -> text``); returns the encoder with its best validated weights, ``lambda`` and
    threshold (saved to the folder ``out`` when given).

    ``epochs`` (default 1 when neither ``max_minutes`` nor ``max_steps`` is given),
    ``max_minutes`` and the setting ``max_steps`` bound the run; ``config``: the fields of :class:`EncoderTrainConfig`.  ``encoder.metrics`` holds
    the best validation figures, ``encoder.config["history"]`` every validation.  ``progress``
    shows a progress bar (``None``: on a terminal or in a notebook).  ``aliases`` (``id ->
    [text, ...]``) are other names of entities, each step showing an entity by one of them with
    probability ``alias_rate`` (:mod:`~hypermem.hierarchy.encoder_variants`); only the entities
    of the training edges are ever shown, so the aliases of held-out entities are never read.

    Ids may be any values (strings, integers, ...): they are compared as ``str(id)``, in the
    edges and in the keys of ``names`` alike.  Every positive pair is scored against
    ``negatives`` (10) entities that are neither its child nor an ancestor of it, so a small
    hierarchy needs a smaller ``negatives=``.  Bad inputs raise ``TypeError`` / ``ValueError``
    naming the argument and the item before the base model is loaded.

    Example (a tiny random model trains in seconds; with the default base, minutes)::

        >>> edges = [("dog", "animal"), ("cat", "animal"), ("oak", "tree"), ("tree", "plant")]
        >>> names = {e: e for pair in edges for e in pair}
        >>> enc = fit_hierarchy_encoder(edges, names, epochs=2, negatives=2)  # doctest: +SKIP
        >>> enc.subsumption_scores(["dog"], ["animal"]) > enc.threshold  # doctest: +SKIP
        tensor([True])
    """
    unknown = sorted(set(config) - {f.name for f in dataclasses.fields(EncoderTrainConfig)})
    if unknown:
        raise TypeError(f"unknown setting(s) {unknown}; see EncoderTrainConfig")
    cfg = EncoderTrainConfig(**config)
    if epochs is not None and (not isinstance(epochs, int) or epochs < 1):
        raise ValueError(f"epochs must be a positive integer, got {epochs!r}")
    if max_minutes is not None and not (max_minutes > 0 and math.isfinite(max_minutes)):
        raise ValueError(f"max_minutes must be a positive number, got {max_minutes!r}")
    if cfg.max_steps is not None and (not isinstance(cfg.max_steps, int) or cfg.max_steps < 1):
        raise ValueError(f"max_steps must be a positive integer, got {cfg.max_steps!r}")
    if geometry not in ("poincare", "euclidean"):
        raise ValueError(f"geometry must be 'poincare' or 'euclidean', got {geometry!r}")
    curvature = None if cfg.curvature is None else check_ball_curvature(cfg.curvature, geometry)
    edges, names, validation_edges = checked_inputs(edges, names, validation_edges)
    alias_rate = check_alias_rate(cfg.alias_rate)
    check_average(cfg.average)
    aliases = check_aliases(aliases, names) if aliases is not None else {}
    if out is not None:
        check_save_folder(out)   # refused before the training, not after it (the rule save applies)
    if epochs is None and max_minutes is None and cfg.max_steps is None:
        epochs = 1
    start, cpu_start = time.monotonic(), time.process_time()
    carved = validation_edges is None
    if carved:
        n_given = len(edges)
        edges, validation_edges = carve_validation(edges, seed)
        if not edges:
            raise ValueError(f"edges has {n_given} edge(s): one is held out for validation, which leaves no "
                             "training edge; pass more edges, or validation_edges=")
    val = validation_pairs(validation_edges, list(edges) + list(validation_edges), names, cfg.negatives,
                           cfg.val_size, seed)
    warn_few_validation_pairs(len(val.positives), carved, len(edges))
    with private_rng(cfg.device, cfg.threads) as seed_all:   # the caller's generators and threads kept
        return _train(edges, names, val, aliases if alias_rate > 0 else {}, alias_rate, cfg, curvature,
                      seed_all, base=base, geometry=geometry, epochs=epochs, max_minutes=max_minutes, seed=seed,
                      out=out, progress=progress, start=(start, cpu_start))


def _train(edges, names, val, aliases, alias_rate, cfg, curvature, seed_all, *, base, geometry, epochs,
           max_minutes, seed, out, progress, start) -> HierarchyEncoder:
    """The run of :func:`fit_hierarchy_encoder` on checked inputs and its validation pairs ``val``."""
    start, cpu_start = start
    weights = cfg.loss_weights(geometry)
    if aliases:   # the training entities' own aliases: a held-out entity's are never read
        aliases = distinct_aliases(aliases, {e: names[e] for pair in edges for e in pair})
    ids = sorted(names)
    index = {e: i for i, e in enumerate(ids)}
    int_edges = [(index[c], index[p]) for c, p in edges]
    batches = EdgeBatches(int_edges, closure_sets(int_edges, len(ids)), batch_size=cfg.batch_size,
                          children_per_parent=cfg.children_per_parent, negatives=cfg.negatives,
                          hard_negatives=cfg.hard_negatives, seed=seed)

    seed_all(seed)
    enc = HierarchyEncoder.from_pretrained(base, geometry, device=cfg.device, max_length=cfg.max_length,
                                           dim=cfg.dim)
    if curvature is not None:
        enc.curvature = check_ball_curvature(curvature, geometry, enc.dim)
    show = show_progress(progress)
    texts, alias_rows = variant_texts(ids, names, aliases)
    tokens = TokenCache(enc.model.tokenizer, texts, cfg.max_length)
    frozen = resolve_frozen_layers(enc, cfg.frozen_layers)
    if frozen:  # the frozen lower layers' outputs, once per text
        tokens = FrozenPrefix(enc, tokens, frozen, progress=show)
    if aliases:
        tokens = TextVariants(tokens, alias_rows, alias_rate)
    params = [p for p in enc.model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    average = WeightAverage(params, cfg.average) if cfg.average else None
    planned = len(batches) * epochs if epochs is not None else None
    if cfg.max_steps is not None:
        planned = min(planned or cfg.max_steps, cfg.max_steps)
    budget = None
    if max_minutes is not None:   # what runs after the last step, timed on samples of the pairs at the start
        val_texts = _pair_texts(val, names)
        kids, cands, _ = ranking_sample(names, val.positives, seed=seed)
        passes = 2 if average is not None else 1   # a validation of the weights, and of their average
        budget = TimeBudget(60.0 * max_minutes, passes * len(val_texts),
                            len({names[e] for e in (*kids, *cands)} - val_texts))
        with quiet_progress():
            _time_samples(enc, names, val, seed, budget)
    bar = progress_bar(planned, "hierarchy encoder", "step", show)

    history: list[dict[str, float]] = []
    best: tuple[float, dict, dict, dict] | None = None   # f1, weights, metrics, text -> point

    def run_validation(step: int, epoch: float) -> None:
        t0 = time.monotonic()
        enc.model.eval()
        if bar is not None:
            bar.set_description("hierarchy encoder (validating)")
        with quiet_progress():   # the training bar reports the validation: no encode bars beside it
            n = validate_weights(step, epoch, averaged=False)
            if average is not None:   # the moving average too: the best of either is kept
                with average.applied():
                    n += validate_weights(step, epoch, averaged=True)
        enc.model.train()
        if budget is not None:
            budget.observe(n, time.monotonic() - t0)
        if bar is not None:
            bar.set_description("hierarchy encoder")
            bar.set_postfix(postfix(), refresh=True)

    def postfix() -> dict[str, str]:
        shown = {"loss": f"{last_loss:.3f}"} if last_loss is not None else {}
        if history:
            shown["val_f1"] = f"{history[-1]['f1']:.3f}"
        return shown

    def validate_weights(step: int, epoch: float, averaged: bool) -> int:
        nonlocal best
        scorer = CachedScorer(enc)   # the points of these weights, for the ranking lambda's choice
        m = validate_encoder(scorer, names, val)
        m.update({"step": float(step), "epoch": epoch, "seconds": time.monotonic() - start,
                  "cpu_seconds": time.process_time() - cpu_start})
        if average is not None:
            m["averaged"] = float(averaged)
        history.append(m)
        if best is None or m["f1"] > best[0]:
            best = (m["f1"], {k: v.detach().clone() for k, v in enc.model.state_dict().items()}, dict(m),
                    scorer.points)
        return len(scorer.points)

    step, step_time, stop, out_of_time = 0, 0.0, False, False
    last_loss: float | None = None
    enc.model.train()
    epoch = 0
    while not stop and (epochs is None or epoch < epochs):
        for batch in batches.epoch(epoch):
            elapsed = time.monotonic() - start
            # room left for the final validation, the ranking lambda's choice and the save;
            # one step at least, however little time the budget left after loading the model
            out_of_time = bool(step) and budget is not None and not budget.fits(elapsed, step_time)
            if out_of_time or (cfg.max_steps is not None and step >= cfg.max_steps):
                stop = True
                break
            progress_frac = max(step / planned if planned else 0.0, elapsed / budget.seconds if budget else 0.0)
            for g in opt.param_groups:
                g["lr"] = cfg.lr * lr_factor(progress_frac, cfg.warmup)
            t0 = time.monotonic()
            seed_all(step_seed(seed, step))
            losses = batch_losses(enc, tokens, batch, weights)
            opt.zero_grad(set_to_none=True)
            losses["loss"].backward()
            opt.step()
            if average is not None:
                average.update()
            step += 1
            dt = time.monotonic() - t0
            step_time = dt if step == 1 else 0.9 * step_time + 0.1 * dt
            if bar is not None:
                last_loss = losses["loss"].detach().item()
                bar.set_postfix(postfix(), refresh=False)
                bar.update(1)
            if step % cfg.validate_every == 0:
                run_validation(step, step / len(batches))
        epoch += 1
    if not history or history[-1]["step"] != step:
        run_validation(step, step / len(batches))
    if bar is not None:
        bar.close()
    if out_of_time and step < len(batches):
        warnings.warn(f"fit_hierarchy_encoder: max_minutes={max_minutes} stopped the training after {step} "
                      f"step(s), before one pass over the {len(edges)} training edges ({len(batches)} steps); "
                      "the encoder is close to its base model: give it more minutes",
                      UserWarning, stacklevel=3)
    assert best is not None
    enc.model.load_state_dict(best[1])
    chosen = best[2]
    enc.centripetal_weight, enc.threshold = chosen["lambda"], chosen["threshold"]
    enc.model.eval()
    with torch.no_grad(), quiet_progress():  # the ranking lambda of the kept weights, on the validation edges
        enc.ranking_weight, rank_mrr = choose_ranking_lambda(CachedScorer(enc, best[3]), names, val.positives,
                                                             seed=seed)
    if enc.ranking_weight is not None:
        chosen = {**chosen, "ranking_lambda": enc.ranking_weight, "ranking_mrr": rank_mrr[enc.ranking_weight]}
    enc.metrics = {f"val_{k}": float(v) for k, v in chosen.items()}
    enc.config = {**dataclasses.asdict(cfg), "frozen_layers": frozen, "geometry": geometry, "seed": seed, "epochs": epochs,
                  "max_minutes": max_minutes, "steps": step, "train_edges": len(edges),
                  "aliases": sum(map(len, aliases.values())),
                  "seconds": time.monotonic() - start, "cpu_seconds": time.process_time() - cpu_start,
                  "history": history}
    if out is not None:
        enc.save(Path(out))
    return enc


def _pair_texts(pairs, names: Mapping[str, str]) -> set[str]:
    """The distinct texts a validation on ``pairs`` encodes."""
    return {names[e] for pos, r, h in zip(pairs.positives, pairs.random_negatives, pairs.hard_negatives)
            for e in (*pos, *r, *h)}


def _time_samples(enc: HierarchyEncoder, names: Mapping[str, str], val, seed: int, budget: TimeBudget) -> None:
    """Time validations on two samples of ``val`` (up to 64 of its positives, or an eighth when
    that is more, and an eighth of that sample) into ``budget``: the two sizes fit
    :class:`~hypermem.hierarchy.encoder_step.EncodeCost`'s fixed and per-text parts."""
    big = min(len(val), max(64, len(val) // 8))
    for size in sorted({max(1, big // 8), big}):
        scorer = CachedScorer(enc)
        t0 = time.monotonic()
        enc.model.eval()
        with torch.no_grad():
            validate_encoder(scorer, names, val.subset(size, seed=seed))
        enc.model.train()
        budget.observe(len(scorer.points), time.monotonic() - t0)
