"""The step axis of an evaluation: ``global_step`` while fitting, the checkpoint's for ``validate``.

Lightning's ``validate --ckpt_path=FILE`` restores the model's weights only, not the fit loop:
its ``trainer.global_step`` and ``current_epoch`` are 0, so a validation logged against them
would land at step 0, away from the fit's curves.  The modules keep the ``global_step`` and
``epoch`` of the checkpoint they load (:func:`remember_checkpoint`, from their
``on_load_checkpoint``: the content of the file being evaluated) and log a ``validate`` run's
scalars, pictures and histograms at that step (:func:`evaluated_step`), on the one
optimizer-step axis of the fit.
"""

from __future__ import annotations

_KEY = "_hypermem_checkpoint_axis"


def remember_checkpoint(module, checkpoint: dict) -> None:
    """Keep ``(global_step, epoch)`` of ``checkpoint`` (a loaded Lightning checkpoint) on ``module``."""
    try:
        axis = (int(checkpoint.get("global_step", 0)), int(checkpoint.get("epoch", 0)))
    except (TypeError, ValueError):
        axis = None
    object.__setattr__(module, _KEY, axis)


def _checkpoint_axis(module) -> tuple[int, int] | None:
    """The checkpoint's ``(global_step, epoch)`` when ``module`` runs in ``validate`` from a
    checkpoint (``--ckpt_path``), else ``None`` (fit, or validate of the weights in memory)."""
    trainer = getattr(module, "_trainer", None)
    if trainer is None or trainer.state.fn != "validate" or not trainer.ckpt_path:
        return None
    return getattr(module, _KEY, None)


def evaluated_step(module) -> int:
    """The optimizer step an evaluation of ``module`` belongs to: ``global_step``, or in a
    ``validate`` from a checkpoint the checkpoint's ``global_step``."""
    axis = _checkpoint_axis(module)
    return module.global_step if axis is None else axis[0]


def evaluated_epoch(module) -> int:
    """The (0-based) epoch an evaluation of ``module`` belongs to: ``current_epoch``, or in a
    ``validate`` from a checkpoint the checkpoint's ``epoch``."""
    axis = _checkpoint_axis(module)
    return module.current_epoch if axis is None else axis[1]


def validating_checkpoint(module) -> bool:
    """Whether ``module`` runs in ``validate --ckpt_path`` (its step and epoch are the checkpoint's)."""
    return _checkpoint_axis(module) is not None
