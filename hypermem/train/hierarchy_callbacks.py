"""Callbacks the hierarchy CLI adds to every run (:mod:`hypermem.train.hierarchy_cli`).

* :class:`RunSummary` — at the end of ``fit``, prints the final metrics, the best and the
  last checkpoint and the log folder (global-zero process only), after closing the progress
  bar (:func:`close_progress_bar`); on Ctrl-C, one line: the
  step, the last checkpoint and the command that resumes the run; a resume of a checkpoint from
  outside the run's folder says so in one line (:func:`foreign_resume_note`).
* :class:`ProgressLines` — when the progress bar is off (stdout is not a terminal), one
  line per epoch: epoch, step, the last loss, and the validation metrics when it validated.
* :class:`ValidateLastEpoch` — the last epoch always validates, so the final metrics are a
  validation like the others: a ``ModelCheckpoint(monitor="val/map")`` sees them and its best
  checkpoint is the best of *all* validations (a 25-epoch run validating every 20 epochs
  validates at epochs 20 and 25; a 5-epoch run at epoch 5).  :class:`HierarchyModule
  <hypermem.train.hierarchy_module.HierarchyModule>` adds it to every trainer
  (``configure_callbacks``).
"""

from __future__ import annotations

import sys
import time

import lightning.pytorch as pl

from .run_folder import checkpoint_step, epochs_text
from .run_logger import log_note

_SHOWN = ("val/map", "val/mean_rank", "val/f1", "val/mrr", "test/f1")


def _fmt(metrics: dict) -> str:
    return "  ".join(f"{k} {float(v):.4g}" for k, v in metrics.items())


class ProgressLines(pl.Callback):
    """One line per epoch on stdout when the trainer has no progress bar."""

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.progress_bar_callback is not None:
            return
        # on every process: under DDP reading the metrics syncs the epoch's (a collective call), and
        # the processes must make the same collective calls in the same order
        m = trainer.callback_metrics
        if not trainer.is_global_zero:
            return
        shown = {}
        loss = m.get("train/loss_step", m.get("train/loss"))   # hierarchy embeddings log it both ways, encoders per step
        if loss is not None:
            shown["train/loss"] = loss
        final = getattr(pl_module, "final_metrics", {}) or {}
        if final.get("epoch") == trainer.current_epoch + 1:
            shown.update({k: m[k] for k in _SHOWN if k in m})
        print(f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}  step {trainer.global_step}  {_fmt(shown)}"
              f"{_burn_note(pl_module, trainer.current_epoch + 1)}", flush=True)


def _burn_note(module: pl.LightningModule, epoch: int) -> str:
    """The burn-in's mark on an epoch line (hierarchy embeddings: ``lr * burn_in_lr_factor`` for the
    first ``burn_in`` epochs, so the loss jumps where it ends), else nothing."""
    hp = getattr(module, "hparams", {})
    burn, factor = int(hp.get("burn_in", 0) or 0), hp.get("burn_in_lr_factor")
    if not burn or factor is None or epoch > burn + 1:
        return ""
    return f"  (burn-in: lr x{factor:g})" if epoch <= burn else "  (burn-in over: the full lr from here)"


