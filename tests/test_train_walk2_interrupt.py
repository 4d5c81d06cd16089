"""A LightningCLI user's second walk: Ctrl-C during the final evaluation of a finished run
says that training finished (no resume needed)."""

import pytest
from train_helpers import train_tiny

pytest.importorskip("lightning")


def test_an_interrupt_in_the_final_evaluation_says_training_finished(tmp_path, capsys, monkeypatch):
    from hypermem.train.hierarchy_module import HierarchyModule

    def killed(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(HierarchyModule, "on_train_end", killed)
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--trainer.max_epochs=1")
    assert exc.value.code == 130
    out = capsys.readouterr().out
    assert "training finished (1 epoch," in out and "final evaluation was interrupted" in out
    assert "last.ckpt holds the trained embedding" in out and "interrupted at step" not in out
