"""A ``LightningModule`` for hierarchy embeddings: Poincaré, Euclidean and entailment cones.

One module, three ``kind`` values, sharing :class:`~hypermem.hierarchy.model.HierarchyEmbedding`:

* ``poincare`` — Nickel & Kiela's softmax loss
  (:func:`~hypermem.hierarchy.ranking_loss.softmax_ranking_loss`) in the Poincaré ball;
* ``euclidean`` — the same loss with the Euclidean distance (their baseline);
* ``cones`` — Ganea et al.'s max-margin cone loss (:func:`~hypermem.hierarchy.cones.cone_loss`),
  started from a Poincaré embedding (``init_epochs`` of Nickel & Kiela training, or
  ``init_from`` a checkpoint), the points kept in the cone shell.

The objective of each ``kind`` (:func:`~hypermem.hierarchy.objectives.objective_for`)
gives the loss, the negatives' use, the constraint after a step and the link-prediction
score; the steps are the ones of the ``fit_*`` functions
(:func:`~hypermem.hierarchy.steps.take_step`), in the speed tier
:func:`~hypermem.hierarchy.steps.choose_tier` picks (for Poincaré and Euclidean embeddings
with Riemannian SGD in one process, the closed-form step, compiled with numba on a CPU;
otherwise autograd, whose ``manual_backward`` DDP synchronises).

``configure_optimizers`` returns the optimizer of that tier (geoopt's ``RiemannianSGD`` /
``RiemannianAdam``, or :class:`~hypermem.hierarchy.steps.ClosedFormSGD`, whose
``step(batch=...)`` is the closed-form update) and a per-epoch schedule (burn-in at
``lr * burn_in_lr_factor``, then a linear decay to ``lr * final_lr_factor``;
:func:`~hypermem.hierarchy.training.lr_factor`).  The module optimises manually
(Lightning's manual optimisation): every batch is one ``optimizer.step`` call, which is
what Lightning's ``global_step`` counts.

Each validation epoch (``trainer.check_val_every_n_epoch``, and always the last epoch:
:class:`~hypermem.train.hierarchy_callbacks.ValidateLastEpoch`) evaluates the whole
embedding: reconstruction MAP and mean rank (``val/map``, ``val/mean_rank``) and, with a
link-prediction split, F1 (``val/f1``, ``test/f1``).  With a TensorBoard logger the
global-zero process also adds, at each validation, a Poincaré-disk picture
(``embedding/disk``), histograms of the points' Euclidean norms and hyperbolic depths
(``embedding/norm``, ``embedding/depth``) and the embedding projector with the node names
(and glosses) as labels; at the end of training ``hp_metric`` is the final ``val/map``.

**One step axis.**  Everything is logged against ``global_step``, the number of optimizer
steps (one per ``batch_size`` pairs), which is also the ``step=`` of checkpoint names:
the scalars through Lightning's ``step`` metric, the pictures, histograms and projector
directly.  ``train/loss`` (mean per pair; TensorBoard tags ``train/loss_step`` and
``train/loss_epoch``, Lightning's suffixes for a value logged per step and per epoch) and
``train/lr`` are logged at every Lightning
step, i.e. every group of ``batches_per_step`` optimizer steps (set
``trainer.log_every_n_steps: 1``).

**Precision.**  The embedding keeps its ``dtype`` under ``trainer.precision`` (e.g.
``bf16-mixed``): the loss is computed with autocast off, because the Poincaré distance's
``1 - |x|^2`` needs float64 near the boundary (bf16 has 8 bits of mantissa: points at
depth 5 would all sit on the boundary); the whole training step runs with autocast off.
Mixed precision therefore changes nothing here.
"""

from __future__ import annotations

import pickle
import warnings

import lightning.pytorch as pl
import torch

