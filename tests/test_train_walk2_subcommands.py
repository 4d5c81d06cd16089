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


def test_validate_best_evaluates_the_runs_best_checkpoint_from_a_new_process(tmp_path, capsys):
    fit = train_tiny(tmp_path, "--trainer.max_epochs=3")
    (best,) = [cb for cb in fit.trainer.checkpoint_callbacks if cb.monitor]
    val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--ckpt_path=best"])
    assert val.trainer.ckpt_path == best.best_model_path and "/version_0/checkpoints/best-" in val.trainer.ckpt_path
    assert float(val.trainer.callback_metrics["val/map"]) == pytest.approx(float(best.best_model_score))
    assert sorted(p.name for p in (tmp_path / "runs" / "tiny").iterdir()) == ["version_0"]


def test_best_is_refused_for_fit_and_before_any_run_in_one_line(tmp_path, capsys):
    train_tiny(tmp_path, "--trainer.max_epochs=1")
    capsys.readouterr()
    with pytest.raises(SystemExit):
        run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--ckpt_path=best",
                             "--trainer.logger.init_args.name=never_trained"])
    err = capsys.readouterr().err.strip()
    assert "--ckpt_path=best: no run of this name has a best checkpoint" in err and "\n" not in err
    with pytest.raises(SystemExit):
        train_tiny(tmp_path, "--trainer.max_epochs=2", "--ckpt_path=best")
    err = capsys.readouterr().err.strip()
    assert "fit resumes from --ckpt_path=last" in err and "\n" not in err
