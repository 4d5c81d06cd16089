"""`hypermem train --config wordnet_encoder` as a user of the installed wheel meets it: without
matplotlib (the viz extra) the run finishes with one note instead of the disk picture, and
Lightning's "modules in eval mode" warning does not come with every run (a tiny model built in
the test; the encoder CLI's own tests are in test_train_encoder.py)."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("lightning")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.cli.main import main as hypermem_main  # noqa: E402
from hypermem.train import hierarchy_logging  # noqa: E402

torch.set_num_threads(1)

NOTE = ("note: matplotlib is not installed, so TensorBoard gets no Poincaré-disk picture "
        "(pip install 'hypermem-torch[viz]')")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The user's files of the walk: edges.tsv (child, parent) and names.tsv (id, text)."""
    root = tmp_path_factory.mktemp("enc-walk")
    files = {"edges.tsv": EDGES, "names.tsv": sorted((k, f"a {v}") for k, v in NAMES.items())}
    for name, rows in files.items():
        (root / name).write_text("".join(f"{a}\t{b}\n" for a, b in rows))
    return root, tiny_model_folder(root / "m")


def _train(root, model, name, *extra) -> int:
    """``hypermem train --config wordnet_encoder ...`` on the tiny model, 2 epochs."""
    return hypermem_main([
        "train", "--config", "wordnet_encoder", f"--model.base={model}", "--model.lr=0.002",
        "--data.hierarchy=files", f"--data.edges={root / 'edges.tsv'}", f"--data.names={root / 'names.tsv'}",
        "--data.task=none", "--data.batch_size=8",
        "--trainer.max_epochs=2", "--trainer.enable_progress_bar=false",
        f"--trainer.logger.init_args.save_dir={root / 'runs'}", f"--trainer.logger.init_args.name={name}", *extra])


def _tags(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run))
    ea.Reload()
    return ea.Tags()


def test_without_matplotlib_the_run_finishes_with_one_note(setup, monkeypatch, capsys):
    root, model = setup
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # `import matplotlib` fails, as in a bare install
    monkeypatch.setattr(hierarchy_logging, "_NOTED", set())    # the note is once per process
    assert _train(root, model, "bare") == 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "matplotlib" in line] == [NOTE], err[-2000:]
    run = root / "runs" / "bare" / "version_0"
    assert (run / "encoder" / "hypermem_encoder.json").is_file()
    tags = _tags(run)
    assert "embedding/disk" not in tags["images"]
    assert any(t.startswith("embedding/norm_depth_") for t in tags["histograms"])   # the rest still logs


def test_with_matplotlib_the_picture_logs_and_no_eval_mode_warning(setup):
    pytest.importorskip("matplotlib")
    root, model = setup
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _train(root, model, "viz", "--model.frozen_layers=1") == 0
    texts = [str(w.message) for w in caught]
    assert not [t for t in texts if "in eval mode at the start of training" in t], texts
    assert "embedding/disk" in _tags(root / "runs" / "viz" / "version_0")["images"]


def test_other_warnings_of_the_fit_still_show(setup):
    # the eval-mode warning is gone because the module trains in train mode, not by a filter:
    # a warning the module raises itself during the fit still reaches the user
    from hypermem.train.encoder_module import EncoderModule

    root, model = setup
    original = EncoderModule.on_fit_start

    def warn_then_start(self):
        warnings.warn("a warning of the fit", UserWarning, stacklevel=1)
        original(self)

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mp.setattr(EncoderModule, "on_fit_start", warn_then_start)
        assert _train(root, model, "warn") == 0
    assert "a warning of the fit" in [str(w.message) for w in caught]


@pytest.mark.parametrize("given", ["--model.seed=3", "--seed_everything=3"])
def test_a_seed_given_once_reaches_the_encoder_and_its_data(setup, given):
    import yaml

    root, model = setup   # --model.seed=3 alone was "Error while merging hparams" after a 31-line traceback
    assert _train(root, model, f"seed{given[2]}", given, "--trainer.max_epochs=1", "--model.log_images=false") == 0
    config = yaml.safe_load((root / "runs" / f"seed{given[2]}" / "version_0" / "config.yaml").read_text())
    assert config["model"]["seed"] == config["data"]["seed"] == config["seed_everything"] == 3
