"""A LightningCLI user's second walk: a run stopped before its last validation (a time or
step limit) evaluates at the end, and that evaluation reaches the best checkpoint."""

import pytest
import torch
from train_helpers import train_tiny

pytest.importorskip("lightning")


def test_a_stop_before_the_last_validation_saves_the_final_evaluation_as_best(tmp_path, capsys):
    cli = train_tiny(tmp_path, "--trainer.max_epochs=20", "--trainer.check_val_every_n_epoch=10",
                     "--trainer.max_steps=7")
    final = cli.model.final_metrics
    assert final["step"] == 7
    best = [cb for cb in cli.trainer.checkpoint_callbacks if cb.monitor == "val/map"][0]
    assert best.best_model_path and "step=7" in best.best_model_path
    assert float(best.best_model_score) == pytest.approx(final["map"])
    saved = torch.load(tmp_path / best.best_model_path, map_location="cpu", weights_only=True)
    assert saved["global_step"] == 7
    out = capsys.readouterr().out
    assert "done: 2 epochs and 1 of 3 batches of epoch 3, 7 optimizer steps" in out
