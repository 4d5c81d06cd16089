"""The keys both modules take (``seed``, ``burn_in``) and ``seed_everything`` are one setting of
the run: given once, on the command line or in a config, they reach the model and the data."""

import os
from pathlib import Path

import pytest
import torch
from train_helpers import CONFIG, EDGES

pytest.importorskip("lightning")


def _train(tmp: Path, *argv: str, run: bool = True):
    from hypermem.train.hierarchy_cli import main

    (tmp / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    (tmp / "tiny.yaml").write_text(CONFIG)  # like the shipped configs: seed_everything, both burn_in keys
    old = os.getcwd()
    os.chdir(tmp)
    try:
        return main([*(["fit"] if run else []), "--config", "tiny.yaml", "--trainer.max_epochs=3", *argv], run=run)
    finally:
        os.chdir(old)


def _weights(cli) -> torch.Tensor:
    return cli.model.embedding.weight.detach().clone()


def test_a_seed_given_once_seeds_the_model_the_data_and_lightning(tmp_path):
    seven = _train(tmp_path, "--model.seed=7")  # was: "Error while merging hparams" and a 31-line traceback
    assert seven.model.hparams.seed == seven.datamodule.seed == seven.config.fit.seed_everything == 7
    assert Path(seven.trainer.log_dir) == Path("runs/tiny-seed=7/version_0")
    for other in ("--data.seed=7", "--seed_everything=7"):
        again = _train(tmp_path, other)
        assert again.model.hparams.seed == again.datamodule.seed == 7
        assert torch.equal(_weights(again), _weights(seven)), other
    # seed_everything is the usual seed-sweep knob: it changes the run (it used to be ignored)
    zero, one = _train(tmp_path), _train(tmp_path, "--seed_everything=1")
    assert not torch.equal(_weights(zero), _weights(one)) and not torch.equal(_weights(zero), _weights(seven))
    assert Path(one.trainer.log_dir).parent.name == "tiny-seed=1"


def test_a_burn_in_given_once_reaches_both_modules(tmp_path):
    for given in ("--model.burn_in=2", "--data.burn_in=2"):
        cli = _train(tmp_path, given)
        assert cli.model.hparams.burn_in == cli.datamodule.burn_in == 2
        assert Path(cli.trainer.log_dir).parent.name == "tiny-burn_in=2"


def test_the_last_place_that_sets_a_shared_key_decides(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("model: {seed: 3, burn_in: 2}\ndata: {burn_in: 2}\n")
    cli = _train(tmp_path, "--seed_everything=5", "--config", str(mine), run=False)
    assert cli.model.hparams.seed == cli.datamodule.seed == cli.config.seed_everything == 3
    assert cli.model.hparams.burn_in == cli.datamodule.burn_in == 2
    cli = _train(tmp_path, "--config", str(mine), "--data.seed=4", run=False)
    assert cli.model.hparams.seed == cli.datamodule.seed == cli.config.seed_everything == 4
    off = _train(tmp_path, "--seed_everything=false", "--data.seed=6", run=False)
    assert off.model.hparams.seed == off.datamodule.seed == 6 and off.config.seed_everything is False


@pytest.mark.parametrize("argv, said", [(["--model.seed=1", "--data.seed=2"], "data.seed=2 and model.seed=1 differ"),
                                        (["--seed_everything=1", "--model.seed=2"], "model.seed=2 and seed_everything=1"),
                                        (["--model.burn_in=1", "--data.burn_in=2"], "data.burn_in=2 and model.burn_in=1")])
def test_two_values_in_one_place_are_one_error_line(tmp_path, capsys, argv, said):
    with pytest.raises(SystemExit) as exc:
        _train(tmp_path, *argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "give one of them" in err[0], err
    assert not (tmp_path / "runs").exists()
