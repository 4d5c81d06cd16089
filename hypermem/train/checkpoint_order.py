"""The best checkpoints are chosen before ``last.ckpt`` is written, so a resume knows them.

A ``ModelCheckpoint`` saves its state (``best_k_models``, ``best_model_path``, ``best_model_score``)
into every checkpoint written, and a run resumed from ``last.ckpt`` restores it (when the callback's
``state_key``, its monitor, mode and intervals, and its ``dirpath`` are the same).  When the best
callback decides *after* ``last.ckpt`` was written, the file it keeps is missing from that state:
the resumed run never deletes it, and each stopped-and-resumed part leaves one more
``best-*.ckpt`` behind.  Two orders made that happen, and two functions undo them:

* at an epoch's end Lightning runs the ``ModelCheckpoint`` callbacks in the configuration's order,
  and a best callback that saves there (``save_on_train_epoch_end``, Lightning's default with
  ``val_check_interval: 1.0``) listed after the ``last`` one decided after ``last.ckpt`` was written:
  :func:`best_checkpoints_first` puts the callbacks with a ``monitor`` first;
* a hierarchy-embedding run stopped before its last validation (``trainer.max_steps`` inside an
  epoch) evaluated at ``on_train_end``, after the epoch's ``last.ckpt``: it now evaluates in its
  ``on_train_epoch_end``, which Lightning calls before the checkpoint callbacks', when
  :func:`stops_after_epoch` says this epoch is the run's last.

A checkpoint a run was resumed from (``--ckpt_path``) is never deleted: Lightning's ``ModelCheckpoint``
keeps the file the trainer resumed from.
"""

from __future__ import annotations

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["best_checkpoints_first", "stops_after_epoch"]


def best_checkpoints_first(trainer: pl.Trainer) -> None:
    """Reorder ``trainer.callbacks`` in place: the ``ModelCheckpoint`` callbacks with a ``monitor`` take
    the first of the places the ``ModelCheckpoint`` callbacks hold, in their order, then those without
    one (``last.ckpt``); every other callback keeps its place."""
    callbacks = trainer.callbacks
    places = [i for i, cb in enumerate(callbacks) if isinstance(cb, ModelCheckpoint)]
    ordered = sorted((callbacks[i] for i in places), key=lambda cb: not cb.monitor)   # stable: their order kept
    for i, cb in zip(places, ordered):
        callbacks[i] = cb


def stops_after_epoch(trainer: pl.Trainer) -> bool:
    """Whether ``fit`` ends after the current epoch, asked in its ``on_train_epoch_end``: Lightning's
    rule (its fit loop's ``done``, without its log lines): ``max_steps`` reached, the ``max_epochs``-th
    epoch, or a stop asked for (``trainer.should_stop``: ``max_time``, early stopping) once
    ``min_epochs`` and ``min_steps`` are met."""
    steps, epochs = trainer.max_steps, trainer.max_epochs
    if steps is not None and steps != -1 and trainer.global_step >= steps:
        return True
    done = trainer.current_epoch + 1   # this epoch is counted processed, not yet completed
    if epochs is not None and epochs != -1 and done >= epochs:
        return True
    return bool(trainer.should_stop) and done >= (trainer.min_epochs or 0) and \
        trainer.global_step >= (trainer.min_steps or 0)