class RunSummary(pl.Callback):
    """Print where a run ended and where its files are (see the module docstring).

    ``resume``: the command that resumes the run, printed when the run is interrupted
    (Ctrl-C, or SIGTERM): one line with the step, the last checkpoint and that command
    (:meth:`interrupt_line`); :attr:`interrupted` is then true and :attr:`exit_status` the
    shell's status for the signal (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, resume: str | None = None) -> None:
        self.resume = resume
        self.interrupted = False
        self.exit_status = 130
        self.train_ended = False   # fit reached on_train_end: the last checkpoint holds the training

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start, self.train_ended = time.perf_counter(), False
        # the training time a resumed run already spent (Lightning's Timer restores it before fit starts)
        self.used = next((cb.time_elapsed() for cb in trainer.callbacks if _timed(cb)), 0.0)
        self.first_step = 0   # the checkpoint's global_step, once restored (on_train_start)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.first_step = trainer.global_step   # a resumed run's loops are restored after on_fit_start
        note = foreign_resume_note(trainer) if trainer.is_global_zero else None
        if note:   # the resume was accepted: every check and restore is behind
            print(note, file=sys.stderr, flush=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.train_ended = True   # before the module's (its final evaluation, hp_metric)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        from lightning.pytorch.utilities.exceptions import SIGTERMException

        if not isinstance(exception, (KeyboardInterrupt, SIGTERMException)):
            return
        self.interrupted = True
        self.exit_status = 143 if isinstance(exception, SIGTERMException) else 130   # 128 + the signal
        if trainer.is_global_zero:
            close_progress_bar(trainer, pl_module)
            print(self.interrupt_line(trainer), flush=True)

    def interrupt_line(self, trainer: pl.Trainer) -> str:
        """``interrupted at step S (epoch E): last checkpoint P (step T); resume: COMMAND``."""
        from pathlib import Path

        from lightning.pytorch.callbacks import ModelCheckpoint

        paths = {p for cb in trainer.callbacks if isinstance(cb, ModelCheckpoint)
                 for p in (cb.last_model_path, "" if cb.monitor else cb.best_model_path) if p and Path(p).is_file()}
        # stopped in on_train_end: the final evaluation, not the training (a stop's evaluation at its
        # epoch's end, before that epoch's last.ckpt, is a validation: the previous checkpoint stays)
        if self.train_ended:
            kept = (f"; last checkpoint {max(paths, key=lambda p: Path(p).stat().st_mtime)} holds the trained "
                    "embedding" if paths else "")
            return (f"training finished ({epochs_text(trainer.current_epoch)}, {trainer.global_step} optimizer steps); "
                    f"the final evaluation was interrupted{kept}: no resume needed (evaluate it with `validate "
                    "--ckpt_path=last`)")
        head = f"interrupted at step {trainer.global_step} (epoch {trainer.current_epoch + 1})"
        if not paths:
            return f"{head}: no checkpoint written yet, nothing to resume (the first comes at the end of epoch 1)"
        last = max(paths, key=lambda p: Path(p).stat().st_mtime)
        step = checkpoint_step(last)   # the file's own step: under DDP a best checkpoint may be newer
        at = f" (step {step})" if step is not None else ""
        resume = f"; resume: {self.resume}" if self.resume else "; resume with --ckpt_path=last"
        return f"{head}: last checkpoint {last}{at}{resume}"

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        log_dir = trainer.log_dir  # a collective call under DDP: every process makes it
        if not trainer.is_global_zero:
            return
        close_progress_bar(trainer, pl_module)
        print(self.summary(trainer, pl_module, log_dir), flush=True)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """``validate``: the checkpoint it evaluated and where it logged (``fit`` says it at its end)."""
        if trainer.state.fn != "validate":
            return
        log_dir = trainer.log_dir
        if trainer.is_global_zero:
            what = trainer.ckpt_path or "the model's initial weights (no --ckpt_path)"
            final = getattr(pl_module, "final_metrics", {}) or {}
            if trainer.ckpt_path and final.get("epoch") is not None:   # counted from 1, as the fit says it
                what += f" (epoch {final['epoch']}, step {final.get('step')})"
            where = f"logs: {log_dir}" if trainer.logger is not None and log_dir else "not logged"
            print(f"validated {what}; {where}", flush=True)

    def used_up_resume(self, trainer: pl.Trainer) -> tuple[str, int] | None:
        """``(held, global_step)`` of the checkpoint a run resumed (``held``: the training it holds,
        ``"12 epochs"``, or ``"11 epochs and 3 batches of epoch 12"`` for one stopped inside an
        epoch: :func:`~hypermem.train.run_folder.progress_text`) when the run trained nothing
        because the resumed run had already used up ``trainer.max_time`` (Lightning's ``Timer``
        counts the time of the checkpoint's runs), else ``None``."""
        from .run_folder import checkpoint_progress, progress_text, read_checkpoint

        used = getattr(self, "used", 0.0)
        limit = next((cb.time_elapsed() + cb.time_remaining() for cb in trainer.callbacks if _timed(cb)), None)
        if limit is None or not trainer.ckpt_path or not 0 < limit <= used:
            return None
        state = read_checkpoint(trainer.ckpt_path)
        progress = None if state is None else checkpoint_progress(trainer.ckpt_path, state=state)
        if progress is None or progress[1] != trainer.global_step:
            return None
        return progress_text(state) or epochs_text(progress[0]), progress[1]

    def summary(self, trainer: pl.Trainer, pl_module: pl.LightningModule, log_dir: str | None = None) -> str:
        seconds = time.perf_counter() - getattr(self, "_start", time.perf_counter())
        state = "interrupted" if trainer.interrupted else "done"
        resumed = self.used_up_resume(trainer)
        if resumed is not None:   # max_time used up by the checkpoint: not one step taken
            limit, spent = time_limit_note(trainer, only_limit=True), self.used
            lines = [f"{state}: {resumed[0]}, {trainer.global_step} optimizer steps "
                     f"(those of {trainer.ckpt_path}); nothing trained: trainer.max_time {limit} was already used up "
                     f"by the run being resumed ({spent:.1f} s; max_time counts the time of the runs resumed); raise "
                     "it to train more"]
        else:
            lines = [f"{state}: {epochs_done(trainer)}, "
                     f"{steps_done(getattr(self, 'first_step', 0), trainer.global_step, seconds)}"
                     + time_limit_note(trainer)]
        final = dict(getattr(pl_module, "final_metrics", {}) or {})
        if final:
            names = {"map": "val/map", "mean_rank": "val/mean_rank", "f1": "val/f1", "mrr": "val/mrr",
                     "test_f1": "test/f1"}
            shown = {names[k]: v for k, v in final.items() if k in names}
            lines.append(f"final metrics (epoch {final.get('epoch')}, step {final.get('step')}): {_fmt(shown)}")
        from lightning.pytorch.callbacks import ModelCheckpoint

        for cb in trainer.callbacks:
            if not isinstance(cb, ModelCheckpoint):
                continue
            if cb.monitor and cb.best_model_path:
                score = "" if cb.best_model_score is None else f" ({cb.monitor} {float(cb.best_model_score):.4g})"
                lines.append(f"best checkpoint: {cb.best_model_path}{score}")
            elif not cb.monitor and cb.best_model_path:  # no monitor: the newest checkpoint
                lines.append(f"last checkpoint: {cb.best_model_path}")
            if cb.last_model_path:
                lines.append(f"last checkpoint: {cb.last_model_path}")
        if log_dir:
            lines.append(log_note(trainer, log_dir))
        return "\n".join(lines)


def foreign_resume_note(trainer: pl.Trainer) -> str | None:
    """One line when ``fit --ckpt_path=FILE`` resumed a checkpoint that lies outside the folder this
    run saves its checkpoints in (another run's, a copied file), else ``None``: the training goes on
    from the file, but Lightning's ``ModelCheckpoint`` keeps only the file's ``best_model_path``, not
    its best score and top-k record (its raw ``The dirpath has changed`` warning is silenced by the
    CLI and replaced by this line, printed once the resume was accepted)."""
    from pathlib import Path

    from lightning.pytorch.callbacks import ModelCheckpoint

    if not trainer.ckpt_path or not Path(trainer.ckpt_path).is_file():
        return None
    folder = Path(trainer.ckpt_path).resolve().parent
    dirs = {cb.dirpath for cb in trainer.callbacks if isinstance(cb, ModelCheckpoint) and cb.dirpath}
    if not dirs or any(Path(d).resolve() == folder for d in dirs):
        return None
    return (f"note: resumed {trainer.ckpt_path} (step {trainer.global_step}, from outside this run's folder); "
            f"checkpoints now go to {', '.join(sorted(str(d) for d in dirs))} and its best-checkpoint "
            "ranking starts afresh")


def close_progress_bar(trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
    """Close the live progress bar before the summary is printed.  Lightning calls ``on_fit_end``
    before the callbacks' ``teardown``, where the rich progress bar stops its live display: a line
    printed under a live display is followed by the bar's last frame drawn again.  Its
    ``teardown`` (and ``on_exception``) stop the display; a second call does nothing."""
    bar = trainer.progress_bar_callback
    if bar is not None:
        bar.teardown(trainer, pl_module, "fit")


def _timed(cb) -> bool:
    """Whether ``cb`` is Lightning's ``Timer`` with a limit (``trainer.max_time``)."""
    from lightning.pytorch.callbacks import Timer

    return isinstance(cb, Timer) and cb.time_remaining() is not None


def steps_done(first: int, last: int, seconds: float) -> str:
    """The optimizer steps of this run and its time: ``"40 optimizer steps in 3.1 s"`` from the
    start; a resumed run (``first``, the checkpoint's step, above 0) took steps ``first+1`` to
    ``last`` in ``seconds``, which say nothing of the steps before:
    ``"optimizer steps 86-121 (36 this run) in 62.1 s; 121 in all"``."""
    if first <= 0:
        return f"{last} optimizer steps in {seconds:.1f} s"
    if last <= first:
        return f"no optimizer step this run ({seconds:.1f} s); {last} in all"
    this = last - first
    span = f"step {last}" if this == 1 else f"steps {first + 1}-{last}"
    return f"optimizer {span} ({this} this run) in {seconds:.1f} s; {last} in all"


def epochs_done(trainer: pl.Trainer) -> str:
    """``"5 epochs"``, or ``"4 epochs and 7 of 10 batches of epoch 5"`` when a limit
    (``max_time``, ``max_steps``) stopped the run inside an epoch (Lightning counts that epoch
    as done; checkpoint names number epochs from 0)."""
    done, total = trainer.current_epoch, trainer.num_training_batches
    batches = trainer.fit_loop.epoch_loop.batch_progress.current.completed
    if done >= 1 and isinstance(total, int) and 0 < batches < total:
        return f"{epochs_text(done - 1)} and {batches} of {total} batches of epoch {done}"
    return epochs_text(done)



def time_limit_note(trainer: pl.Trainer, only_limit: bool = False) -> str:
    """``" (stopped at the time limit, trainer.max_time 0:00:40)"`` when ``trainer.max_time`` ended
    the run, else ``""`` (``only_limit``: ``"0:00:40"``)."""
    import datetime

    for cb in trainer.callbacks:
        left = cb.time_remaining() if _timed(cb) else None
        if left is not None and left <= 0:
            limit = datetime.timedelta(seconds=round(cb.time_elapsed() + left))
            return str(limit) if only_limit else f" (stopped at the time limit, trainer.max_time {limit})"
    return ""


class ValidateLastEpoch(pl.Callback):
    """Validate at the last epoch (``max_epochs``) even when ``check_val_every_n_epoch`` does
    not divide it (see the module docstring).

    Lightning decides per epoch with ``(epoch + 1) % trainer.check_val_every_n_epoch == 0``;
    for the last epoch this callback sets that attribute to 1 and restores it as soon as the
    validation ended (before the checkpoint callbacks, which Lightning runs last: with the
    value 1 a ``ModelCheckpoint`` would wait for the end of the training epoch instead of
    saving at the end of validation).
    Runs without epoch-based validation (``check_val_every_n_epoch=None``, validation off, no
    ``max_epochs``) are left alone."""

    def __init__(self) -> None:
        self._saved: int | None = None

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        every, last = trainer.check_val_every_n_epoch, trainer.max_epochs
        if (every is None or every == 1 or not trainer.enable_validation or last is None or last < 1
                or trainer.current_epoch + 1 != last):
            return
        self._saved, trainer.check_val_every_n_epoch = every, 1

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore(trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._restore(trainer)

    def _restore(self, trainer: pl.Trainer) -> None:
        if self._saved is not None:
            trainer.check_val_every_n_epoch, self._saved = self._saved, None


def resume_command(prog: str, args: list[str]) -> str:
    """The command line that resumes a run started with ``args``: them, without a ``--ckpt_path``,
    and ``--ckpt_path=last``."""
    import shlex

    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--ckpt_path":
            skip = True
        elif not arg.startswith("--ckpt_path="):
            out.append(arg)
    return " ".join([prog, shlex.join([*out, "--ckpt_path=last"])])
