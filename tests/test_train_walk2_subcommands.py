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


def test_the_schedule_warning_is_for_a_resumed_fit_not_for_validate(tmp_path):
    import warnings

    train_tiny(tmp_path, "--trainer.max_epochs=2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--ckpt_path=last", "--trainer.max_epochs=5"])
    assert not [w for w in caught if "learning-rate schedule" in str(w.message)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_tiny(tmp_path, "--trainer.max_epochs=3", "--ckpt_path=last")
    assert [w for w in caught if "schedule spans 2 epochs, this run's 3" in str(w.message)]


def test_validate_of_a_checkpoint_file_logs_into_its_own_run_folder(tmp_path):
    train_tiny(tmp_path, "--trainer.max_epochs=2")
    (best,) = (tmp_path / "runs" / "tiny" / "version_0" / "checkpoints").glob("best-*.ckpt")
    val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", f"--ckpt_path={best}"])
    assert val.trainer.ckpt_path == str(best)
    assert sorted(p.name for p in (tmp_path / "runs" / "tiny").iterdir()) == ["version_0"]


def test_resuming_a_checkpoint_saved_inside_an_epoch_trains_the_rest_of_it(tmp_path):
    import warnings

    per_epoch = train_tiny(tmp_path, "--trainer.max_epochs=1").trainer.global_step
    train_tiny(tmp_path, "--trainer.max_epochs=3", f"--trainer.max_steps={per_epoch + 1}",
               "--trainer.logger.init_args.name=inside")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = train_tiny(tmp_path, "--trainer.max_epochs=3", "--ckpt_path=last",
                             "--trainer.logger.init_args.name=inside")
    assert resumed.trainer.global_step == 3 * per_epoch   # the rest of epoch 2, then epoch 3
    assert not [w for w in caught if "inside epoch" in str(w.message) or "not resumable" in str(w.message)]
