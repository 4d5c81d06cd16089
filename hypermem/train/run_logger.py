"""The loggers of ``trainer.logger`` that hold a run's folder (:mod:`~hypermem.train.hierarchy_cli`).

A run's folder is ``<save_dir>/<name>/version_<N>/``, the folder of a logger with Lightning's
``save_dir``/``name``/``version`` arguments: ``TensorBoardLogger`` and ``CSVLogger``
(``lightning.pytorch.loggers``) and their subclasses.  ``trainer.logger`` may be one logger or a
list of them (Lightning's ``logger: [..., ...]``); each class is resolved from its ``class_path``
(the class the user's config names, imported as LightningCLI imports it to build it) and
recognised with ``issubclass``.  Every such logger of the list gets the run's name when it has
none, and on a resume the version of the checkpoint's run.  The *first* logger drives the run:
Lightning writes the checkpoints into its folder, so ``--ckpt_path=last`` and ``best`` look there;
a first logger of another kind (or ``logger: false``) leaves them to Lightning, and
``--ckpt_path=last``/``best`` with such a logger is refused in one line.

A ``CSVLogger``'s writer deletes the ``metrics.csv`` of the version folder it opens; a resume
keeps the rows the checkpoint had logged (``step`` up to its ``global_step``, as TensorBoard's
``purge_step`` keeps one point per step) and writes them back before the resumed part logs
(:class:`KeepCsvRows`), so the version's ``metrics.csv`` holds the whole run.
"""

from __future__ import annotations

import csv
import importlib
import inspect
from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from .run_folder import best_checkpoint, checkpoint_version, latest_last_checkpoint

__all__ = ["CSV", "SUPPORTED", "TENSORBOARD", "KeepCsvRows", "RunLogger", "RunLoggers", "log_note", "logger_kind"]

TENSORBOARD, CSV = "tensorboard", "csv"
SUPPORTED = "a TensorBoardLogger or a CSVLogger (lightning.pytorch.loggers, or a subclass)"


def logger_class(class_path: Any) -> type | None:
    """The class ``class_path`` (``package.module.Class``) names, or ``None`` when it names none."""
    module, _, name = str(class_path or "").rpartition(".")
    if not module:
        return None
    try:
        obj = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return obj if isinstance(obj, type) else None


def logger_kind(cls: type | None) -> str | None:
    """:data:`TENSORBOARD` for ``TensorBoardLogger`` and its subclasses, :data:`CSV` for ``CSVLogger``
    and its subclasses, else ``None``."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    if isinstance(cls, type) and issubclass(cls, TensorBoardLogger):
        return TENSORBOARD
    if isinstance(cls, type) and issubclass(cls, CSVLogger):
        return CSV
    return None


class RunLogger:
    """One logger of ``trainer.logger`` with a run folder: its config's ``init_args`` (changed in
    place: the name, the version, TensorBoard's ``sub_dir``/``purge_step``), its kind and class."""

    def __init__(self, init: Any, kind: str, cls: type):
        self.init, self.kind, self.cls = init, kind, cls

    def get(self, key: str) -> Any:
        """``init_args.<key>``, or the class's default when the config leaves it out."""
        if self.init.get(key) is not None:
            return self.init.get(key)
        param = inspect.signature(self.cls.__init__).parameters.get(key)
        return None if param is None or param.default is inspect.Parameter.empty else param.default

    @property
    def save_dir(self) -> str:
        return str(self.get("save_dir") or ".")

    @property
    def name(self) -> str:
        return str(self.get("name") or "")

    def folder(self, version: int) -> Path:
        return Path(self.save_dir, self.name, f"version_{version}")


