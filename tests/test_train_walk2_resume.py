"""A LightningCLI user's second walk: a resume applies the run's own learning rate from its
first resumed step (the checkpoint's lr and schedule are not kept)."""

import pytest
from train_helpers import scalars, train_tiny

pytest.importorskip("lightning")


def test_a_changed_lr_on_resume_applies_from_the_first_resumed_step(tmp_path):
    from hypermem.hierarchy.training import lr_factor

    first = train_tiny(tmp_path, "--trainer.max_epochs=3", "--model.burn_in=1",
                       "--trainer.logger.init_args.name=lrr")
    steps_done = first.trainer.global_step
    again = train_tiny(tmp_path, "--trainer.max_epochs=5", "--model.burn_in=1", "--model.schedule_epochs=3",
                       "--ckpt_path=last", "--model.lr=0.05", "--trainer.logger.init_args.name=lrr")
    epochs = 3  # schedule_epochs: the last epochs run at lr * final_lr_factor
    want_first = 0.05 * lr_factor(3, epochs, 1, 0.1, 0.01)
    lrs = [v for s, v in scalars(tmp_path / again.trainer.log_dir, "train/lr") if s > steps_done]
    assert lrs and lrs[0] == pytest.approx(want_first, rel=1e-6)
    opt = again.model.optimizers().optimizer if hasattr(again.model.optimizers(), "optimizer") \
        else again.model.optimizers()
    assert opt.param_groups[0]["initial_lr"] == pytest.approx(0.05)
