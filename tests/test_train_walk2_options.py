"""A LightningCLI user's second walk: options that cannot work are refused in one line."""

import pytest
from train_helpers import train_tiny

pytest.importorskip("lightning")


def refused(tmp_path, capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, *argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip()


@pytest.mark.parametrize("opt", ["--optimizer=Adam", "--lr_scheduler=StepLR"])
def test_lightnings_optimizer_options_are_not_offered(tmp_path, capsys, opt):
    err = refused(tmp_path, capsys, opt)
    assert err.startswith("error:") and "--model.optimizer" in err and len(err.splitlines()) <= 5
    assert not (tmp_path / "runs").exists()


def test_a_trainer_misconfiguration_is_one_line(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: --trainer.accelerator=gpu works")
    err = refused(tmp_path, capsys, "--trainer.accelerator=gpu")
    assert err.startswith("error:") and "gpu" in err and "\n" not in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("epochs", ["0", "-3"])
def test_max_epochs_that_train_nothing_are_refused(tmp_path, capsys, epochs):
    err = refused(tmp_path, capsys, f"--trainer.max_epochs={epochs}")
    assert err.startswith(f"error: --trainer.max_epochs={epochs} trains nothing") and "\n" not in err
    assert not (tmp_path / "runs").exists()


def test_a_bad_value_in_a_config_file_names_the_file(tmp_path, capsys):
    from train_helpers import CONFIG, EDGES, run_train

    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    (tmp_path / "bad.yaml").write_text(CONFIG.replace("dim: 2", "dim: -2"))
    with pytest.raises(SystemExit) as exc:
        run_train(tmp_path, ["fit", "--config", "bad.yaml"])
    assert exc.value.code == 2
    assert "error: model.dim must be a positive integer, got -2 (set in bad.yaml)" in capsys.readouterr().err
    with pytest.raises(SystemExit):   # a later command-line value names no file
        run_train(tmp_path, ["fit", "--config", "bad.yaml", "--model.dim=-3"])
    err = capsys.readouterr().err
    assert "got -3" in err and "bad.yaml" not in err
