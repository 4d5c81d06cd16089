"""Ctrl-C during ``fit`` keeps the work done: :class:`InterruptCheckpoint` writes ``last.ckpt`` at the stop.

Lightning ends a ``fit`` interrupted by ``KeyboardInterrupt`` through its exception path (the
callbacks' ``on_exception``, then ``sys.exit(1)``; :mod:`~hypermem.train.hierarchy_cli` exits
130).  Lightning's ``OnExceptionCheckpoint`` saves there, but to ``on_exception.ckpt``, which
``--ckpt_path=last`` does not take, on any exception, and whatever the state: a Ctrl-C inside a
training step (between two of a hierarchy embedding's ``batches_per_step`` optimizer steps, or
inside one) would save weights that match no count of the loops.  So:

* the first Ctrl-C inside a training step is deferred to the step's end (one line on stderr
  says so; a second Ctrl-C stops at once, as before), where :meth:`on_train_batch_end` saves
  ``last.ckpt`` (the state :meth:`on_exception` would save there) and the run stops at the next
  hook, once Lightning has logged the step (its ``update_train_step_metrics`` comes after
  ``on_train_batch_end``): the next batch's start, a validation's start or the epoch's end, so
  the curves of the run and of its resume hold every step once; after an epoch's last batch,
  once the epoch has ended (its validation and its ``last.ckpt``), at the next batch's start;
* a Ctrl-C during an epoch's end (its ``on_train_epoch_end`` hooks, where ``ModelCheckpoint``
  writes ``last.ckpt``, until Lightning logs the epoch's scalars such as ``train/loss_epoch``) is
  deferred to the next batch's start the same way: stopped in between, the run would keep a
  checkpoint of the finished epoch whose epoch scalars were never logged, and its resume, which
  starts at the next epoch, would leave that epoch's point out of the curves;
* :meth:`on_exception` saves the run's ``last.ckpt`` (the file of its ``ModelCheckpoint`` without
  a monitor named ``last``, or of one with ``save_last``) when a ``KeyboardInterrupt`` comes while
  the loops' counters and the weights agree: a training batch fully run (from any callback's
  ``on_train_batch_end``, or between batches), not inside a validation or a step, and not
  after the epoch's last batch (Lightning's resume would train that epoch again; the epoch's
  end writes ``last.ckpt``, so such an interrupt keeps the previous one).  That is the
  checkpoint Lightning itself writes inside an epoch (``every_n_train_steps``): its resume starts
  at the next batch, and the run's resumable loader skips the batches already trained
  (:mod:`~hypermem.train.mid_epoch`), so the resumed run equals the uninterrupted one.

Under DDP (more than one process) nothing of the above applies: a save there is collective, and
the processes do not stop at one point, so a Ctrl-C stops every process where it finds it and
the run keeps the ``last.ckpt`` written before (the latest epoch's end, or a limit's stop).  A
best checkpoint (a ``ModelCheckpoint`` with a monitor) written after that ``last.ckpt`` (the
epoch's validation runs before its ``last.ckpt``) is then newer than the checkpoint a resume
starts from: :meth:`InterruptCheckpoint.on_train_start` of the resume of ``last.ckpt`` removes it
(:func:`later_checkpoints`), since the resumed run trains its steps again and would otherwise save
them beside it (``best-step=15-v1.ckpt`` next to ``best-step=15.ckpt``).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint

from .run_folder import checkpoint_step

__all__ = ["InterruptCheckpoint", "last_checkpoint_file", "later_checkpoints"]


def last_checkpoint_file(trainer: pl.Trainer) -> Path | None:
    """The run's ``last.ckpt``: the file of a ``ModelCheckpoint`` with ``save_last``, or of one
    without a monitor whose ``filename`` is ``last`` (the shipped configs'); ``None`` without one."""
    for cb in trainer.checkpoint_callbacks:
        if not isinstance(cb, ModelCheckpoint) or not cb.dirpath:
            continue
        if cb.save_last:
            return Path(cb.dirpath, cb.CHECKPOINT_NAME_LAST + cb.FILE_EXTENSION)
        if not cb.monitor and cb.filename == cb.CHECKPOINT_NAME_LAST:
            return Path(cb.dirpath, cb.filename + cb.FILE_EXTENSION)
    return None


def later_checkpoints(trainer: pl.Trainer) -> list[Path]:
    """The files of the trainer's monitored ``ModelCheckpoint`` folders that a run interrupted after
    its ``last.ckpt`` wrote (see the module docstring), when the trainer resumes that ``last.ckpt``:
    written after it, at a step past it (``global_step``, read with ``torch.load(weights_only=True)``,
    tensors mapped), and none of the checkpoint callbacks' own files.  Empty for any other fit."""
    last = last_checkpoint_file(trainer)
    if last is None or not trainer.ckpt_path or not last.is_file() or Path(trainer.ckpt_path).resolve() != last.resolve():
        return []
    keep = {last.resolve()}
    for cb in trainer.checkpoint_callbacks:
        if isinstance(cb, ModelCheckpoint):
            keep.update(Path(p).resolve() for p in (cb.best_model_path, cb.last_model_path, *cb.best_k_models) if p)
    since, found = last.stat().st_mtime, []
    for folder in {Path(cb.dirpath) for cb in trainer.checkpoint_callbacks
                   if isinstance(cb, ModelCheckpoint) and cb.monitor and cb.dirpath}:
        for path in sorted(folder.glob("*" + ModelCheckpoint.FILE_EXTENSION)):
            if path.resolve() in keep or path.stat().st_mtime <= since:
                continue
            step = checkpoint_step(path)
            if step is not None and step > trainer.global_step:
                found.append(path)
    return found


def _batch_settled(trainer: pl.Trainer) -> bool:
    """Whether the training loop's counters describe whole batches: every batch it started has
    run its optimizer step (Lightning's ``processed``), and no validation is running."""
    if trainer.sanity_checking or trainer.validating or trainer.fit_loop.done:
        return False
    counts = trainer.fit_loop.epoch_loop.batch_progress.current
    # after the epoch's last batch, before its end (validation, schedule, checkpoint): Lightning's
    # resume of that state trains the epoch again, so the epoch's end is what saves it
    return (counts.ready == counts.started == counts.processed and
            1 <= counts.processed < trainer.num_training_batches)


class InterruptCheckpoint(pl.Callback):
    """Write ``last.ckpt`` when Ctrl-C stops ``fit`` (see the module docstring).  :attr:`saved`:
    the file written at the stop, else ``None``."""

    def __init__(self) -> None:
        self.saved: Path | None = None
        self.saved_step = -1
        self.in_step = False     # inside a step or an epoch's end: a first Ctrl-C waits (self.where)
        self.where = "step"
        self.pending = False
        self.stop_next = False   # saved at a deferred stop's batch end: stop at the next hook
        self._previous = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for path in later_checkpoints(trainer) if trainer.is_global_zero else ():
            path.unlink(missing_ok=True)
            print(f"removed {path}: written after {trainer.ckpt_path}, which this run resumes at step "
                  f"{trainer.global_step} (an interrupted run's; its steps are trained again)", file=sys.stderr, flush=True)
        if trainer.world_size == 1 and threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._sigint)

    def _sigint(self, signum, frame) -> None:
        if self.in_step and not self.pending:
            self.pending = True
            what = ("stopping at the end of this step and saving a checkpoint" if self.where == "step" else
                    "stopping once this epoch's end has saved its checkpoint and logged its scalars")
            print(f"Ctrl-C: {what} (Ctrl-C again to stop now)", file=sys.stderr, flush=True)
            return
        raise KeyboardInterrupt

    def _restore(self) -> None:
        if self._previous is not None:
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _stop_now(self) -> None:
        if self.stop_next:   # last.ckpt saved at the batch's end, the step logged since
            self.stop_next = False
            raise KeyboardInterrupt

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._stop_now()
        if self.pending:   # deferred past the end of the previous epoch, which saved last.ckpt
            self.pending = False
            raise KeyboardInterrupt
        self.in_step, self.where = True, "step"

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.in_step = False
        done = trainer.fit_loop.epoch_loop.batch_progress.current.processed
        if self.pending and done < trainer.num_training_batches:   # the epoch's last batch: at its end
            self.pending = False
            if not _batch_settled(trainer) or not self._save(trainer):   # pending: one process only
                raise KeyboardInterrupt   # nothing saved here: on_exception decides, as before
            self.stop_next = True   # after Lightning logs this step's scalars

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._stop_now()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._stop_now()   # a limit (max_steps, max_time) ended the epoch at that batch
        # a callback without a monitor: runs before the checkpoints' epoch-end saves; deferred from
        # here to the next batch's start (or the run's end), after Lightning logs the epoch's scalars
        self.in_step, self.where = True, "epoch end"

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.in_step = self.stop_next = False
        self._restore()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._restore()
        self.in_step = False
        if self.saved is not None and self.saved_step == trainer.global_step:
            return   # saved at the deferred stop's batch end
        if (not isinstance(exception, KeyboardInterrupt) or trainer.world_size != 1 or trainer.state.fn != "fit"
                or not _batch_settled(trainer)):   # inside a step or a validation: the previous checkpoint stays
            return
        self._save(trainer)

    def _save(self, trainer: pl.Trainer) -> bool:
        """Write the run's ``last.ckpt`` now; ``False`` when the run has none."""
        path = last_checkpoint_file(trainer)
        if path is None:
            return False
        trainer.save_checkpoint(path)
        self.saved, self.saved_step = path, trainer.global_step
        return True
