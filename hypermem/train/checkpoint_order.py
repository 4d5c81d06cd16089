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
  :func:`~hypermem.train.fit_stop.stops_after` says this epoch is the run's last.

A checkpoint a run was resumed from (``--ckpt_path``) is never deleted: Lightning's ``ModelCheckpoint``
keeps the file the trainer resumed from.
"""

from __future__ import annotations

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint

__all__ = ["best_checkpoints_first"]


def best_checkpoints_first(trainer: pl.Trainer) -> None:
    """Reorder ``trainer.callbacks`` in place: the ``ModelCheckpoint`` callbacks with a ``monitor`` take
    the first of the places the ``ModelCheckpoint`` callbacks hold, in their order, then those without
    one (``last.ckpt``); every other callback keeps its place."""
    callbacks = trainer.callbacks
    places = [i for i, cb in enumerate(callbacks) if isinstance(cb, ModelCheckpoint)]
    ordered = sorted((callbacks[i] for i in places), key=lambda cb: not cb.monitor)   # stable: their order kept
    for i, cb in zip(places, ordered):
        callbacks[i] = cb
