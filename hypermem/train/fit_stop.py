"""Whether Lightning's ``fit`` ends after the batch or the epoch that just ran: the one rule the
hierarchy module (:mod:`hypermem.train.checkpoint_order`, evaluating at its last epoch's end) and the
encoder's stop callback (:mod:`hypermem.train.encoder_stop`, validating at a stop's batch) ask."""

from __future__ import annotations

from typing import Literal

import lightning.pytorch as pl

__all__ = ["stops_after"]


def stops_after(trainer: pl.Trainer, unit: Literal["batch", "epoch"]) -> bool:
    """Whether ``fit`` ends after the current ``unit``: Lightning's rule (its fit loop's ``done``, without
    its log lines): ``max_steps`` reached, the last batch (``"batch"``: the ``num_training_batches``-th
    processed; ``"epoch"``: any, asked in ``on_train_epoch_end``) of the ``max_epochs``-th epoch, or a
    stop asked for (``trainer.should_stop``: ``max_time``, early stopping) once ``min_epochs`` epochs
    (``"epoch"``: this one counted) and ``min_steps`` steps are done.  ``"batch"`` is asked in
    ``on_train_batch_end``, after the ``Timer``, which Lightning lists before the module's callbacks."""
    if unit not in ("batch", "epoch"):
        raise ValueError(f"unit must be 'batch' or 'epoch', got {unit!r}")
    steps, epochs = trainer.max_steps, trainer.max_epochs
    if steps is not None and steps != -1 and trainer.global_step >= steps:
        return True
    epochs_done, last = trainer.current_epoch + 1, True   # this epoch is counted processed, not yet completed
    if unit == "batch":
        epochs_done, done = trainer.current_epoch, trainer.fit_loop.epoch_loop.batch_progress.current.processed
        last = isinstance(trainer.num_training_batches, int) and done >= trainer.num_training_batches
    if last and epochs is not None and epochs != -1 and trainer.current_epoch + 1 >= epochs:
        return True
    return bool(trainer.should_stop) and epochs_done >= (trainer.min_epochs or 0) and \
        trainer.global_step >= (trainer.min_steps or 0)
