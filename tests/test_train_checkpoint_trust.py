"""A received checkpoint never decides the run's settings: ``hypermem train --ckpt_path=FILE``
takes no ``hyper_parameters`` from it (LightningCLI would merge them over the user's config, and
``init_from=<a pickle beside it>, init_from_trusted=True`` ran the pickle's code)."""

import warnings
from pathlib import Path

import pytest
import torch
from train_helpers import train_tiny

pytest.importorskip("lightning")

CONES = ("--model.kind=cones", "--model.init_epochs=2", "--data.negatives_kind=both_ends")


class _RunsCode:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.fixture(scope="module")
def received(tmp_path_factory):
    """A cone run's ``last.ckpt`` whose hyper_parameters were changed by a sender: ``init_from`` a
    pickle shipped beside it that touches ``marker`` when unpickled, ``init_from_trusted=True``."""
    tmp = tmp_path_factory.mktemp("sender")
    cli = train_tiny(tmp, *CONES, "--trainer.max_epochs=1", "--trainer.logger.init_args.name=sent")
    state = torch.load(tmp / cli.trainer.log_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    marker, init = tmp / "MARKER", tmp / "init.pt"
    torch.save({"state_dict": _RunsCode(marker)}, init)

    def craft(name: str, **hparams) -> Path:
        crafted = {**state, "hyper_parameters": {**state["hyper_parameters"], "init_from": str(init),
                                                 "init_from_trusted": True, **hparams}}
        torch.save(crafted, tmp / name)
        return tmp / name

    return tmp, marker, craft


def test_init_from_and_its_trust_never_come_from_the_checkpoint(received, tmp_path):
    tmp, marker, craft = received
    ckpt = craft("trusting.ckpt")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cli = train_tiny(tmp_path, *CONES, "--trainer.max_epochs=2", f"--ckpt_path={ckpt}")
    assert not [w for w in seen if "--ckpt_path" in str(w.message)]  # init_from* differ, and are not even listed
    assert not marker.exists()  # nothing was unpickled from init.pt
    assert cli.model.hparams.init_from is None and cli.model.hparams.init_from_trusted is False
    assert cli.trainer.current_epoch == 2  # resumed from epoch 1


def test_a_checkpoint_of_another_model_is_refused_in_one_line(received, tmp_path, capsys):
    tmp, marker, craft = received
    ckpt = craft("poincare.ckpt", kind="poincare", dim=3)  # the repro's kind swap, on the user's cone run
    with pytest.raises(SystemExit) as exc:
        train_tiny(tmp_path, *CONES, "--trainer.max_epochs=2", f"--ckpt_path={ckpt}")
    assert exc.value.code == 2 and not marker.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds another model than this run's" in err[0]
    assert "kind='poincare' (this run: 'cones')" in err[0] and "dim=3 (this run: 2)" in err[0]
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.ckpt"))


def test_other_settings_of_the_checkpoint_are_listed_and_the_run_keeps_its_own(received, tmp_path):
    tmp, marker, craft = received
    ckpt = craft("lr.ckpt", lr=0.05)
    with pytest.warns(UserWarning, match=r"trained with lr=0.05 \(this run: 0.3\); this run uses its own values"):
        cli = train_tiny(tmp_path, *CONES, "--trainer.max_epochs=2", f"--ckpt_path={ckpt}")
    assert cli.model.hparams.lr == 0.3 and not marker.exists()


def test_the_encoder_keys_that_make_another_model_are_refused(tmp_path):
    from hypermem.train.checkpoint_hparams import compare_checkpoint_hparams

    path = tmp_path / "enc.ckpt"
    torch.save({"hyper_parameters": {"base": "a", "geometry": "poincare", "dim": None, "lr": 1e-3}}, path)
    run = {"base": "a", "geometry": "poincare", "dim": None, "lr": 1e-3}
    assert compare_checkpoint_hparams(path, run, "EncoderModule") is None
    with pytest.raises(ValueError, match="geometry='poincare' \\(this run: 'euclidean'\\)"):
        compare_checkpoint_hparams(path, {**run, "geometry": "euclidean"}, "EncoderModule")
    assert "lr=0.001" in compare_checkpoint_hparams(path, {**run, "lr": 2e-3}, "EncoderModule")
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    assert compare_checkpoint_hparams(tmp_path / "junk.ckpt", run, "EncoderModule") is None
