"""Resuming inside an epoch: a run stopped at batch ``b`` of epoch ``e`` (``trainer.max_steps``,
``trainer.max_time``: both checkpoint at the stop) and resumed with ``--ckpt_path`` trains epoch ``e`` from batch ``b``
on, then the following epochs, as the uninterrupted run does.

Lightning's fit loop resumes inside an epoch when its checkpoint's loop state says the epoch
is unfinished, and hands the stateful data loaders (``state_dict``/``load_state_dict``) their
saved state before it iterates them.  Two pieces make the trainers' runs use that:

* :class:`ResumableLoader`, a ``DataLoader`` whose state is ``{"epoch": e, "batches": b}`` (the
  epoch of its latest iterator and the batches the trainer took from it, Lightning's own batch
  counter); restored, its next iterator of epoch ``e`` skips those ``b`` batches.  It draws them
  and throws them away, so a collate function's random stream (the negatives) stands where the
  uninterrupted run's stood: every epoch's data are a function of ``(seed, epoch)``.
* :func:`reopen_stopped_epoch`, run on a checkpoint before Lightning reads its loop state: a
  limit that stops the run inside an epoch ends that epoch early, and Lightning counts it as
  processed (its resume would start the next one); the epoch is counted open again.
"""

from __future__ import annotations

from collections.abc import Callable

from torch.utils.data import DataLoader

from .run_folder import stopped_position

__all__ = ["ResumableLoader", "epoch_ran_out", "reopen_stopped_epoch", "trainer_position"]


def trainer_position(trainer) -> tuple[int, int]:
    """``(epoch, batches)``: the trainer's current epoch and the training batches it has run in it."""
    return int(trainer.current_epoch), int(trainer.fit_loop.epoch_loop.batch_progress.current.processed)


def epoch_ran_out(trainer) -> bool:
    """Whether the trainer's epoch ran all its batches (``False`` in the ``on_train_epoch_end`` of
    an epoch a limit stopped inside)."""
    return trainer_position(trainer)[1] >= trainer.num_training_batches


class ResumableLoader(DataLoader):
    """A ``DataLoader`` that Lightning saves and restores with the fit loop (see the module docstring).

    ``position`` returns ``(epoch, batches)`` (:func:`trainer_position` of the trainer running it,
    or ``None`` outside one); the other arguments are ``DataLoader``'s."""

    def __init__(self, *args, position: Callable[[], tuple[int, int] | None] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.position = position
        self._epoch: int | None = None       # the epoch of the latest iterator
        self._skip: tuple[int, int] | None = None

    def _where(self) -> tuple[int, int] | None:
        return self.position() if self.position is not None else None

    def state_dict(self) -> dict:
        where = self._where()
        if where is None or self._epoch is None:
            return {"epoch": -1, "batches": 0}
        return {"epoch": int(self._epoch), "batches": int(where[1])}

    def load_state_dict(self, state: dict) -> None:
        self._skip = (int(state.get("epoch", -1)), int(state.get("batches", 0)))

    def __iter__(self):
        where = self._where()
        self._epoch = None if where is None else where[0]
        it = super().__iter__()
        skip, self._skip = self._skip, None
        if skip is not None and skip[0] == self._epoch and skip[1] > 0:
            return _after(it, skip[1])
        return it


def _after(it, skip: int):
    """``it`` from its item ``skip`` on.  The first ``skip`` items are drawn (and dropped) at the
    first ``next``, not before: Lightning creates the iterator before it sets the sampler's epoch
    and the module reseeds the data's random streams for the epoch."""
    for _ in range(skip):
        if next(it, _END) is _END:
            return
    yield from it


_END = object()


def reopen_stopped_epoch(checkpoint: dict) -> tuple[int, int] | None:
    """Rewrite the loop state of a checkpoint that :func:`stopped_position` finds stopped at batch
    ``b`` of epoch ``e`` so that Lightning resumes inside epoch ``e``: its epoch counters say
    started, not processed (Lightning's own state of a checkpoint saved inside an epoch), and the
    train loader's state says ``b`` batches of epoch ``e`` are done (already so in a checkpoint
    whose loader was a :class:`ResumableLoader`).  Returns ``(e, b)``, or ``None`` (nothing
    changed).  Run before the loop state is restored (a module's ``on_load_checkpoint``)."""
    where = stopped_position(checkpoint)
    if where is None:
        return None
    epoch, done = where
    loop = checkpoint["loops"]["fit_loop"]
    for key in ("current", "total"):
        counts = loop["epoch_progress"][key]
        counts["processed"] = counts["completed"] = int(counts["processed"]) - 1
    state = loop.setdefault("state_dict", {})
    state["combined_loader"] = [{"epoch": epoch, "batches": done}]
    return where
