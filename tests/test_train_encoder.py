"""`hypermem train --config wordnet_encoder` on a user's own files: TensorBoard, the exported
encoder, exact resume (LightningCLI, a tiny model built in the test)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("lightning")

from encoder_helpers import EDGES, tiny_model_folder  # noqa: E402

from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.train.config_kind import is_encoder_config  # noqa: E402
from hypermem.train.hierarchy_cli import main  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("enc-cli")
    model = tiny_model_folder(root / "m")
    (root / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    return root, model


def _args(root, model, name, epochs, *extra):
    return ["fit", "--config", "wordnet_encoder", f"--model.base={model}", "--model.lr=0.002",
            "--data.hierarchy=files", f"--data.edges={root / 'edges.tsv'}", "--data.task=none",
            "--data.batch_size=8", f"--trainer.max_epochs={epochs}", "--trainer.val_check_interval=1.0",
            "--trainer.log_every_n_steps=1", f"--trainer.logger.init_args.save_dir={root / 'runs'}",
            f"--trainer.logger.init_args.name={name}", "--model.schedule_steps=8", *extra]


def test_the_config_is_recognised():
    from hypermem.configs import config_path

    assert is_encoder_config(["--config", str(config_path("wordnet_encoder"))])
    assert not is_encoder_config(["--config", str(config_path("mammals_poincare"))])


@pytest.fixture(scope="module")
def straight(setup):
    root, model = setup
    main(_args(root, model, "one", 2))
    return root / "runs" / "one" / "version_0"


def test_a_run_logs_to_tensorboard_and_exports_the_best_encoder(straight):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = straight
    assert (run / "encoder" / "hypermem_encoder.json").is_file()
    assert list((run / "checkpoints").glob("best-step=*.ckpt"))
    ea = EventAccumulator(str(run))
    ea.Reload()
    for tag in ("train/loss", "train/clustering", "train/centripetal", "train/lr", "val/f1", "val/f1_hard", "val/mrr"):
        assert tag in ea.Tags()["scalars"], tag
    assert "embedding/disk" in ea.Tags()["images"]
    assert any(t.startswith("embedding/norm_depth_") for t in ea.Tags()["histograms"])
    steps = [e.step for e in ea.Scalars("train/loss")]
    assert steps == sorted(steps) and len(steps) == len(set(steps))     # one step axis
    enc = HierarchyEncoder.load(run / "encoder")
    # the exported weights are the best checkpoint's, read back with torch.load(weights_only=True)
    best = torch.load(next((run / "checkpoints").glob("best-step=*.ckpt")), map_location="cpu", weights_only=True)
    for k, v in enc.model.state_dict().items():
        torch.testing.assert_close(v, best["state_dict"]["model." + k], rtol=0, atol=0, msg=k)
    assert enc.metrics["val_f1"] == best["hypermem_encoder_best"]["f1"]
    # the threshold and metrics are those of the exported weights' own validation
    assert best["hypermem_encoder_validation"]["step"] == best["global_step"] == enc.metrics["val_step"]
    assert enc.threshold == best["hypermem_encoder_validation"]["threshold"]
    assert enc.threshold is not None and enc.metrics["val_f1"] == pytest.approx(max(e.value for e in ea.Scalars("val/f1")), rel=1e-6)


def test_resume_equals_the_uninterrupted_run(setup, straight, capsys):
    root, model = setup
    main(_args(root, model, "parts", 1))
    main(_args(root, model, "parts", 2, "--ckpt_path=last"))
    assert "encoder: " in capsys.readouterr().out
    a = torch.load(straight / "checkpoints" / "last.ckpt", weights_only=True)
    b = torch.load(root / "runs" / "parts" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)
    assert a["global_step"] == b["global_step"]
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, rtol=0, atol=0, msg=k)


def test_frozen_layers_from_yaml_train_the_upper_layer_and_resume_exactly(setup):
    root, model = setup
    frozen = ("--model.frozen_layers=1",)
    main(_args(root, model, "frozen", 2, *frozen))
    main(_args(root, model, "frozen-parts", 1, *frozen))
    main(_args(root, model, "frozen-parts", 2, *frozen, "--ckpt_path=last"))
    a = torch.load(root / "runs" / "frozen" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)
    b = torch.load(root / "runs" / "frozen-parts" / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)
    assert a["global_step"] == b["global_step"] > 0
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, rtol=0, atol=0, msg=k)
    base = HierarchyEncoder.from_pretrained(str(model)).model.state_dict()
    for k, v in base.items():
        trained = a["state_dict"]["model." + k]
        if "embeddings" in k or ".layer.0." in k:
            torch.testing.assert_close(trained, v, rtol=0, atol=0, msg=k)     # frozen
    assert any(not torch.equal(a["state_dict"]["model." + k], v) for k in base if ".layer.1." in k)


def test_a_small_head_from_yaml_trains_and_exports(setup):
    # --model.dim adds the tanh head: the exported encoder has points of that many coordinates;
    # --model.depth turns on the depth term, logged with the others
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root, model = setup
    main(_args(root, model, "small", 1, "--model.dim=4", "--model.frozen_layers=1", "--model.depth=0.5"))
    run = root / "runs" / "small" / "version_0"
    ea = EventAccumulator(str(run))
    ea.Reload()
    assert any(e.value > 0 for e in ea.Scalars("train/depth"))
    enc = HierarchyEncoder.load(run / "encoder")
    assert enc.dim == 4 and enc.curvature == pytest.approx(0.25)
    assert enc.encode(["dog", "animal"]).shape == (2, 4)
    a = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    head = [k for k in a["state_dict"] if "linear" in k]
    assert head and a["state_dict"][head[0]].shape[0] == 4


def test_the_data_section_refuses_a_text_it_cannot_give():
    from hypermem.train.encoder_data import EncoderDataModule

    assert EncoderDataModule(text="definition").hparams.text == "definition"
    with pytest.raises(ValueError, match="data.text must be one of"):
        EncoderDataModule(text="gloss")
    with pytest.raises(ValueError, match="applies to hierarchy: wordnet"):
        EncoderDataModule(hierarchy="files", edges="e.tsv", text="definition")
