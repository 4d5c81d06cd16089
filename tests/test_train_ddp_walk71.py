"""Lightning training under DDP (walk 71): a resume inside an epoch with another number of
processes is refused; a Ctrl-C's line names last.ckpt's own step and the resume of last.ckpt
removes a best checkpoint the interrupted run wrote after it; a trainer value Lightning refuses
is one line naming the setting and its file (status 2); the encoder's training scalars are the
mean over the processes.  Warnings once, by the first process: test_walk63_ddp.py's two-process run."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint  # noqa: E402
from train_helpers import train_tiny  # noqa: E402

from hypermem.train.hierarchy_callbacks import RunSummary  # noqa: E402
from hypermem.train.interrupt_checkpoint import InterruptCheckpoint, later_checkpoints  # noqa: E402
from hypermem.train.run_folder import WORLD_KEY, world_size_refusal  # noqa: E402

torch.set_num_threads(1)


def _last(tmp: Path, name: str) -> Path:
    return next((tmp / "runs" / name).glob("version_*/checkpoints/last.ckpt"))


def test_a_resume_inside_an_epoch_with_another_number_of_processes_is_refused(tmp_path, capsys):
    train_tiny(tmp_path, "--trainer.max_steps=1", "--trainer.logger.init_args.name=ws")   # inside epoch 1
    last = _last(tmp_path, "ws")
    state = torch.load(last, map_location="cpu", weights_only=True)
    assert state[WORLD_KEY] == 1
    with pytest.raises(SystemExit) as exc:   # refused before any process is launched
        train_tiny(tmp_path, "--trainer.logger.init_args.name=ws", "--ckpt_path=last", "--trainer.strategy=ddp",
                   "--trainer.devices=2")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "after 1 batches on 1 process" in err and "2 processes" in err
    assert "--trainer.devices=1" in err
    state[WORLD_KEY] = 2   # as a 2-process run writes it; resumed by one process
    torch.save(state, last)
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--trainer.logger.init_args.name=ws", "--ckpt_path=last")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "on each of 2 processes" in err and "--trainer.devices=2 --trainer.strategy=ddp" in err


def test_the_number_of_processes_may_change_at_an_epoch_end():
    loops = {"fit_loop": {"epoch_progress": {"current": {"processed": 1, "ready": 1, "completed": 1}},
                          "epoch_loop.batch_progress": {"current": {"processed": 2}, "is_last_batch": True}}}
    assert world_size_refusal("x.ckpt", {WORLD_KEY: 2, "loops": loops}, 1) is None
    inside = {"fit_loop": {"epoch_progress": {"current": {"processed": 1, "ready": 2, "completed": 1}},
                           "epoch_loop.batch_progress": {"current": {"processed": 2}, "is_last_batch": False}}}
    assert "epoch 2 after 2 batches" in world_size_refusal("x.ckpt", {WORLD_KEY: 2, "loops": inside}, 1)
    assert world_size_refusal("x.ckpt", {WORLD_KEY: 2, "loops": inside}, 2) is None
    assert world_size_refusal("x.ckpt", {"loops": inside}, 2) is None   # a checkpoint that does not say


def test_a_bad_trainer_value_in_a_config_file_names_the_setting_and_the_file(tmp_path, capsys):
    (tmp_path / "two.yaml").write_text("trainer:\n  devices: two\n")
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--config", "two.yaml")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: trainer.devices: ") and "got 'two' (set in two.yaml)" in err


def _callbacks(folder: Path):
    last = ModelCheckpoint(dirpath=folder, filename="last")
    best = ModelCheckpoint(dirpath=folder, filename="best-{step}", monitor="val/f1", mode="max")
    return last, best


def _ckpt(path: Path, step: int) -> Path:
    torch.save({"global_step": step, "pytorch-lightning_version": "2"}, path)
    return path


def test_the_interrupt_line_gives_the_step_last_ckpt_holds(tmp_path):
    last_cb, best_cb = _callbacks(tmp_path)
    last_cb.best_model_path = str(_ckpt(tmp_path / "last.ckpt", 10))
    best_cb.best_model_path = str(_ckpt(tmp_path / "best-step=15.ckpt", 15))   # saved after last.ckpt
    trainer = SimpleNamespace(callbacks=[last_cb, best_cb], global_step=17, current_epoch=3)
    summary = RunSummary(resume="hypermem train --ckpt_path=last")
    summary.on_save_checkpoint(trainer, None, {})   # what the old summary took for the last checkpoint's step
    line = summary.interrupt_line(trainer)
    assert f"last checkpoint {tmp_path / 'last.ckpt'} (step 10)" in line


def test_resuming_last_ckpt_removes_a_best_checkpoint_written_after_it(tmp_path, capsys):
    last_cb, best_cb = _callbacks(tmp_path)
    old = _ckpt(tmp_path / "best-step=5.ckpt", 5)
    last = _ckpt(tmp_path / "last.ckpt", 10)
    later = _ckpt(tmp_path / "best-step=15.ckpt", 15)
    os.utime(later, (time.time() + 5, time.time() + 5))   # written after last.ckpt
    best_cb.best_model_path = str(tmp_path / "best-step=10.ckpt")   # removed by the run when step 15 was better
    trainer = SimpleNamespace(checkpoint_callbacks=[last_cb, best_cb], ckpt_path=str(last), global_step=10,
                              is_global_zero=True, world_size=2)
    assert later_checkpoints(SimpleNamespace(**{**vars(trainer), "ckpt_path": str(old)})) == []   # not last.ckpt
    assert later_checkpoints(trainer) == [later]
    InterruptCheckpoint().on_train_start(trainer, None)
    assert not later.exists() and old.exists() and last.exists()
    assert "removed" in capsys.readouterr().err


def test_warnings_before_training_come_from_the_first_process_only(tmp_path, monkeypatch, capsys):
    from lightning.pytorch.utilities.rank_zero import rank_zero_only

    train_tiny(tmp_path, "--trainer.max_epochs=1", "--trainer.logger.init_args.name=w")
    again = ("--trainer.max_epochs=1", "--trainer.logger.init_args.name=w", "--model.lr=0.1", "--ckpt_path=last")
    for rank, expected in ((0, 1), (1, 0)):   # rank 1: a DDP process Lightning launched runs the CLI again
        monkeypatch.setattr(rank_zero_only, "rank", rank)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            train_tiny(tmp_path, *again)   # already complete: the lr warning, then one line
        assert sum("was trained with lr" in str(w.message) for w in seen) == expected, rank


def test_the_encoder_logs_its_loss_terms_reduced_over_the_processes_in_one_call(tmp_path):
    from encoder_helpers import EDGES, NAMES, tiny_model_folder

    from hypermem.train.encoder_data import EncoderDataModule
    from hypermem.train.encoder_module import EncoderModule

    (tmp_path / "e.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    (tmp_path / "n.tsv").write_text("".join(f"{i}\t{t}\n" for i, t in sorted(NAMES.items())))
    module = EncoderModule(base=str(tiny_model_folder(tmp_path / "m")), log_images=False)
    dm = EncoderDataModule(hierarchy="files", edges=str(tmp_path / "e.tsv"), names=str(tmp_path / "n.tsv"),
                           task="none", batch_size=8, negatives=4, hard_negatives=2)
    calls = []

    def reduce(tensor, reduce_op=None):
        calls.append((tensor.clone(), reduce_op))
        return torch.arange(len(tensor), dtype=tensor.dtype)   # what the other processes make of it

    module.trainer = SimpleNamespace(datamodule=dm, world_size=2, global_step=0,
                                     strategy=SimpleNamespace(reduce=reduce))
    module.setup("fit")
    dm.set_epoch(0)
    logged = {}
    module.log = lambda name, value, **kw: logged.__setitem__(name, (value, kw))
    module.optimizers = lambda: SimpleNamespace(param_groups=[{"lr": 0.1}])
    module.training_step(next(iter(dm.batches.epoch(0))), 0)
    assert len(calls) == 1 and calls[0][1] == "mean"
    terms = [k for k in logged if k.startswith("train/") and k != "train/lr"]
    assert "train/loss" in terms and len(calls[0][0]) == len(terms)
    assert [float(logged[k][0]) for k in terms] == [float(i) for i in range(len(terms))]
