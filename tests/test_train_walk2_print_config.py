"""A LightningCLI user's second walk: ``--print_config`` shows the run's real name, and a run
from the printed YAML logs under it."""

import pytest
from train_helpers import run_train, train_tiny

pytest.importorskip("lightning")


def test_print_config_shows_the_run_name_and_its_yaml_keeps_it(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, "--model.dim=3", "--print_config")
    assert exc.value.code in (0, None)
    printed = capsys.readouterr().out
    assert "name: tiny-dim=3" in printed and "lightning_logs" not in printed
    (tmp_path / "printed.yaml").write_text(printed)
    cli = run_train(tmp_path, ["fit", "--config", "printed.yaml", "--trainer.max_epochs=1"])
    assert cli.trainer.log_dir == "runs/tiny-dim=3/version_0"
