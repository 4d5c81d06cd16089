"""Resuming a Lightning run: ``--ckpt_path=last`` continues the latest run's version with
the results of an uninterrupted run; the TensorBoard files keep one step axis."""

import os
from pathlib import Path

import pytest
import torch
from train_helpers import run_train, scalars

pytest.importorskip("lightning")

ROOT = Path(__file__).resolve().parents[1]
BASE = ["fit", "--config", "mammals_poincare", "--trainer.limit_train_batches=4", "--trainer.check_val_every_n_epoch=1",
        "--trainer.enable_model_summary=false", "--model.burn_in=1", "--data.burn_in=1", "--data.batch_size=64",
        "--data.negatives=10", "--data.batches_per_step=2", "--model.dim=5", "--model.schedule_epochs=5",
        "--model.log_images=false", "--model.log_projector=false"]


def _run(tmp: Path, *extra: str):
    return run_train(tmp, [*BASE, *extra])


def _state(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


@pytest.mark.parametrize("optimizer", ["rsgd", "radam"])
def test_three_epochs_then_resume_to_five_equals_five(tmp_path, optimizer):
    opt = f"--model.optimizer={optimizer}"
    first = _run(tmp_path, opt, "--trainer.max_epochs=3", "--trainer.logger.init_args.name=parts")
    log_dir = Path(first.trainer.log_dir)
    assert (tmp_path / log_dir / "checkpoints" / "last.ckpt").is_file()
    assert _state(tmp_path / log_dir / "checkpoints" / "last.ckpt")["epoch"] == 2
    resumed = _run(tmp_path, opt, "--trainer.max_epochs=5", "--trainer.logger.init_args.name=parts", "--ckpt_path=last")
    assert Path(resumed.trainer.log_dir) == log_dir  # the same logger version continues
    whole = _run(tmp_path, opt, "--trainer.max_epochs=5", "--trainer.logger.init_args.name=whole")
    assert resumed.trainer.global_step == whole.trainer.global_step == 5 * 4 * 2
    a = _state(tmp_path / log_dir / "checkpoints" / "last.ckpt")
    b = _state(tmp_path / whole.trainer.log_dir / "checkpoints" / "last.ckpt")
    assert a["epoch"] == b["epoch"] == 4
    wa, wb = a["state_dict"]["embedding.weight"], b["state_dict"]["embedding.weight"]
    assert torch.equal(wa, wb) and not torch.equal(wa, first.model.embedding.weight.detach().cpu())
    if optimizer == "radam":  # the optimizer's moments were restored too
        sa, sb = a["optimizer_states"][0]["state"][0], b["optimizer_states"][0]["state"][0]
        assert torch.equal(sa["exp_avg"], sb["exp_avg"]) and torch.equal(sa["exp_avg_sq"], sb["exp_avg_sq"])
    # one set of curves: the resumed run's validations follow the first run's in the same folder
    parts = scalars(tmp_path / log_dir, "val/map")
    assert [s for s, _ in parts] == [8, 16, 24, 32, 40]
    assert parts == scalars(tmp_path / whole.trainer.log_dir, "val/map")
    # the loss of every group of batches_per_step=2 optimizer steps, on the optimizer-step axis
    losses = scalars(tmp_path / log_dir, "train/loss_step")
    assert [s for s, _ in losses] == list(range(2, 41, 2))
    assert losses == scalars(tmp_path / whole.trainer.log_dir, "train/loss_step")


def test_ckpt_path_last_without_a_run_is_a_short_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _run(tmp_path, "--trainer.max_epochs=1", "--ckpt_path=last")
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no runs/mammals_poincare-" in err[0] and "last.ckpt" in err[0]


def test_latest_last_checkpoint_takes_the_newest(tmp_path):
    from hypermem.train.hierarchy_cli import latest_last_checkpoint

    assert latest_last_checkpoint(tmp_path, "run") is None
    for v, t in ((0, 100), (3, 300), (12, 200)):
        ck = tmp_path / "run" / f"version_{v}" / "checkpoints" / "last.ckpt"
        ck.parent.mkdir(parents=True)
        ck.write_bytes(b"x")
        os.utime(ck, (t, t))
    assert latest_last_checkpoint(tmp_path, "run") == (3, tmp_path / "run" / "version_3" / "checkpoints" / "last.ckpt")


def test_a_resume_purges_what_a_stopped_run_logged_after_its_checkpoint(tmp_path):
    """A run killed after its last checkpoint had logged some steps past it; resumed, it logs
    them again: TensorBoard keeps one point per step, the uninterrupted run's."""
    import shutil

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    name = "--trainer.logger.init_args.name=killed"
    first = _run(tmp_path, "--trainer.max_epochs=2", name)
    ckpt = tmp_path / first.trainer.log_dir / "checkpoints" / "last.ckpt"
    shutil.copy(ckpt, tmp_path / "epoch2.ckpt")
    _run(tmp_path, "--trainer.max_epochs=3", name, "--ckpt_path=last")  # logs epoch 3, then is "killed":
    shutil.copy(tmp_path / "epoch2.ckpt", ckpt)                         # its last checkpoint is epoch 2's
    again = _run(tmp_path, "--trainer.max_epochs=3", name, "--ckpt_path=last")
    assert Path(again.trainer.log_dir) == Path(first.trainer.log_dir)
    assert len(list((tmp_path / again.trainer.log_dir).glob("events.out.tfevents.*"))) == 3
    whole = _run(tmp_path, "--trainer.max_epochs=3", "--trainer.logger.init_args.name=whole")
    acc = EventAccumulator(str(tmp_path / again.trainer.log_dir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/loss_step", "train/loss_epoch", "val/map", "hp_metric"} <= set(tags)
    for tag in tags:  # ('epoch' has a point per value logged at a step, also in the whole run)
        steps = [s for s, _ in scalars(tmp_path / again.trainer.log_dir, tag)]
        assert tag == "epoch" or len(steps) == len(set(steps)), (tag, steps)  # was: two points past epoch 2
        if tag != "hp_metric":  # (the 2-epoch run's end wrote one at step 16: it was not killed)
            assert scalars(tmp_path / again.trainer.log_dir, tag) == scalars(tmp_path / whole.trainer.log_dir, tag)
    assert scalars(tmp_path / again.trainer.log_dir, "hp_metric")[-1] == scalars(tmp_path / whole.trainer.log_dir,
                                                                                   "hp_metric")[-1]
    depth = [e.step for e in acc.Histograms("embedding/depth")]
    assert depth == sorted(set(depth)) == [8, 16, 24]
