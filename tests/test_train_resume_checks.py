"""A resume reads its ``--ckpt_path`` once before ``fit`` (then Lightning restores it), and the
summary lines count a checkpoint stopped inside an epoch as the epochs and batches it holds."""

from __future__ import annotations

import time

import pytest
import torch
from train_helpers import MID_EPOCH_BASE, run_train

pytest.importorskip("lightning")

from hypermem.train.hierarchy_module import HierarchyModule  # noqa: E402

torch.set_num_threads(1)

BASE = [*MID_EPOCH_BASE, "--trainer.logger.init_args.name=run"]


def test_a_resume_reads_its_checkpoint_once_before_lightning_restores_it(tmp_path, monkeypatch):
    run_train(tmp_path, [*BASE, "--trainer.max_steps=12"])
    loads, real, fitting = [], torch.load, []

    def counted(f, *args, **kwargs):
        if str(f).endswith("runs/run/version_0/checkpoints/last.ckpt"):
            loads.append("fit" if fitting else "before")
        return real(f, *args, **kwargs)

    setup = HierarchyModule.setup

    def fit_started(self, stage):   # Lightning restores the checkpoint after the modules' setup
        fitting.append(stage)
        return setup(self, stage)

    monkeypatch.setattr(torch, "load", counted)
    monkeypatch.setattr(HierarchyModule, "setup", fit_started)
    resumed = run_train(tmp_path, [*BASE, "--ckpt_path=last"])
    assert resumed.trainer.global_step == 24
    assert loads == ["before"], loads   # the CLI's checks share one read (it was 4); Lightning reads a file handle


def test_the_nothing_trained_line_counts_a_stopped_epoch_as_its_batches(tmp_path, monkeypatch, capsys):
    """A run stopped inside epoch 2 (max_steps) that used 1 s of its max_time, resumed with max_time 1 s."""
    real = HierarchyModule.on_train_batch_end if hasattr(HierarchyModule, "on_train_batch_end") else None

    def slow(self, *args):
        if self.global_step == 4:
            time.sleep(1.2)   # the time the checkpoint's Timer holds: more than the resume's limit
        if real is not None:
            real(self, *args)

    monkeypatch.setattr(HierarchyModule, "on_train_batch_end", slow)
    run_train(tmp_path, [*BASE, "--trainer.max_steps=12", "--trainer.max_time=00:00:01:00"])
    monkeypatch.undo()
    capsys.readouterr()
    run_train(tmp_path, [*BASE, "--trainer.max_time=00:00:00:01", "--ckpt_path=last"])
    done = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("done: "))
    assert done.startswith("done: 1 epoch and 2 batches of epoch 2, 12 optimizer steps (those of "), done
    assert "nothing trained" in done
