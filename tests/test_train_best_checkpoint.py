"""The best checkpoint is the best of all validations, the final one included, and a resume
with nothing left to train says so and writes nothing (issue 33, item 3)."""

from pathlib import Path

import pytest
import torch
from train_helpers import run_train, scalars

pytest.importorskip("lightning")

BASE = ["fit", "--config", "mammals_poincare", "--trainer.limit_train_batches=3", "--trainer.enable_model_summary=false",
        "--model.burn_in=1", "--data.burn_in=1", "--data.batch_size=64", "--data.negatives=10",
        "--data.batches_per_step=1", "--model.dim=5", "--model.log_images=false", "--model.log_projector=false"]


def _run(tmp: Path, *extra: str):
    return run_train(tmp, [*BASE, *extra])


def _val_map(logdir: Path) -> list[tuple[int, float]]:
    return scalars(logdir, "val/map")


def _best(cli):
    from lightning.pytorch.callbacks import ModelCheckpoint

    return next(cb for cb in cli.trainer.callbacks if isinstance(cb, ModelCheckpoint) and cb.monitor == "val/map")


@pytest.mark.parametrize("epochs, every, validated_at", [(5, 2, [2, 4, 5]), (3, 20, [3])])
def test_the_last_epoch_validates_and_the_best_checkpoint_is_the_best_of_all(tmp_path, epochs, every, validated_at):
    cli = _run(tmp_path, f"--trainer.max_epochs={epochs}", f"--trainer.check_val_every_n_epoch={every}",
               "--trainer.logger.init_args.name=best")
    log_dir = tmp_path / cli.trainer.log_dir
    vals = _val_map(log_dir)
    assert [s for s, _ in vals] == [3 * e for e in validated_at]  # 3 optimizer steps per epoch
    assert cli.trainer.check_val_every_n_epoch == every  # restored after the last epoch
    best = _best(cli)
    assert best.best_model_path, "no best checkpoint"  # a run shorter than `every` had none
    score, step = max((v, s) for s, v in vals)
    assert float(best.best_model_score) == pytest.approx(score)
    saved = torch.load(tmp_path / best.best_model_path, map_location="cpu", weights_only=True)
    assert saved["global_step"] == step
    assert cli.model.final_metrics["step"] == 3 * epochs
    assert float(best.best_model_score) >= cli.model.final_metrics["map"] - 1e-6  # logged as float32


def test_a_resume_with_nothing_left_says_complete_and_writes_nothing(tmp_path, capsys):
    args = ["--trainer.max_epochs=2", "--trainer.check_val_every_n_epoch=1", "--trainer.logger.init_args.name=done"]
    first = _run(tmp_path, *args)
    run_dir = tmp_path / "runs" / "done"
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")}
    capsys.readouterr()
    again = _run(tmp_path, *args, "--ckpt_path=last")
    out = capsys.readouterr().out.strip().splitlines()
    assert again is None and first is not None
    assert len(out) == 1 and out[0].startswith("already complete: runs/done/version_0/checkpoints/last.ckpt")
    assert "2 epochs, 6 optimizer steps" in out[0] and "--trainer.max_epochs=2" in out[0]
    assert {p: p.stat().st_mtime_ns for p in run_dir.rglob("*")} == before  # no new events file, no rewrite
    # an explicit path says the same; more epochs train on
    ckpt = str(run_dir / "version_0" / "checkpoints" / "last.ckpt")
    assert _run(tmp_path, *args, f"--ckpt_path={ckpt}") is None
    more = _run(tmp_path, "--trainer.max_epochs=3", "--trainer.logger.init_args.name=done", "--ckpt_path=last")
    assert more.trainer.global_step == 9


def test_finished_checkpoint_follows_lightnings_stop_rule(tmp_path):
    from hypermem.train.hierarchy_cli import finished_checkpoint

    path = tmp_path / "c.ckpt"
    torch.save({"global_step": 12, "loops": {"fit_loop": {"epoch_progress": {"current": {"processed": 4}}}}}, path)
    assert finished_checkpoint(path, 4, -1).startswith("already complete")
    assert finished_checkpoint(path, 5, -1) is None
    assert "--trainer.max_steps=12" in finished_checkpoint(path, 10, 12)
    assert finished_checkpoint(path, None, None) is None  # Lightning's default: 1000 epochs
    assert finished_checkpoint(path, None, 12) is not None
    (tmp_path / "bad.ckpt").write_bytes(b"not a checkpoint")
    assert finished_checkpoint(tmp_path / "bad.ckpt", 1, -1) is None  # Lightning reports it
