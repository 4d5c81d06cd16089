"""`hypermem train --help` (and `train fit --help`) names the configs shipped in the package, which
`--config NAME` takes by name (walk 75): read from the installed package's folder, not a list."""

from __future__ import annotations

import pytest

pytest.importorskip("lightning")

from hypermem import configs  # noqa: E402
from hypermem.cli.main import main  # noqa: E402


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main(["train", *argv])
    assert exc.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv", [["--help"], ["fit", "--help"]], ids=["train", "train-fit"])
def test_train_help_lists_every_shipped_config(capsys, argv):
    text = _help(capsys, *argv)
    names = configs.available()
    assert "wordnet_encoder" in names and "mammals_poincare" in names
    for name in names:
        assert name in text, name
    assert "--config NAME" in text   # how to pass one


def test_the_list_is_the_package_folder(capsys, monkeypatch, tmp_path):
    (tmp_path / "tiny_walk75.yaml").write_text("# A tiny test config, dim 2.\nseed_everything: 0\n")
    monkeypatch.setattr(configs, "CONFIG_DIR", tmp_path)
    text = _help(capsys, "--help")
    assert "tiny_walk75" in text and "A tiny test config" in text and "wordnet_encoder" not in text
