"""Every stop of an encoder run validates its last weights, so that the export considers them.

Lightning validates in its training loop when an epoch's validation is due: at the batches of
``val_check_interval`` of an epoch that ``check_val_every_n_epoch`` selects, and at any batch
after which a stop was asked for (``trainer.should_stop``) -- but, again, only in a selected
epoch.  A run stopped by ``trainer.max_steps`` (Lightning ends it without ``should_stop``), by
``trainer.max_time`` (its ``Timer`` sets ``should_stop`` after a batch) or by the end of its
last epoch, in an epoch that ``check_val_every_n_epoch`` does not select, would end with no
validation of its last weights: the export would take an older checkpoint, or (no validation
at all) save an encoder with no threshold.  :class:`ValidateAtStepLimit` makes each of these
stops validate once, at the stop's step, as Lightning's own requested stop does.
"""

from __future__ import annotations

import lightning.pytorch as pl

from .fit_stop import stops_after

__all__ = ["ValidateAtStepLimit"]


class ValidateAtStepLimit(pl.Callback):
    """A stop validates at its step, once (see the module docstring).

    At the batch after which the run stops it asks Lightning to stop (``trainer.should_stop``), and
    Lightning validates a requested stop in the epoch's loop; in an epoch that
    ``check_val_every_n_epoch`` does not select, that attribute is set to 1 for this decision and
    restored as soon as the validation starts (before the checkpoint callbacks run: with the value 1
    a ``ModelCheckpoint`` would wait for the end of the training epoch instead of saving at the end
    of validation), or at the next batch when none ran.  A stop at a batch where a validation is due
    anyway (an epoch's last batch, a ``val_check_interval`` batch) gets that one validation.  A
    ``max_time`` stop therefore runs one validation past the time limit."""

    def __init__(self) -> None:
        self._saved: int | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._restore(trainer)
        if not trainer.enable_validation or not stops_after(trainer, "batch"):
            return
        trainer.should_stop = True
        every = trainer.check_val_every_n_epoch
        if every is not None and every != 1 and (trainer.current_epoch + 1) % every != 0:
            self._saved, trainer.check_val_every_n_epoch = every, 1

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._restore(trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore(trainer)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._restore(trainer)

    def _restore(self, trainer: pl.Trainer) -> None:
        if self._saved is not None:
            trainer.check_val_every_n_epoch, self._saved = self._saved, None