from ..embed.encoder_folder import software_versions
from ..hierarchy.cones import DEFAULT_K, DEFAULT_MARGIN
from ..hierarchy.evaluation import link_prediction, reconstruction
from ..hierarchy.model import HierarchyEmbedding
from ..hierarchy.objectives import KINDS, objective_for
from ..hierarchy.steps import OPTIMIZERS, check_lr, choose_tier, make_step_optimizer, take_step
from ..hierarchy.training import lr_factor, poincare_start, radius_limit_message
from ..nn.curvature import make_ball
from .checkpoint_order import best_checkpoints_first
from .fit_stop import stops_after
from .hierarchy_callbacks import ValidateLastEpoch
from .hierarchy_checkpoint import CheckpointError, check_hierarchy_checkpoint
from .hierarchy_logging import log_embedding_state, log_final_metric, tensorboard_writer
from .mid_epoch import epoch_ran_out, reopen_stopped_epoch
from .run_folder import VERSIONS_KEY, WORLD_KEY, pickle_reason
from .step_axis import evaluated_epoch, evaluated_step, remember_checkpoint, validating_checkpoint

__all__ = ["KINDS", "HierarchyModule", "load_init_weights"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _integer_steps(optimizer: torch.optim.Optimizer) -> None:
    """Keep geoopt's Adam step counts Python integers after ``load_state_dict``: torch turns
    them into float32 tensors, and the bias corrections ``1 - beta^step`` would then be
    float32 numbers, so a resumed run would drift (~1e-6) from an uninterrupted one."""
    for state in optimizer.state.values():
        if isinstance(state.get("step"), torch.Tensor):
            state["step"] = int(state["step"].item())


def load_init_weights(path: str, trusted: bool = False) -> torch.Tensor:
    """``embedding.weight`` of a checkpoint of this module (``torch.load(weights_only=True)``
    unless ``trusted``: then any pickled object is accepted, and may run code)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=not trusted)
    except FileNotFoundError:
        raise FileNotFoundError(f"init_from: no such checkpoint {path!r}") from None
    except pickle.UnpicklingError as exc:
        raise ValueError(f"init_from {path!r} holds objects that torch.load(weights_only=True) refuses "
                         f"({pickle_reason(exc)}); nothing in it ran; if you trust the file, pass "
                         "--model.init_from_trusted=true on the command line") from None
    weight = state.get("state_dict", {}).get("embedding.weight") if isinstance(state, dict) else None
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise ValueError(f"init_from {path!r} is not a checkpoint of HierarchyModule (no state_dict/embedding.weight)")
    return weight


class HierarchyModule(pl.LightningModule):
    """Hierarchy embeddings trained by Lightning.

    Parameters
    ----------
    kind:
        ``poincare``, ``euclidean`` or ``cones``.
    dim:
        Embedding dimension.
    lr, optimizer:
        Learning rate and ``rsgd`` / ``radam`` (geoopt).
    burn_in, burn_in_lr_factor, final_lr_factor:
        Learning-rate schedule per epoch.
    curvature:
        Ball curvature magnitude ``c``.
    dtype:
        ``float64`` (default; the ball's float64 margin allows depths up to ~23.7) or ``float32``.
    init_range:
        Initial coordinates uniform in ``[-init_range, init_range]``.
    seed:
        Seed of the initial coordinates and of a cone run's Poincaré start (the batches
        follow ``seed_everything``).
    K, margin:
        Cone aperture constant and max-margin ``gamma`` (``kind=cones``).
    schedule_epochs:
        Epochs the learning-rate schedule spans (``None``: ``trainer.max_epochs``).  Set it
        to the planned length when a run is trained in parts (``--ckpt_path=last``).
    init_epochs, init_from, init_max_radius, init_from_trusted:
        Cones start from a Poincaré embedding: ``init_from`` (a checkpoint of this
        module) or ``init_epochs`` of Nickel & Kiela training; its radii are scaled to at
        most ``init_max_radius``.  ``init_from`` is read with ``torch.load(weights_only=True)``
        (tensors and plain containers only, no code runs); ``init_from_trusted=True`` allows
        any pickled object, for files you trust.
    eval_chunk:
        Queries per block in the reconstruction evaluation (``None``: automatic).
    log_images, log_projector:
        Add the disk picture / the embedding projector to TensorBoard.
    """

    def __init__(self, kind: str = "poincare", dim: int = 10, lr: float = 0.3, optimizer: str = "rsgd",
                 burn_in: int = 20, burn_in_lr_factor: float = 0.1, final_lr_factor: float = 0.01,
                 curvature: float = 1.0, dtype: str = "float64", init_range: float = 1e-3, seed: int = 0,
                 K: float = DEFAULT_K, margin: float = DEFAULT_MARGIN, init_epochs: int = 100,
                 init_from: str | None = None, init_max_radius: float = 3.0, eval_chunk: int | None = None,
                 log_images: bool = True, log_projector: bool = True, schedule_epochs: int | None = None,
                 init_from_trusted: bool = False):
        super().__init__()
        self.objective = objective_for(kind, K, margin)  # raises for an unknown kind
        if isinstance(dim, bool) or not isinstance(dim, (int, float)) or int(dim) != dim or dim < 1:
            raise ValueError(f"dim (--model.dim) must be a positive integer, got {dim!r}")
        check_lr(lr, "lr (--model.lr)")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {tuple(_DTYPES)}, got {dtype!r}")
        if schedule_epochs is not None and (isinstance(schedule_epochs, bool) or int(schedule_epochs) < 1):
            raise ValueError(f"schedule_epochs must be a positive integer or None, got {schedule_epochs!r}")
        self.save_hyperparameters()
        self.automatic_optimization = False  # see the module docstring
        self.ball = make_ball(curvature)  # a buffer: never trained here
        self.embedding: HierarchyEmbedding | None = None
        self.tier = "autograd"  # set by configure_optimizers (steps.choose_tier)
        self.nodes: list = []
        self.tree: list = []  # (parent, child) edges and node -> gloss, from the data or a checkpoint
        self.glosses: dict = {}
        self.final_metrics: dict = {}  # the last evaluation: step, epoch, map, mean_rank (f1, test_f1)

    # -- building the table once the data is known ---------------------------------------
    def setup(self, stage: str) -> None:
        if self.embedding is not None:
            return
        dm = self.trainer.datamodule
        dm.setup(stage)
        self.nodes = dm.nodes
        self.tree, self.glosses = list(getattr(dm, "tree", [])), dict(getattr(dm, "glosses", {}))
        hp = self.hparams
        self.embedding = HierarchyEmbedding(len(self.nodes), hp.dim, self.objective.geometry, ball=self.ball,
                                            init_range=hp.init_range, seed=hp.seed, dtype=_DTYPES[hp.dtype])
        if self.objective.starts_from_poincare:
            self._start_from_poincare(dm)

    def _start_from_poincare(self, dm) -> None:
        hp = self.hparams
        if hp.init_from:
            init = load_init_weights(hp.init_from, trusted=hp.init_from_trusted)
        else:
            init = poincare_start(dm.train_relations, hp.dim, hp.init_epochs, hp.seed, ball=self.ball,
                                  dtype=_DTYPES[hp.dtype])
        w = self.embedding.weight
        if tuple(init.shape) != tuple(w.shape):
            raise ValueError(f"init_from {hp.init_from!r} has {tuple(init.shape)} points, this embedding "
                             f"{tuple(w.shape)} (same data and model.dim needed)")
        self.objective.start(self.embedding, init, hp.init_max_radius)

    # -- optimisation ---------------------------------------------------------------------
    def configure_optimizers(self):
        hp = self.hparams
        self.tier = self.step_tier()
        opt = make_step_optimizer(self.tier, self.embedding, hp.optimizer, hp.lr)
        opt.register_load_state_dict_post_hook(_integer_steps)
        epochs = self.schedule_epochs()
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda e: lr_factor(e, epochs, hp.burn_in, hp.burn_in_lr_factor, hp.final_lr_factor))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}

    def schedule_epochs(self) -> int:
        """Epochs the learning-rate schedule spans (``schedule_epochs`` or ``max_epochs``)."""
        if self.hparams.schedule_epochs is not None:
            return int(self.hparams.schedule_epochs)
        m = self.trainer.max_epochs
        return m if m and m > 0 else 1

    def configure_callbacks(self):
        """:class:`~hypermem.train.hierarchy_callbacks.ValidateLastEpoch`: the final metrics are
        a validation, so the best checkpoint by ``val/map`` is the best of all of them."""
        return [ValidateLastEpoch()]

    def on_fit_start(self) -> None:
        best_checkpoints_first(self.trainer)   # the best checkpoint chosen before last.ckpt is written
        hp, epochs = self.hparams, self.schedule_epochs()
        dm_burn = getattr(self.trainer.datamodule, "burn_in", 0)
        burn = max(hp.burn_in, dm_burn)
        if burn >= epochs and self.trainer.is_global_zero:  # attributed to this module, not Lightning's caller
            warnings.warn_explicit(f"the burn-in lasts {burn} epochs (model.burn_in={hp.burn_in}, data.burn_in="
                                   f"{dm_burn}) but training lasts {epochs}: every epoch runs at lr * "
                                   f"{hp.burn_in_lr_factor:g} with burn-in negatives; lower --model.burn_in (it sets "
                                   "data.burn_in too) or raise --trainer.max_epochs", UserWarning, __name__, 0,
                                   module=__name__)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Besides Lightning's state: the schedule's length, the node names (row ``i`` of
        ``embedding.weight`` is ``nodes[i]``) and the data's tree (``(parent, child)``) and
        glosses, so a checkpoint alone becomes a Memory (:meth:`to_memory`); the number of processes
        (a resume inside an epoch needs as many: :func:`~hypermem.train.run_folder.world_size_refusal`)."""
        checkpoint[VERSIONS_KEY] = software_versions()   # provenance: what wrote it
        checkpoint[WORLD_KEY] = int(self.trainer.world_size)
        checkpoint["hypermem_schedule_epochs"] = self.schedule_epochs()
        checkpoint["hypermem_nodes"] = [str(n) for n in self.nodes]
        checkpoint["hypermem_tree"] = [(str(p), str(c)) for p, c in self.tree]
        checkpoint["hypermem_glosses"] = {str(k): str(v) for k, v in self.glosses.items()}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Checks the checkpoint (:func:`~hypermem.train.hierarchy_checkpoint.check_hierarchy_checkpoint`:
        a ``ValueError`` naming the field that disagrees with ``dim``, ``dtype``, ``curvature``, the
        weight's rows or the ball), builds the embedding from the state dict's shape when
        :meth:`setup` has not (the ``HierarchyModule.load_from_checkpoint(path)`` of a trained
        run) and takes the node names, tree and glosses the checkpoint holds.  A resumed run's
        data must have the checkpoint's nodes, in its order.  A module loaded outside a run
        never trusts a file: its ``init_from_trusted`` is ``False`` whatever the checkpoint says."""
        hp = self.hparams
        remember_checkpoint(self, checkpoint)   # a validate run logs at its global_step (step_axis)
        nodes = check_hierarchy_checkpoint(checkpoint, hp, _DTYPES[hp.dtype],
                                           in_ball=self.objective.geometry != "euclidean")
        weight = checkpoint["state_dict"]["embedding.weight"]
        if self._trainer is None:
            hp.init_from_trusted = False
        if self.embedding is None:
            self.embedding = HierarchyEmbedding(weight.shape[0], weight.shape[1], self.objective.geometry,
                                                ball=self.ball, seed=hp.seed, dtype=weight.dtype)
        elif nodes is not None and self.nodes and [str(n) for n in self.nodes] != nodes:
            raise CheckpointError(f"the checkpoint's hypermem_nodes ({len(nodes)}) are not this run's data's nodes "
                             f"({len(self.nodes)}) in the same order: resume on the data it was trained on")
        if not self.nodes and nodes:
            self.nodes = nodes
        self.tree = list(checkpoint.get("hypermem_tree") or self.tree)
        self.glosses = dict(checkpoint.get("hypermem_glosses") or self.glosses)
        saved = checkpoint.get("hypermem_schedule_epochs")
        fitting = self._trainer is not None and self._trainer.state.fn == "fit"   # validate follows no schedule
        if saved is not None and fitting and self._trainer.is_global_zero and saved != self.schedule_epochs():
            warnings.warn_explicit(f"the checkpoint's learning-rate schedule spans {saved} epochs, this run's "
                                   f"{self.schedule_epochs()}: the rest of the run follows the new schedule; pass "
                                   f"--model.schedule_epochs={saved} to continue the old one", UserWarning,
                                   __name__, 0, module=__name__)
        stopped = reopen_stopped_epoch(checkpoint) if fitting else None   # resumed at the stopped batch
        if stopped is not None:
            for sched in checkpoint.get("lr_schedulers") or []:
                if sched.get("last_epoch") == stopped[0] + 1:   # stepped at the stop (a checkpoint of an older run)
                    sched["last_epoch"] = stopped[0]

    def on_train_start(self) -> None:
        """The run's own ``lr`` and schedule from its first step: a resumed run's optimizer and
        scheduler come back from the checkpoint with its ``lr`` (``param_groups``, ``initial_lr``,
        the scheduler's ``base_lrs``); they are set from this run's hyperparameters, and the
        group's ``lr`` to this run's schedule at the current epoch."""
        hp, sched = self.hparams, self.lr_schedulers()
        dm = self.trainer.datamodule
        if hasattr(dm, "set_epoch"):   # a run resumed inside an epoch starts it without on_train_epoch_start
            dm.set_epoch(self.current_epoch)
        if sched is None:
            return
        factor = lr_factor(sched.last_epoch, self.schedule_epochs(), hp.burn_in, hp.burn_in_lr_factor,
                           hp.final_lr_factor)
        for group in sched.optimizer.param_groups:
            group["initial_lr"], group["lr"] = float(hp.lr), float(hp.lr) * factor
        sched.base_lrs = [float(hp.lr)] * len(sched.optimizer.param_groups)

    def on_train_epoch_start(self) -> None:
        dm = self.trainer.datamodule
        if hasattr(dm, "set_epoch"):
            dm.set_epoch(self.current_epoch)

    def forward(self, pairs: torch.Tensor, neg: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Summed loss of a batch (``pairs`` ``(B, 2)``, negatives and their mask)."""
        return self.objective.loss(self.embedding, pairs, neg, mask)

    def uses_closed_form_step(self) -> bool:
        """Whether batches take the autograd-free Riemannian SGD step: the tier of
        :func:`~hypermem.hierarchy.steps.choose_tier` for this objective, optimizer and
        number of processes is not ``"autograd"``."""
        return self._chosen_tier() != "autograd"

    def step_tier(self) -> str:
        """The speed tier the steps run in (``"autograd"`` when :meth:`uses_closed_form_step`
        says no)."""
        return self._chosen_tier() if self.uses_closed_form_step() else "autograd"

    def _chosen_tier(self) -> str:
        return choose_tier(self.objective, self.hparams.optimizer, self.embedding.weight,
                           processes=self.trainer.world_size)

    def training_step(self, batch, batch_idx):
        """One optimizer step per ``batch["batch_size"]`` pairs of the batch (the data
        module may send several batches at once, ``batches_per_step``), each through
        :func:`~hypermem.hierarchy.steps.take_step`."""
        pairs, neg, mask = batch["pairs"], batch["neg"], batch["mask"]
        size = int(batch.get("batch_size", pairs.shape[0]))
        opt = self.optimizers()
        total = torch.zeros((), dtype=torch.float64, device=pairs.device)
        with torch.autocast(pairs.device.type, enabled=False):  # see "Precision" in the module docstring
            for s in range(0, pairs.shape[0], size):
                total += take_step(opt, self.tier, self.objective, self.embedding, pairs[s:s + size],
                                   neg[s:s + size], mask[s:s + size], self.manual_backward).to(total)
        if not torch.isfinite(total):
            raise FloatingPointError(f"loss is {float(total)} at epoch {self.current_epoch}; lower lr")
        n = pairs.shape[0]
        # under DDP the mean over the devices (no communication in one process)
        self.log("train/loss", total / n, prog_bar=True, on_step=True, on_epoch=True, batch_size=n, sync_dist=True)
        self.log("train/lr", float(opt.param_groups[0]["lr"]), on_step=True, on_epoch=False)
        self._log_step_axis()
        return total

    def _log_step_axis(self, on_epoch: bool = False) -> None:
        """Lightning's ``step`` metric (the x value of the scalars logged with it, see "One
        step axis" in the module docstring) and the epoch; in ``validate --ckpt_path`` the
        checkpoint's (:mod:`~hypermem.train.step_axis`), without the epoch: Lightning's ``epoch`` counts
        from 0 where the fit's lines and ``validated ... (epoch E, step S)`` count from 1."""
        axis = [("step", evaluated_step(self))] + ([] if validating_checkpoint(self) else
                                                    [("epoch", evaluated_epoch(self))])
        for name, value in axis:
            self.log(name, float(value), on_step=not on_epoch, on_epoch=on_epoch, reduce_fx="max",
                     rank_zero_only=True)

    def on_train_epoch_end(self) -> None:
        if epoch_ran_out(self.trainer):   # manual optimisation: the per-epoch schedule steps here, not
            self.lr_schedulers().step()   # at a limit's stop inside an epoch (its resume trains the rest)
        self._log_step_axis(on_epoch=True)
        if self.embedding is not None and stops_after(self.trainer, "epoch"):
            # before the checkpoint callbacks' epoch end: last.ckpt holds the best checkpoint's choice
            self._final_evaluation(epoch=self.current_epoch + 1)

    # -- evaluation -----------------------------------------------------------------------
    def validation_step(self, batch, batch_idx):
        return None  # the evaluation covers the whole embedding: see on_validation_epoch_end

    def evaluate(self) -> dict:
        """Reconstruction MAP / mean rank on the full closure, and link-prediction F1 when
        the data module has a split."""
        dm = self.trainer.datamodule
        pts = self.embedding.points()
        out = {}
        r = reconstruction(pts, dm.relations, self.embedding, chunk_size=self.hparams.eval_chunk)
        out["map"], out["mean_rank"] = r.mean_average_precision, r.mean_rank
        split = getattr(dm, "split", None)
        if split is not None:
            val = self.objective.isa_score(pts, split.val_pairs, self.ball)
            if val is not None:  # the Euclidean baseline has no is-a score
                lp = link_prediction(val, split.val_labels, self.objective.isa_score(pts, split.test_pairs, self.ball),
                                     split.test_labels)
                out["f1"], out["test_f1"] = lp.validation_f1, lp.f1
        return out

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:
            return
        res = self.evaluate()
        self.log("val/map", res["map"], prog_bar=True, sync_dist=False, rank_zero_only=True)
        self.log("val/mean_rank", res["mean_rank"], prog_bar=True, rank_zero_only=True)
        if "f1" in res:
            self.log("val/f1", res["f1"], rank_zero_only=True)
            self.log("test/f1", res["test_f1"], rank_zero_only=True)
        self._log_step_axis(on_epoch=True)
        step = evaluated_step(self)
        self.final_metrics = {"step": step, "epoch": evaluated_epoch(self) + 1, **res}
        tb = tensorboard_writer(self.logger)
        if tb is not None and self.trainer.is_global_zero:
            log_embedding_state(tb, self, step)

    def on_train_end(self) -> None:
        """``hp_metric`` on the global-zero process, from the final metrics (the final evaluation of
        :meth:`on_train_epoch_end`; made here when a stop came without an epoch's end), and a
        warning when many points sit at the dtype's radius limit
        (:func:`~hypermem.hierarchy.training.radius_limit_message`)."""
        if self.embedding is None:
            return
        self._final_evaluation()
        tb = tensorboard_writer(self.logger) if self.trainer.is_global_zero else None
        if tb is not None:
            log_final_metric(tb, dict(self.hparams), float(self.final_metrics["map"]), self.global_step)
        limit = radius_limit_message(self.embedding, "--model.dtype=float64") if self.trainer.is_global_zero else None
        if limit:   # float32 pushed many points onto its radius limit
            warnings.warn_explicit(limit, RuntimeWarning, __name__, 0, module=__name__)

    def _final_evaluation(self, epoch: int | None = None) -> None:
        """The final metrics: an evaluation now when the last validation was earlier (a stop before
        it, ``trainer.max_steps`` inside an epoch), logged and offered to the best checkpoint, on
        every process (under DDP evaluated by the first process, every process takes its numbers).
        ``epoch``: the epoch of the metrics (counted from 1), ``current_epoch`` when ``None``."""
        trainer = self.trainer
        if self.final_metrics.get("step") == self.global_step:  # the same on every process
            return
        tb = tensorboard_writer(self.logger) if trainer.is_global_zero else None
        with torch.no_grad():   # inside the training epoch: no graph of the points
            res = self.evaluate() if trainer.is_global_zero else None
        res = trainer.strategy.broadcast(res, src=0)
        self.final_metrics = {"step": self.global_step, "epoch": self.current_epoch if epoch is None else epoch, **res}
        if tb is not None:
            for key, tag in (("map", "val/map"), ("mean_rank", "val/mean_rank"), ("f1", "val/f1")):
                if key in res:
                    tb.add_scalar(tag, res[key], global_step=self.global_step)
            log_embedding_state(tb, self, self.global_step)
        self._checkpoint_final_evaluation(res)

    def _checkpoint_final_evaluation(self, res: dict) -> None:
        """A run stopped before its last validation (``trainer.max_time``, ``max_steps``): the
        final evaluation is offered to each ``ModelCheckpoint`` monitoring a ``val/*`` metric, as
        a validation would be (its ``on_validation_end``), so the best checkpoint is the best of
        all evaluations.  Called on every process with the same ``res`` (under DDP the
        checkpoint's decision and save are collective: every process agrees, the first saves)."""
        trainer = self.trainer
        tags = {"map": "val/map", "mean_rank": "val/mean_rank", "f1": "val/f1", "test_f1": "test/f1"}
        metrics = trainer.callback_metrics
        for key, tag in tags.items():
            if key in res:
                metrics[tag] = torch.tensor(float(res[key]))
        for cb in trainer.checkpoint_callbacks:
            if cb.monitor in tags.values() and cb.monitor in metrics:
                cb.on_validation_end(trainer, self)

    # -- export ---------------------------------------------------------------------------
    def points_dict(self) -> dict:
        """``node -> point`` of the trained embedding (detached tensors)."""
        pts = self.embedding.points()
        return {n: pts[i] for i, n in enumerate(self.nodes)}

    def to_memory(self, embedder=None, **kwargs):
        """A :class:`~hypermem.store.Memory` of the trained embedding, one memory per node at
        its trained point, parents from the data's tree, glosses as ``meta["gloss"]``
        (:func:`~hypermem.train.export.embedding_to_memory`; ``embedder`` for text queries,
        needed below ``dim`` 8; more keywords go to it).  Works on a module of a finished
        run and on ``HierarchyModule.load_from_checkpoint(path)``."""
        from .export import embedding_to_memory

        if self.embedding is None or len(self.nodes) != self.embedding.weight.shape[0]:
            raise RuntimeError("no trained embedding with node names: train the module or load a checkpoint "
                               "written by this version (HierarchyModule.load_from_checkpoint(path))")
        meta = {n: {"gloss": self.glosses[n]} for n in self.nodes if self.glosses.get(n)}
        kwargs.setdefault("meta", meta)
        return embedding_to_memory(self.points_dict(), self.tree, curvature=self.ball.curvature,
                                   embedder=embedder, **kwargs)

    def save_embedding(self, path: str) -> None:
        """Save ``{"nodes", "points", "curvature", "kind", "dim"}`` with :func:`torch.save`
        (load with ``torch.load(path)``; the points are the memories' points of a store)."""
        torch.save({"nodes": list(self.nodes), "points": self.embedding.points().cpu(),
                    "curvature": self.ball.curvature, "kind": self.hparams.kind, "dim": self.hparams.dim}, path)
