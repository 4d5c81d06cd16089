"""Ctrl-C during ``fit`` saves ``last.ckpt`` at the stop, and ``--ckpt_path=last`` resumes from there:
the resumed run equals the uninterrupted one (weights and optimizer moments), inside an epoch and
at an epoch's last batch; a real SIGINT inside a step stops at the step's end."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from train_helpers import MID_EPOCH_BASE, assert_same_training, run_train, scalars

pytest.importorskip("lightning")

from hypermem.train.hierarchy_module import HierarchyModule  # noqa: E402
from hypermem.train.run_folder import finished_checkpoint, read_checkpoint  # noqa: E402

torch.set_num_threads(1)

BASE = MID_EPOCH_BASE


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whole")
    cli = run_train(tmp, [*BASE, "--trainer.logger.init_args.name=whole"])
    return read_checkpoint(tmp / cli.trainer.log_dir / "checkpoints" / "last.ckpt"), tmp / cli.trainer.log_dir


@pytest.fixture(scope="module")
def whole(whole_run):
    return whole_run[0]


def _steps(logdir, tag: str) -> list[int]:
    return sorted(step for step, _ in scalars(logdir, tag))


def _interrupted(tmp, monkeypatch, name: str, hook: str, at_step: int, action):
    """Run BASE with ``action(module)`` in the module's ``hook`` once ``global_step == at_step``;
    the run must end as Ctrl-C ends it (status 130)."""

    def fire(self, *args):
        if self.global_step == at_step:
            action(self)

    monkeypatch.setattr(HierarchyModule, hook, fire, raising=False)
    with pytest.raises(SystemExit) as exc:
        run_train(tmp, [*BASE, f"--trainer.logger.init_args.name={name}"])
    assert exc.value.code == 130
    monkeypatch.undo()
    return tmp / "runs" / name / "version_0" / "checkpoints" / "last.ckpt"


def _ctrl_c(_module):
    raise KeyboardInterrupt


# batch 2 of epoch 2: saved there; after epoch 2's last batch, before its end: epoch 1's checkpoint stays
@pytest.mark.parametrize(("step", "saved"), [(12, 12), (16, 8)])
def test_ctrl_c_saves_last_ckpt_at_the_stop_and_the_resume_equals_the_whole_run(whole, tmp_path, monkeypatch,
                                                                                  capsys, step, saved):
    last = _interrupted(tmp_path, monkeypatch, "cut", "on_train_batch_end", step, _ctrl_c)
    out = capsys.readouterr().out
    assert f"interrupted at step {step} (epoch 2): last checkpoint runs/cut/version_0/checkpoints/last.ckpt" in out
    assert f"(step {saved}); resume:" in out
    state = read_checkpoint(last)
    assert state["global_step"] == saved   # at 12 not epoch 1's checkpoint (step 8): the work since is kept
    resumed = run_train(tmp_path, [*BASE, "--trainer.logger.init_args.name=cut", "--ckpt_path=last"])
    assert resumed.trainer.global_step == 24
    assert_same_training(whole, read_checkpoint(last))


def test_the_already_complete_line_counts_the_interrupted_epoch_as_part_of_one(whole, tmp_path, monkeypatch):
    last = _interrupted(tmp_path, monkeypatch, "part", "on_train_batch_end", 12, _ctrl_c)
    done = finished_checkpoint(last, max_epochs=3, max_steps=12)
    assert "holds 1 epoch and 2 batches of epoch 2, 12 optimizer steps" in done


@pytest.mark.parametrize(("step", "stop", "epoch"), [(10, 12, 2), (14, 16, 3)])
def test_a_sigint_inside_a_step_stops_at_its_end_with_a_checkpoint(whole_run, tmp_path, monkeypatch, capsys, step,
                                                                   stop, epoch):
    """The signal arrives while the step runs (the module's on_train_batch_start); the step ends, then the run
    (after an epoch's last batch: once the epoch ended, at the next batch)."""
    last = _interrupted(tmp_path, monkeypatch, "sig", "on_train_batch_start", step,
                        lambda _m: os.kill(os.getpid(), signal.SIGINT))
    captured = capsys.readouterr()
    assert "stopping at the end of this step" in captured.err
    assert f"interrupted at step {stop} (epoch {epoch})" in captured.out
    assert read_checkpoint(last)["global_step"] == stop
    run_train(tmp_path, [*BASE, "--trainer.logger.init_args.name=sig", "--ckpt_path=last"])
    whole, whole_dir = whole_run
    assert_same_training(whole, read_checkpoint(last))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # the CLI's handler is put back
    # the curves of the run and its resume: every step once, the interrupted step's point included
    for tag in ("train/loss_step", "train/lr"):
        steps = _steps(last.parent.parent, tag)
        assert steps == _steps(whole_dir, tag) and stop in steps, tag
