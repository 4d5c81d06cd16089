"""A run stopped and resumed in parts keeps the files of an uninterrupted one: ``last.ckpt`` and the
best ``save_top_k`` checkpoints by validation, not a best checkpoint per part.  A stop's final
evaluation is offered to the best checkpoint before ``last.ckpt`` is written, so the resume knows the
file it chose (and deletes it when a better one comes); a checkpoint named by ``--ckpt_path`` stays."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import MID_EPOCH_BASE, run_train, scalars, train_tiny

pytest.importorskip("lightning")

torch.set_num_threads(1)


def _best_state(ckpt: Path, monitor: str) -> dict:
    """The saved state of the ``ModelCheckpoint`` monitoring ``monitor`` in ``ckpt``."""
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    return next(v for k, v in state["callbacks"].items() if "ModelCheckpoint" in k and v.get("monitor") == monitor)


def _check_folder(folder: Path, monitor: str, prefix: str) -> Path:
    """The folder holds ``last.ckpt`` and one best checkpoint, the one ``last.ckpt`` records as best."""
    saved = _best_state(folder / "last.ckpt", monitor)
    best = Path(saved["best_model_path"]).name
    assert sorted(p.name for p in folder.iterdir()) == sorted([best, "last.ckpt"])
    assert best.startswith(prefix)
    assert [Path(p).name for p in saved["best_k_models"]] == [best]
    return folder / best


def test_a_run_stopped_and_resumed_in_parts_keeps_one_best_checkpoint(tmp_path):
    name = "--trainer.logger.init_args.name=parts"
    folder = tmp_path / "runs" / "parts" / "version_0" / "checkpoints"
    run_train(tmp_path, [*MID_EPOCH_BASE, name, "--trainer.max_steps=12"])   # inside epoch 2: evaluated at the stop
    assert _check_folder(folder, "val/map", "best-").name == "best-epoch=1-step=12.ckpt"
    run_train(tmp_path, [*MID_EPOCH_BASE, name, "--trainer.max_steps=20", "--ckpt_path=last"])
    _check_folder(folder, "val/map", "best-")
    cli = run_train(tmp_path, [*MID_EPOCH_BASE, name, "--ckpt_path=last"])
    assert cli.trainer.global_step == 24
    best = _check_folder(folder, "val/map", "best-")
    # the best of every evaluation of the three parts, the stops' included
    vals = scalars(tmp_path / cli.trainer.log_dir, "val/map")
    assert [s for s, _ in vals] == [8, 12, 16, 20, 24]
    score, step = max((v, s) for s, v in vals)
    assert torch.load(best, map_location="cpu", weights_only=True)["global_step"] == step
    assert float(_best_state(folder / "last.ckpt", "val/map")["best_model_score"]) == pytest.approx(score)


def test_a_checkpoint_passed_as_ckpt_path_is_never_deleted(tmp_path):
    name = "--trainer.logger.init_args.name=from-best"
    folder = tmp_path / "runs" / "from-best" / "version_0" / "checkpoints"
    run_train(tmp_path, [*MID_EPOCH_BASE, name, "--trainer.max_steps=12"])
    stopped = _check_folder(folder, "val/map", "best-")
    # into the same folder (a path alone starts a new version): the restored best callback holds the file
    cli = run_train(tmp_path, [*MID_EPOCH_BASE, name, "--trainer.logger.init_args.version=0",
                               f"--ckpt_path={stopped}"])
    assert Path(cli.trainer.log_dir).name == "version_0" and cli.trainer.global_step == 24
    assert stopped.is_file()   # resumed from: kept, though a later validation beat it
    best = Path(_best_state(folder / "last.ckpt", "val/map")["best_model_path"]).name
    assert best != stopped.name   # beaten, and still kept
    assert sorted(p.name for p in folder.iterdir()) == sorted([stopped.name, best, "last.ckpt"])


def test_an_encoder_run_stopped_and_resumed_keeps_one_best_checkpoint(tmp_path):
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import EDGES, tiny_model_folder

    from hypermem.train.hierarchy_cli import main

    model = tiny_model_folder(tmp_path / "m")
    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))

    def args(*extra):
        return ["fit", "--config", "wordnet_encoder", f"--model.base={model}", "--data.hierarchy=files",
                f"--data.edges={tmp_path / 'edges.tsv'}", "--data.task=none", "--data.batch_size=8",
                "--trainer.max_epochs=3", "--trainer.val_check_interval=1.0", "--model.log_images=false",
                f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--trainer.logger.init_args.name=enc",
                "--model.schedule_steps=12", *extra]

    first = main(args("--trainer.max_steps=1"))   # inside epoch 1: validated at the stop
    per_epoch = first.trainer.num_training_batches
    folder = tmp_path / first.trainer.log_dir / "checkpoints"
    _check_folder(folder, "val/f1", "best-step=")
    main(args(f"--trainer.max_steps={per_epoch + 1}", "--ckpt_path=last"))
    _check_folder(folder, "val/f1", "best-step=")
    last = main(args("--ckpt_path=last"))
    assert last.trainer.global_step == 3 * per_epoch
    best = _check_folder(folder, "val/f1", "best-step=")
    assert last.model.exported is not None and str(best) in str(last.model.encoder.config["checkpoint"])


def test_ctrl_c_in_a_stops_evaluation_keeps_the_previous_checkpoint_and_says_resume(tmp_path, capsys, monkeypatch):
    """The stop's evaluation comes before the stop's ``last.ckpt``, as a validation does: Ctrl-C in it
    keeps the checkpoint before it, and the line says to resume (not that training finished)."""
    from hypermem.train.hierarchy_module import HierarchyModule

    real = HierarchyModule.evaluate

    def killed(self):
        if self.global_step == 7:
            raise KeyboardInterrupt
        return real(self)

    monkeypatch.setattr(HierarchyModule, "evaluate", killed)
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--trainer.max_epochs=20", "--trainer.check_val_every_n_epoch=10", "--trainer.max_steps=7")
    assert exc.value.code == 130
    out = capsys.readouterr().out
    assert "interrupted at step 7 (epoch 3)" in out and "(step 6); resume:" in out and "training finished" not in out
    last = torch.load(next(tmp_path.glob("runs/*/version_0/checkpoints/last.ckpt")), map_location="cpu",
                      weights_only=True)
    assert last["global_step"] == 6 and not list(tmp_path.glob("runs/*/version_0/checkpoints/best-*"))
