"""A ``LightningModule`` that trains a hierarchy encoder (HiT's model, or its Euclidean twin).

The same model, losses and steps as :func:`hypermem.hierarchy.fit_hierarchy_encoder`
(:func:`~hypermem.hierarchy.encoder_step.batch_losses` on the batches of
:class:`~hypermem.train.encoder_data.EncoderDataModule`), run by Lightning: AdamW with
a linear warm-up and decay over ``trainer.estimated_stepping_batches``, dropout seeded by
``(seed, global_step)`` so that a resumed run equals an uninterrupted one.

**Logged** on one step axis, ``global_step`` (optimizer steps; a step's training scalars at the
count that step completes, as for hierarchy embeddings, and everything of one validation -- the
scalars, the picture, the histograms and the ``best-step=S`` checkpoint -- at one step):
``train/loss`` and each term
(``train/clustering``, ``train/centripetal``, ``train/contrastive``, ``train/cone``) and
``train/lr`` every step (under DDP the terms are the mean over the processes, one all-reduce
of them all per step); at each validation ``val/f1`` (the mean of ``val/f1_random`` and
``val/f1_hard``: HiT's F1 at 1:10 with ``lambda`` and the threshold chosen on these pairs),
``val/mrr`` (the parent's reciprocal rank among its 20 negatives), ``val/lambda``,
``val/threshold``; with a TensorBoard logger also the disk picture of a sample of entities
(``embedding/disk``, the principal plane of their points, scaled into the unit disk) and
the distribution of the points' norms at each depth of the hierarchy (``embedding/norm_depth_<k>``
histograms).  The picture needs matplotlib (the ``viz`` extra); without it the run logs the rest
and says so once on stderr (:func:`~hypermem.train.hierarchy_logging.disk_picture_available`).

At the end of ``fit`` the best checkpoint's weights (``ModelCheckpoint(monitor="val/f1")``,
read back with ``torch.load(weights_only=True)``: no file in the log folder can run code)
are saved as an encoder folder, ``<log_dir>/encoder`` (:meth:`HierarchyEncoder.save
<hypermem.embed.HierarchyEncoder.save>`), with the ``lambda`` and threshold of its validation
and the ranking ``lambda`` chosen for those weights (``choose_ranking_lambda``); a line
``encoder: writing <log_dir>/encoder ...`` is printed when that starts and ``encoder: <folder>``
when the folder is written, the run's last line.  Every stop
validates at its step (:mod:`~hypermem.train.encoder_stop`), and weights with no recorded
validation (a run that never validated) are validated once before the export: an exported
encoder always has its threshold.

**Aliases and the average** (``model.alias_rate`` with ``data.aliases``, ``model.average``), as
in :func:`~hypermem.hierarchy.encoder_training.fit_hierarchy_encoder`: an entity with aliases is
shown in a step by one of them with probability ``alias_rate``
(:class:`~hypermem.hierarchy.encoder_variants.TextVariants`; only the training edges' entities,
:func:`~hypermem.hierarchy.encoder_variants.distinct_aliases`); with ``average`` (a decay in
(0, 1), 0: off) a moving average of the trained weights
(:class:`~hypermem.hierarchy.encoder_average.WeightAverage`) follows each optimizer step (the
``optimizer_step`` hook), each validation scores the weights and then their average, and the
better of the two is what the step logs (``val/f1`` ..., with ``val/averaged`` 1 when the
average won, ``val/f1_weights`` and ``val/f1_average`` both) and what its checkpoint's
validation records.  The average is saved in every checkpoint (``hypermem_encoder_average``:
its decay, steps and one tensor per trained parameter) and restored with it, so a resumed run
equals an uninterrupted one; the export takes the average from the checkpoint when that
checkpoint's validation chose it.
"""

from __future__ import annotations

import math
import random
import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch

