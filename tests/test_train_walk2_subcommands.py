"""A LightningCLI user's second walk: ``validate --ckpt_path=last`` evaluates the run's last
checkpoint in its own version folder; ``test`` and ``predict`` are refused in one line."""

import pytest
from train_helpers import run_train, train_tiny

pytest.importorskip("lightning")


def test_validate_last_evaluates_the_runs_last_checkpoint_in_its_own_folder(tmp_path, capsys):
    fit = train_tiny(tmp_path, "--trainer.max_epochs=2")
    trained = fit.model.final_metrics["map"]
    versions = sorted(p.name for p in (tmp_path / "runs" / "tiny").iterdir())
    config = (tmp_path / "runs" / "tiny" / "version_0" / "config.yaml").read_text()
    val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--ckpt_path=last"])
    assert val.trainer.ckpt_path.endswith("version_0/checkpoints/last.ckpt")
    assert float(val.trainer.callback_metrics["val/map"]) == pytest.approx(trained)
    assert sorted(p.name for p in (tmp_path / "runs" / "tiny").iterdir()) == versions
    assert "logs: runs/tiny/version_0" in capsys.readouterr().out
    assert (tmp_path / "runs" / "tiny" / "version_0" / "config.yaml").read_text() == config


@pytest.mark.parametrize("sub", ["test", "predict"])
def test_test_and_predict_are_refused_in_one_line(tmp_path, capsys, sub):
    with pytest.raises(SystemExit) as exc:
        run_train(tmp_path, [sub, "--config", "x.yaml"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: `{sub}` is not supported") and "\n" not in err