class RunLoggers:
    """The loggers of ``trainer.logger`` (one config node, a list of them, ``None`` or a bool)."""

    def __init__(self, logger: Any):
        nodes = list(logger) if isinstance(logger, (list, tuple)) else [logger]
        nodes = [n for n in nodes if n is not None and not isinstance(n, bool) and hasattr(n, "get")]
        self.first_path = str(nodes[0].get("class_path")) if nodes else None
        self.all: list[RunLogger] = []
        self.driving: RunLogger | None = None
        for i, node in enumerate(nodes):
            cls = logger_class(node.get("class_path"))
            kind = logger_kind(cls)
            if kind is None or node.get("init_args") is None:
                continue
            self.all.append(RunLogger(node.init_args, kind, cls))
            if i == 0:
                self.driving = self.all[-1]

    @property
    def tensorboard(self) -> list:
        """The ``init_args`` of the TensorBoard loggers (their ``sub_dir``/``purge_step`` are set)."""
        return [lg.init for lg in self.all if lg.kind == TENSORBOARD]

    def name_runs(self, name: str) -> None:
        """Give each logger without a name of its own (or Lightning's ``lightning_logs``) ``name``."""
        for lg in self.all:
            if lg.init.get("name") in (None, "lightning_logs"):
                lg.init.name = name

    def set_version(self, version: int) -> None:
        for lg in self.all:
            lg.init.version = version

    def resolve_ckpt(self, ckpt: str | None, subcommand: str, encoder: bool = False) -> str | None:
        """The checkpoint file of ``--ckpt_path=ckpt``: ``last`` is the ``last.ckpt`` of the run's
        latest version (:func:`~hypermem.train.run_folder.latest_last_checkpoint`), ``best`` (``validate``
        only) that version's best checkpoint (:func:`~hypermem.train.run_folder.best_checkpoint`);
        the loggers then continue in that version, as for a file of a version folder of this run.
        Raises ``ValueError`` (one line) when there is no such file, or no run folder to look in."""
        run = self.driving
        if ckpt in ("best", "last") and run is None and self.first_path is not None:
            raise ValueError(f"--ckpt_path={ckpt} looks in the run folder of the first trainer.logger, which must be "
                             f"{SUPPORTED}; {self.first_path} is not: put one first or give a checkpoint path")
        if ckpt == "best":
            hit = best_checkpoint(run.save_dir, run.name) if run is not None else None
            if subcommand == "fit" or hit is None:
                best = "best-step=S" if encoder else "best-epoch=E-step=S"
                why = ("fit resumes from --ckpt_path=last (the best checkpoint is not where training stopped)"
                       if subcommand == "fit" else "no run of this name has a best checkpoint: train first")
                raise ValueError(f"--ckpt_path=best: {why}; or give a path (runs/<name>/version_<N>/"
                                 f"checkpoints/{best}.ckpt)")
            self.set_version(hit[0])
            return str(hit[1])
        if ckpt == "last" and run is not None:  # validate too: its own version folder
            hit = latest_last_checkpoint(run.save_dir, run.name)
            if hit is None:
                raise ValueError(f"--ckpt_path=last: no {Path(run.save_dir, run.name)}"
                                 "/version_*/checkpoints/last.ckpt to resume; train first or give a path")
            self.set_version(hit[0])
            return str(hit[1])
        mine = checkpoint_version(ckpt, run.save_dir, run.name) if ckpt and run is not None else None
        if mine is not None:   # a checkpoint of this run: its own version folder, as for last
            self.set_version(mine)
        return ckpt


class KeepCsvRows(pl.Callback):
    """Writes back the ``metrics.csv`` rows of a resumed run's ``CSVLogger`` version folder that its
    writer deleted when it opened the folder (:meth:`remember` before the run, ``setup`` after the
    loggers opened their folders, before anything is logged)."""

    def __init__(self):
        self.kept: dict[Path, tuple[list[str], list[dict]]] = {}

    def remember(self, folder: Path, step: int) -> bool:
        """Keep the rows of ``folder/metrics.csv`` whose ``step`` is at most ``step``; whether it had any."""
        path = Path(folder, "metrics.csv")
        if not path.is_file():
            return False
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            rows = [r for r in reader if _step(r) is not None and _step(r) <= step]
            header = list(reader.fieldnames or [])
        self.kept[folder.resolve()] = (header, rows)
        return True

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        from lightning.pytorch.loggers import CSVLogger

        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            kept = self.kept.pop(Path(logger.log_dir).resolve(), None) if isinstance(logger, CSVLogger) else None
            if kept is None:
                continue
            header, rows = kept
            writer = logger.experiment
            with open(writer.metrics_file_path, "w", newline="") as f:
                out = csv.DictWriter(f, fieldnames=header)
                out.writeheader()
                out.writerows(rows)
            writer.metrics_keys = sorted(header)   # the writer appends to these columns (or rewrites with more)


def _step(row: dict) -> int | None:
    try:
        return int(float(row.get("step") or ""))
    except ValueError:
        return None


def log_note(trainer: pl.Trainer, log_dir: str) -> str:
    """``logs: DIR`` and how to read them: ``tensorboard --logdir DIR`` for a TensorBoard logger,
    the ``metrics.csv`` file of a CSV logger (each logger of the trainer, in order)."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    how = []
    for logger in trainer.loggers:
        if isinstance(logger, TensorBoardLogger):
            how.append(f"tensorboard --logdir {logger.log_dir}")
        elif isinstance(logger, CSVLogger):
            how.append(f"metrics: {Path(logger.log_dir, 'metrics.csv')}")
    return f"logs: {log_dir}" + (f"  ({'; '.join(how)})" if how else "")
