"""The Lightning loop for hierarchy embeddings: CLI + YAML, TensorBoard, checkpoints, DDP."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("lightning")

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "mammals_poincare.yaml")
QUICK = ["--trainer.max_epochs=2", "--trainer.limit_train_batches=5", "--trainer.check_val_every_n_epoch=1",
         "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false", "--trainer.log_every_n_steps=1",
         "--model.burn_in=1", "--data.burn_in=1", "--data.batch_size=64", "--data.negatives=10",
         "--data.batches_per_step=1"]


def _run_cli(tmp: Path, *extra: str):
    from hypermem.train.hierarchy_cli import main

    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        return main(["fit", "--config", CONFIG, *QUICK, *extra])
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    cli = _run_cli(tmp, "--model.dim=5", "--trainer.logger.init_args.name=quick")
    return tmp, cli


def _events(logdir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_tensorboard_has_loss_lr_map_image_and_projector(trained):
    tmp, cli = trained
    logdir = tmp / cli.trainer.logger.log_dir
    assert logdir.is_relative_to(tmp / "runs" / "quick") and logdir.is_dir()
    acc = _events(logdir)
    tags = acc.Tags()
    for tag in ("train/loss_step", "train/loss_epoch", "val/map", "val/mean_rank"):
        assert tag in tags["scalars"], tags["scalars"]
    assert any(t.startswith("lr-") for t in tags["scalars"]), tags["scalars"]
    maps = [e.value for e in acc.Scalars("val/map")]
    assert len(maps) == 2 and all(0.0 <= m <= 1.0 for m in maps)
    assert "embedding/disk" in tags["images"]
    assert (logdir / "projector_config.pbtxt").is_file()
    meta = next(logdir.rglob("metadata.tsv")).read_text().splitlines()
    assert meta[0] == "name\tgloss" and len(meta) == 1181 and any(line.startswith("dog.n.01\t") for line in meta)


def test_config_values_and_overrides(trained):
    _, cli = trained
    model, data = cli.model, cli.datamodule
    assert model.hparams.kind == "poincare" and model.hparams.dim == 5  # overridden on the command line
    assert model.hparams.lr == pytest.approx(0.3)  # from the YAML file
    assert data.negatives == 10 and data.dataset == "mammals"
    assert model.embedding.weight.shape == (1180, 5)
    assert isinstance(cli.trainer.optimizers[0], __import__("geoopt").optim.RiemannianSGD)
    pts = model.points_dict()
    assert len(pts) == 1180 and all(float(p.norm()) < 1 for p in pts.values())


def test_parse_only_without_running(tmp_path):
    from hypermem.train.hierarchy_cli import main

    cli = main(["--config", CONFIG, "--model.kind=euclidean", "--data.batch_size=7"], run=False)
    assert cli.config.model.kind == "euclidean" and cli.config.data.batch_size == 7
    assert cli.config.trainer.max_epochs == 200


def test_checkpoint_resume(trained, tmp_path):
    tmp, cli = trained
    ckpt = tmp / cli.trainer.checkpoint_callback.dirpath / "last.ckpt"
    assert ckpt.is_file()
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["epoch"] == 1 and "embedding.weight" in state["state_dict"]
    again = _run_cli(tmp, "--model.dim=5", "--trainer.max_epochs=3", f"--ckpt_path={ckpt}",
                     "--trainer.logger.init_args.name=resumed")
    assert again.trainer.current_epoch == 3
    assert again.trainer.global_step == state["global_step"] + 5
    out = tmp_path / "emb.pt"
    again.model.save_embedding(str(out))
    saved = torch.load(out)
    assert saved["points"].shape == (1180, 5) and saved["nodes"][0] == again.model.nodes[0]


def test_closed_form_steps_equal_geoopt_rsgd_and_count_every_batch(tmp_path, monkeypatch):
    """Grouped batches (batches_per_step=3) with the autograd-free step give the weights of
    geoopt's RiemannianSGD taking the same steps through autograd, and every batch counts
    as one optimizer step."""
    from hypermem.train.hierarchy_module import HierarchyModule

    extra = ("--model.dim=5", "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.logger=false",
             "--trainer.enable_checkpointing=false", "--trainer.callbacks=null", "--data.batches_per_step=3",
             "--model.log_images=false", "--model.log_projector=false")
    fused = _run_cli(tmp_path, *extra)
    assert fused.model.uses_closed_form_step()
    monkeypatch.setattr(HierarchyModule, "uses_closed_form_step", lambda self: False)
    plain = _run_cli(tmp_path, *extra)
    assert fused.trainer.global_step == plain.trainer.global_step == 6
    a, b = fused.model.embedding.weight.detach(), plain.model.embedding.weight.detach()
    assert not torch.equal(a, torch.zeros_like(a)) and float((a - b).abs().max()) < 1e-10


def test_cones_with_link_split(tmp_path):
    cfg = str(ROOT / "configs" / "mammals_cones.yaml")
    from hypermem.train.hierarchy_cli import main

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        cli = main(["fit", "--config", cfg, "--trainer.max_epochs=1", "--trainer.limit_train_batches=3",
                    "--trainer.check_val_every_n_epoch=1", "--trainer.enable_progress_bar=false",
                    "--model.init_epochs=2", "--model.log_projector=false", "--trainer.enable_model_summary=false",
                    "--trainer.log_every_n_steps=1"])
    finally:
        os.chdir(cwd)
    metrics = cli.trainer.callback_metrics
    assert 0.0 <= float(metrics["val/f1"]) <= 1.0 and 0.0 <= float(metrics["test/f1"]) <= 1.0
    assert cli.datamodule.split is not None and len(cli.datamodule.train_relations) < 6540


def test_hypermem_train_subcommand_forwards(tmp_path):
    from hypermem.cli import build_parser

    args = build_parser().parse_args(["train", "--config", CONFIG, "--model.dim=2"])
    assert args.command == "train" and args.args == ["--config", CONFIG, "--model.dim=2"]


@pytest.mark.slow
def test_ddp_on_two_cpu_processes(tmp_path):
    cmd = [sys.executable, "-m", "hypermem.train", "fit", "--config", CONFIG, *QUICK,
           "--trainer.max_epochs=1", "--trainer.strategy=ddp", "--trainer.accelerator=cpu", "--trainer.devices=2",
           "--model.log_projector=false", "--model.log_images=false", "--trainer.logger.init_args.name=ddp"]
    env = dict(os.environ, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ckpt = next((tmp_path / "runs" / "ddp").rglob("last.ckpt"))
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    # each of the two processes ran limit_train_batches=5 steps on its shard: 5 global steps
    assert state["global_step"] == 5
    assert torch.isfinite(state["state_dict"]["embedding.weight"]).all()