from ..embed.encoder_folder import software_versions
from ..embed.hierarchy_encoder import HierarchyEncoder
from ..hierarchy.encoder_average import WeightAverage, check_average
from ..hierarchy.encoder_eval import choose_ranking_lambda
from ..hierarchy.encoder_prefix import FrozenPrefix, freeze_lower_layers, resolve_frozen_layers
from ..hierarchy.encoder_step import TokenCache, batch_losses, lr_factor, step_seed
from ..hierarchy.encoder_training import EncoderTrainConfig, check_ball_curvature, validate_encoder
from ..hierarchy.encoder_variants import TextVariants, check_alias_rate, distinct_aliases, variant_texts
from ..hierarchy.steps import check_lr
from .checkpoint_order import best_checkpoints_first
from .encoder_stop import ValidateAtStepLimit
from .hierarchy_logging import disk_picture_available, tensorboard_writer
from .mid_epoch import reopen_stopped_epoch
from .run_folder import VERSIONS_KEY, WORLD_KEY, read_checkpoint
from .step_axis import evaluated_epoch, evaluated_step, remember_checkpoint

__all__ = ["EncoderModule", "ValidateAtStepLimit"]


class EncoderModule(pl.LightningModule):
    """Parameters
    ----------
    base:
        The sentence-transformers model to start from (``all-MiniLM-L6-v2``, offline, or a folder).
    geometry:
        ``poincare`` (HiT's ball of curvature ``1/dim``) or ``euclidean`` (the twin).
    lr, weight_decay, warmup:
        AdamW and the fraction of the run spent warming up.
    max_length:
        Tokens kept per text.
    clustering, centripetal, contrastive, cone, depth:
        Loss weights (:mod:`hypermem.hierarchy.encoder_losses`); margins ``clustering_margin``
        / ``centripetal_margin`` (``null``: the geometry's default, 5.0 / 2.0 in the ball, where
        HiT's are 5.0 / 0.5), ``temperature``, ``cone_margin``.
    seed:
        Seeds dropout per step.
    log_images, disk_sample:
        The disk picture at each validation, of ``disk_sample`` entities.
    frozen_layers:
        The base's embeddings and this many of its lowest transformer layers stay frozen, their
        outputs computed once per entity (:class:`~hypermem.hierarchy.encoder_prefix.FrozenPrefix`);
        ``null`` (the default): all but the last two layers; 0: every layer trains.
    dim:
        Coordinates of a point: ``null`` (the default) the base's width; a number adds a
        trained ``tanh`` head to that many (``HierarchyEncoder.from_pretrained(dim=...)``).
    curvature:
        The ball's ``c`` (``null``: HiT's ``1/dim``); as ``fit_hierarchy_encoder(curvature=...)``.
    schedule_steps:
        Steps the learning-rate schedule spans (``null``: the run's
        ``trainer.estimated_stepping_batches``).  Set it to the planned length when a run is
        trained in parts, so the resumed part follows the same schedule.
    alias_rate:
        The chance that an entity with aliases (``data.aliases``) is shown by one of them in a step
        (0.5, as ``fit_hierarchy_encoder``); without an aliases file it does nothing.
    average:
        The decay of a moving average of the trained weights, validated beside them (0, the
        default: off; e.g. 0.99), as ``fit_hierarchy_encoder(average=...)``.
    """

    def __init__(self, base: str = "all-MiniLM-L6-v2", geometry: str = "poincare", lr: float = 3e-4,
                 weight_decay: float = 0.01, warmup: float = 0.05, max_length: int = 32, clustering: float = 1.0,
                 clustering_margin: float | None = None, centripetal: float = 1.0,
                 centripetal_margin: float | None = None, contrastive: float = 1.0, temperature: float = 1.0,
                 cone: float = 0.0, cone_margin: float = 0.01, depth: float = 0.0, seed: int = 0, log_images: bool = True,
                 disk_sample: int = 300, schedule_steps: int | None = None, frozen_layers: int | None = None,
                 dim: int | None = None, curvature: float | None = None, alias_rate: float = 0.5,
                 average: float = 0.0):
        super().__init__()
        if geometry not in ("poincare", "euclidean"):
            raise ValueError(f"model.geometry must be 'poincare' or 'euclidean', got {geometry!r}")
        check_lr(lr, "model.lr")
        check_alias_rate(alias_rate)   # before the base model loads: "model.alias_rate must be ..."
        check_average(average)
        self.save_hyperparameters()
        self.weights = EncoderTrainConfig(
            clustering=clustering, clustering_margin=clustering_margin, centripetal=centripetal,
            centripetal_margin=centripetal_margin, contrastive=contrastive, temperature=temperature, cone=cone,
            cone_margin=cone_margin, depth=depth).loss_weights(geometry)
        torch.manual_seed(seed)
        ball_c = None if curvature is None else check_ball_curvature(curvature, geometry)
        self.encoder = HierarchyEncoder.from_pretrained(base, geometry, max_length=max_length, dim=dim)
        if ball_c is not None:
            self.encoder.curvature = check_ball_curvature(ball_c, geometry, self.encoder.dim)
        self.model = self.encoder.model   # registers the transformer's parameters with this module
        self.frozen = resolve_frozen_layers(self.encoder, frozen_layers)
        if self.frozen:  # before the optimizer is built over the parameters that require a gradient
            freeze_lower_layers(self.encoder, self.frozen)
        self.tokens: TokenCache | None = None
        self.average: WeightAverage | None = None   # made where the weights are on their device
        self.average_state: dict | None = None       # a checkpoint's average, until then
        self.best: dict[str, float] = {}         # the best validation by f1, with its step and epoch
        self.final_metrics: dict[str, float] = {}  # the latest validation

    def setup(self, stage: str) -> None:
        dm = self.trainer.datamodule
        dm.setup(stage)
        if self.tokens is None:
            aliases = getattr(dm, "aliases", None) if self.hparams.alias_rate > 0 else None
            if aliases:   # the training entities' own aliases: a held-out entity's are never read
                aliases = distinct_aliases(aliases, {e: dm.names[e] for pair in dm.train_edges for e in pair})
            texts, alias_rows = variant_texts(dm.ids, dm.names, aliases or {})
            self.tokens = TokenCache(self.model.tokenizer, texts, self.hparams.max_length)
            if self.frozen:
                self.tokens = FrozenPrefix(self.encoder, self.tokens, self.frozen)
            if aliases:
                self.tokens = TextVariants(self.tokens, alias_rows, self.hparams.alias_rate)

    def on_fit_start(self) -> None:
        best_checkpoints_first(self.trainer)   # the best checkpoint chosen before last.ckpt is written
        # sentence-transformers loads the model in eval mode; train mode before Lightning's fit loop
        # starts (on_train_epoch_start sets it again after each validation), so its "module(s) in eval
        # mode at the start of training" check finds none: no module of this one is meant to stay in
        # eval mode (the frozen layers' outputs are cached in eval mode by FrozenPrefix in setup)
        self.train()
        self._start_average()

    def on_validation_start(self) -> None:
        self._start_average()   # validate --ckpt_path: the checkpoint's average is scored too

    def _trained(self) -> list[tuple[str, torch.nn.Parameter]]:
        """The trained parameters (AdamW's), named as in the encoder's model."""
        return [(n[len("model."):], p) for n, p in self.named_parameters() if p.requires_grad]

    def _average_shadow(self) -> dict[str, torch.Tensor]:
        """The moving average's tensor of each trained parameter, by its name; empty without one."""
        if self.average is None:
            return {}
        return {name: shadow for (name, _), shadow in zip(self._trained(), self.average.shadow)}

    def _start_average(self) -> None:
        """The moving average over the trained parameters (on their device by now), with a
        checkpoint's average and step count when one was loaded."""
        if not self.hparams.average or self.average is not None:
            return
        self.average = WeightAverage([p for _, p in self._trained()], self.hparams.average)
        state, self.average_state = self.average_state, None
        if state is not None:
            with torch.no_grad():
                for name, shadow in self._average_shadow().items():
                    shadow.copy_(state["shadow"][name])
            self.average.steps = int(state["steps"])

    def optimizer_step(self, *args, **kwargs) -> None:
        """Lightning's optimizer step, then one step of the average (``model.average``)."""
        super().optimizer_step(*args, **kwargs)
        if self.average is not None:
            self.average.update()

    def on_train_epoch_start(self) -> None:
        self.trainer.datamodule.set_epoch(self.current_epoch)
        self.model.train()   # sentence-transformers loads in eval mode; dropout on while training

    def training_step(self, batch, batch_idx):
        torch.manual_seed(step_seed(self.hparams.seed, self.global_step))
        losses = batch_losses(self.encoder, self.tokens, batch, self.weights)
        n = len(batch)
        values = torch.stack([v.detach() for v in losses.values()])
        if self.trainer.world_size > 1:   # under DDP the mean over the processes: one all-reduce of all terms
            values = self.trainer.strategy.reduce(values, reduce_op="mean")
        for key, value in zip(losses, values):
            self.log(f"train/{key}", value, on_step=True, on_epoch=False, batch_size=n, prog_bar=key == "loss")
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], on_step=True, on_epoch=False, batch_size=n)
        # the step this batch's optimizer step completes: the x value of its scalars (see "Logged")
        self.log("step", float(self.global_step + 1), on_step=True, on_epoch=False, reduce_fx="max",
                 batch_size=n, rank_zero_only=True)
        return losses["loss"]

    def configure_optimizers(self):
        opt = torch.optim.AdamW([p for p in self.parameters() if p.requires_grad], lr=self.hparams.lr,
                                weight_decay=self.hparams.weight_decay)
        total = max(1, int(self.hparams.schedule_steps or self.trainer.estimated_stepping_batches))
        self._warn_step_limit_schedule(total)
        warm = self.hparams.warmup
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s / total, warm))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def _warn_step_limit_schedule(self, total: int) -> None:
        """One warning when ``trainer.max_steps`` cuts the run short of ``trainer.max_epochs`` without
        ``schedule_steps``: Lightning's ``estimated_stepping_batches`` is then ``max_steps``, so the
        schedule ends at the stop, and a resume with another limit follows another schedule."""
        trainer, hp = self.trainer, self.hparams
        if hp.schedule_steps is not None or trainer.max_steps == -1 or trainer.max_epochs in (None, -1):
            return
        batches = trainer.num_training_batches
        if not isinstance(batches, int) or not trainer.is_global_zero:
            return
        full = math.ceil(batches / trainer.accumulate_grad_batches) * max(trainer.max_epochs, 1)
        if total < full:
            warnings.warn_explicit(
                f"trainer.max_steps={trainer.max_steps} stops before the {full} steps of trainer.max_epochs="
                f"{trainer.max_epochs}, and the learning-rate schedule spans {total} steps (it ends at the stop); "
                f"pass --model.schedule_steps={full} to keep the whole run's schedule (and its resume's)",
                UserWarning, __name__, 0, module=__name__)

    def configure_callbacks(self):
        """:class:`~hypermem.train.encoder_stop.ValidateAtStepLimit`: every stop (``max_steps``,
        ``max_time``, the last epoch) validates at its step, so the export considers its weights."""
        return [ValidateAtStepLimit()]

    def validation_step(self, batch, batch_idx):
        dm = self.trainer.datamodule
        was = self.model.training
        self.model.eval()
        with torch.no_grad():
            m = validate_encoder(self.encoder, dm.names, dm.val)
            if self.average is not None:   # the average too; the better of the two is this step's
                with self.average.applied():
                    m_avg = validate_encoder(self.encoder, dm.names, dm.val)
                self.log("val/f1_weights", float(m["f1"]), on_step=False, on_epoch=True, batch_size=1)
                self.log("val/f1_average", float(m_avg["f1"]), on_step=False, on_epoch=True, batch_size=1)
                m = {**m_avg, "averaged": 1.0} if m_avg["f1"] > m["f1"] else {**m, "averaged": 0.0}
                self.log("val/averaged", m["averaged"], on_step=False, on_epoch=True, batch_size=1)
        self.model.train(was)
        for key in ("f1", "f1_random", "f1_hard", "mrr", "lambda", "threshold"):
            self.log(f"val/{key}", float(m[key]), on_step=False, on_epoch=True, batch_size=1)
        # the val/* scalars at global_step, the step of the pictures and of the checkpoint's name
        # (in validate --ckpt_path the checkpoint's global_step: step_axis)
        step = evaluated_step(self)
        self.log("step", float(step), on_step=False, on_epoch=True, reduce_fx="max", batch_size=1,
                 rank_zero_only=True)
        if self.trainer.sanity_checking:
            return
        m = {**m, "step": step, "epoch": evaluated_epoch(self) + 1}
        self.final_metrics = m   # the latest validation: printed per epoch and at the end (hierarchy_callbacks)
        if not self.best or m["f1"] > self.best["f1"]:
            self.best = dict(m)
        tb = tensorboard_writer(self.logger)
        if tb is not None and self.trainer.is_global_zero:
            self._log_pictures(tb, dm)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["hypermem_encoder_best"] = dict(self.best)
        checkpoint[VERSIONS_KEY] = software_versions()   # provenance: what wrote it
        checkpoint[WORLD_KEY] = int(self.trainer.world_size)   # run_folder.world_size_refusal
        if getattr(self, "final_metrics", None):   # the validation of these weights, when they had one
            checkpoint["hypermem_encoder_validation"] = dict(self.final_metrics)
        if self.average is not None:   # restored by on_load_checkpoint: a resume continues the average
            checkpoint["hypermem_encoder_average"] = {
                "decay": float(self.average.decay), "steps": int(self.average.steps),
                "shadow": {name: s.detach().clone() for name, s in self._average_shadow().items()}}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        remember_checkpoint(self, checkpoint)   # a validate run logs at its global_step (step_axis)
        self.best = dict(checkpoint.get("hypermem_encoder_best", {}))
        self.average_state = checkpoint.get("hypermem_encoder_average") if self.hparams.average else None
        self.average = None   # rebuilt from that state (_start_average)
        self._drop_pooler_from_optimizer(checkpoint)
        if self._trainer is not None and self._trainer.state.fn == "fit":
            reopen_stopped_epoch(checkpoint)   # a run stopped inside an epoch resumes at its stopped batch

    def _drop_pooler_from_optimizer(self, checkpoint: dict) -> None:
        """A checkpoint written before the pooler was frozen (``freeze_unused``) has it in AdamW's
        parameter list, without state (it never had a gradient): its entries are taken out, so that
        the run resumes exactly with the optimizer of the trained parameters."""
        named = list(self.named_parameters())
        old = [p for n, p in named if p.requires_grad or ".pooler." in n]   # the former optimizer's list
        keep = [k for k, p in enumerate(old) if p.requires_grad]
        for opt in checkpoint.get("optimizer_states") or []:
            groups = opt.get("param_groups") or []
            if len(keep) == len(old) or len(groups) != 1 or len(groups[0]["params"]) != len(old):
                continue
            ids = groups[0]["params"]
            renumber = {ids[k]: j for j, k in enumerate(keep)}
            groups[0]["params"] = sorted(renumber.values())
            opt["state"] = {renumber[k]: v for k, v in opt.get("state", {}).items() if k in renumber}

    def on_fit_end(self) -> None:
        log_dir = self.trainer.log_dir   # on every process: a broadcast under DDP (hierarchy_callbacks)
        if not self.trainer.is_global_zero or log_dir is None:
            return
        monitored = [cb for cb in self.trainer.checkpoint_callbacks if getattr(cb, "monitor", None) == "val/f1"]
        ckpt = (monitored[0].best_model_path if monitored else "") or ""
        enc = self.encoder
        chosen = self.best
        # the summary above ends with the logs; the export takes a while (the ranking lambda encodes
        # up to 5,500 texts): say so at once, so that nobody stops the run before its last line
        print(f"encoder: writing {Path(log_dir) / 'encoder'} from {ckpt or 'the last step'} (choosing its "
              "ranking lambda on the validation edges first) ...", flush=True)
        state = read_checkpoint(ckpt) if ckpt and Path(ckpt).is_file() else None   # weights_only: no code runs
        if state is not None:
            own = {k[len("model."):]: v for k, v in state["state_dict"].items() if k.startswith("model.")}
            enc.model.load_state_dict(own)
            own_val = state.get("hypermem_encoder_validation") or {}
            # the threshold and metrics of these weights' own validation; the run's best so far
            # may be another step's (a resume keeps a stopped run's best, not its checkpoint)
            chosen = own_val if own_val.get("step") == state.get("global_step") else \
                state.get("hypermem_encoder_best", chosen)
            average = (state.get("hypermem_encoder_average") or {}).get("shadow")
        else:
            average = self._average_shadow()
        if chosen.get("averaged") and average:   # the average scored better: it is what is exported
            with torch.no_grad():
                for name, p in self._trained():
                    p.copy_(average[name])
        if not chosen or chosen.get("threshold") is None:   # never an export without a threshold
            chosen = self._validate_exported()
        if chosen:
            enc.centripetal_weight, enc.threshold = chosen["lambda"], chosen["threshold"]
            enc.model.eval()
            with torch.no_grad():  # the ranking lambda of the kept weights (encoder_eval.choose_ranking_lambda)
                enc.ranking_weight, rank_mrr = choose_ranking_lambda(enc, self.trainer.datamodule.names,
                                                                     self.trainer.datamodule.val.positives,
                                                                     seed=self.hparams.seed)
            if enc.ranking_weight is not None:
                chosen = {**chosen, "ranking_lambda": enc.ranking_weight, "ranking_mrr": rank_mrr[enc.ranking_weight]}
            enc.metrics = {f"val_{k}": float(v) for k, v in chosen.items()}
        enc.config = {"hparams": {k: v for k, v in self.hparams.items()}, "checkpoint": ckpt}
        self.exported = enc.save(Path(log_dir) / "encoder")
        print(f"encoder: {self.exported}  (HierarchyEncoder.load; the weights of {ckpt or 'the last step'})",
              flush=True)

    def _validate_exported(self) -> dict:
        """The validation of the weights about to be exported when none was recorded for them (a
        run that never validated: ``limit_val_batches=0``, a ``Timer`` checking at epochs' ends):
        ``lambda`` and the threshold chosen on the validation pairs, as a validation chooses them."""
        dm = self.trainer.datamodule
        if getattr(dm, "val", None) is None:
            return {}
        self.encoder.model.eval()
        with torch.no_grad():
            m = validate_encoder(self.encoder, dm.names, dm.val)
        print(f"encoder: no validation of the exported weights was recorded; validated them now "
              f"(val/f1 {float(m['f1']):.4g})", flush=True)
        return {**m, "step": self.trainer.global_step, "epoch": max(1, self.current_epoch)}

    # -- pictures -------------------------------------------------------------------------
    def _log_pictures(self, tb, dm) -> None:
        from .hierarchy_figures import poincare_disk_figure

        rng = random.Random(self.hparams.seed)
        sample = sorted(rng.sample(range(len(dm.ids)), min(self.hparams.disk_sample, len(dm.ids))))
        with torch.no_grad():
            pts = self.encoder.encode([dm.texts[i] for i in sample], show_progress_bar=False).cpu()
        norms = self.encoder.norms(pts)
        depth = torch.tensor([dm.depth[i] for i in sample])
        step = evaluated_step(self)
        for d in sorted(set(depth.tolist()) - {-1})[:12]:
            tb.add_histogram(f"embedding/norm_depth_{d}", norms[depth == d].float(), global_step=step)
        if not (self.hparams.log_images and disk_picture_available()):
            return   # without matplotlib (the viz extra): a one-time note instead of the picture
        scale = math.sqrt(self.encoder.curvature) if self.encoder.curvature else 1.0 / float(pts.norm(dim=1).max())
        fig = poincare_disk_figure(pts * scale, [dm.texts[i] for i in sample], None,
                                   title=f"{self.encoder.geometry}, step {step}")
        tb.add_figure("embedding/disk", fig, global_step=step)
