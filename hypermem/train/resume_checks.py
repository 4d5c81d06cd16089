"""The checks of ``hypermem train ... --ckpt_path=FILE`` before anything is built (:mod:`~hypermem.train.hierarchy_cli`).

The checkpoint is read once (:func:`~hypermem.train.run_folder.read_checkpoint`,
``torch.load(weights_only=True)``) and that dict is handed to each check: its model against the
run's (:func:`~hypermem.train.checkpoint_hparams.compare_checkpoint_hparams`), whether anything
is left to train (:func:`~hypermem.train.run_folder.finished_checkpoint`), whether a resume
inside an epoch would cut other batches (:func:`~hypermem.train.run_folder.other_batches`), and
the step TensorBoard purges from (:func:`~hypermem.train.run_folder.checkpoint_progress`).
Lightning's ``fit`` then reads the file once more to restore it (its own load).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

from .checkpoint_hparams import compare_checkpoint_hparams
from .run_folder import (
    WORLD_KEY,
    checkpoint_progress,
    finished_checkpoint,
    other_batches,
    read_checkpoint,
    world_size_refusal,
)
from .run_logger import TENSORBOARD

__all__ = ["AlreadyComplete", "ConfigError", "check_resume"]


class ConfigError(Exception):
    """A mistake in the options or the config (printed in one line, status 2)."""


def validate_run(path: str | Path) -> str:
    """The TensorBoard run (the logger's ``sub_dir``) of ``validate --ckpt_path=path``:
    ``validate-<file stem>`` inside the version folder, ``validate-last`` for ``last.ckpt``.
    The fit's event files get nothing from a validate (no second ``val/map`` point at a step the
    fit already logged); the logger's ``purge_step`` is the checkpoint's ``global_step``, so
    validating the same checkpoint again replaces that run's point instead of adding one."""
    return f"validate-{Path(path).stem}"


class AlreadyComplete(Exception):
    """A ``fit`` resumed from a checkpoint with nothing left to train (printed, status 0)."""


def check_resume(cfg, loggers, subcommand: str, module_name: str, csv_rows=None) -> Callable[[int], str | None] | None:
    """Check the run's ``--ckpt_path`` (``cfg.ckpt_path``, an existing file) against its config
    ``cfg``; ``loggers``: the run's :class:`~hypermem.train.run_logger.RunLoggers` (a TensorBoard
    logger's ``purge_step`` and ``sub_dir`` are set, a CSV logger's ``version`` of a validate), or
    ``None``; ``csv_rows``: the :class:`~hypermem.train.run_logger.KeepCsvRows` that keeps a resumed
    CSV logger's rows.
    Raises :class:`ConfigError` or :class:`AlreadyComplete`; warns about other ``lr``, loss weights.
    Returns, for a ``fit``, the check of the trainer's number of processes, known once it is built:
    ``refusal(world_size)`` (:func:`~hypermem.train.run_folder.world_size_refusal`); else ``None``."""
    path = cfg.get("ckpt_path")
    if not path or not Path(path).is_file():
        return None
    state = read_checkpoint(path)   # once: every check below reads this dict
    if cfg.get("model") is not None:
        try:
            note = compare_checkpoint_hparams(path, cfg.model, module_name, state=state)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if note:
            warnings.warn_explicit(note, UserWarning, "hypermem.train.hierarchy_cli", 0,
                                   module="hypermem.train.hierarchy_cli")
    run_loggers = loggers.all if loggers is not None else []
    if subcommand == "validate" and state is not None:
        axis = checkpoint_progress(path, state=state)
        for lg in run_loggers if axis is not None else ():   # its own run beside the fit's (validate_run)
            if lg.kind == TENSORBOARD:   # one point per step
                lg.init.sub_dir, lg.init.purge_step = validate_run(path), axis[1]
            elif isinstance(lg.init.get("version"), int):   # a CSV logger: its own metrics.csv, not the fit's
                lg.init.version = f"version_{lg.init.version}/{validate_run(path)}"
    if subcommand != "fit" or state is None:
        return None
    done = finished_checkpoint(path, cfg.trainer.get("max_epochs"), cfg.trainer.get("max_steps"), state=state)
    if done:
        raise AlreadyComplete(done)
    other = other_batches(path, cfg.get("data"), state=state)
    if other:
        raise ConfigError(other)
    progress = checkpoint_progress(path, state=state)
    for lg in run_loggers if progress is not None else ():
        # what a stopped run logged after the checkpoint is dropped: one point per step
        if lg.kind == TENSORBOARD:
            lg.init.purge_step = progress[1] + 1
        elif isinstance(lg.init.get("version"), int) and csv_rows is not None:   # the writer deletes metrics.csv
            if csv_rows.remember(lg.folder(lg.init.version), progress[1]):
                warnings.filterwarnings("ignore", message="Experiment logs directory .* exists and is not empty")
    # the folder holds this run's own checkpoints: Lightning's warning does not apply
    warnings.filterwarnings("ignore", message="Checkpoint directory .* exists and is not empty")
    kept = {WORLD_KEY: state.get(WORLD_KEY), "loops": state.get("loops")}   # not the weights
    return partial(world_size_refusal, path, kept)
