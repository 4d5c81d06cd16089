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
         "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
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
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("train")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli = _run_cli(tmp, "--model.dim=5", "--trainer.logger.init_args.name=quick")
    cli.hypermem_stdout = buf.getvalue()
    return tmp, cli


def _events(logdir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"images": 0, "scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def test_tensorboard_has_one_step_axis_hp_metric_images_histograms_and_projectors(trained):
    tmp, cli = trained
    logdir = tmp / cli.trainer.logger.log_dir
    assert logdir.is_relative_to(tmp / "runs" / "quick") and logdir.is_dir()
    acc = _events(logdir)
    tags = acc.Tags()
    for tag in ("train/loss_step", "train/loss_epoch", "train/lr", "val/map", "val/mean_rank", "hp_metric"):
        assert tag in tags["scalars"], tags["scalars"]
    # 2 epochs of 5 optimizer steps (batches_per_step=1): every value sits on the optimizer-step axis
    assert [e.step for e in acc.Scalars("train/loss_step")] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert [e.step for e in acc.Scalars("train/lr")] == list(range(1, 11))
    assert [e.step for e in acc.Scalars("train/loss_epoch")] == [5, 10]
    maps = acc.Scalars("val/map")
    assert [e.step for e in maps] == [5, 10] and all(0.0 <= e.value <= 1.0 for e in maps)
    assert [e.step for e in acc.Images("embedding/disk")] == [5, 10]
    for hist in ("embedding/norm", "embedding/depth"):
        events = acc.Histograms(hist)
        assert [e.step for e in events] == [5, 10]
        assert events[-1].histogram_value.num == 1180
    depth = acc.Histograms("embedding/depth")[-1].histogram_value
    assert 0 < depth.min <= depth.max < 20  # hyperbolic distances to the origin, not norms
    (hp,) = acc.Scalars("hp_metric")
    assert hp.step == 10 and hp.value == pytest.approx(maps[-1].value)  # the real final metric, not -1
    ckpt_steps = {int(p.stem.split("step=")[1]) for p in logdir.glob("checkpoints/best-*.ckpt")}
    assert ckpt_steps <= {5, 10} and ckpt_steps
    projector = (logdir / "projector_config.pbtxt").read_text()
    assert projector.count("embeddings {") == 2  # one per validation
    assert sorted(p.parent.name for p in logdir.rglob("metadata.tsv")) == ["hierarchy", "hierarchy"]
    assert {p.parent.parent.name for p in logdir.rglob("metadata.tsv")} == {"00005", "00010"}
    meta = next(logdir.rglob("metadata.tsv")).read_text().splitlines()
    assert meta[0] == "name\tgloss" and len(meta) == 1181 and any(line.startswith("dog.n.01\t") for line in meta)


def test_run_prints_final_metrics_checkpoints_and_log_folder(trained):
    tmp, cli = trained
    out = cli.hypermem_stdout
    assert "final metrics (epoch 2, step 10): val/map" in out
    best = cli.trainer.checkpoint_callbacks[1].best_model_path
    assert f"best checkpoint: {best}" in out and "best-epoch=" in best
    assert f"last checkpoint: {cli.trainer.log_dir}/checkpoints/last.ckpt" in out
    assert f"logs: {cli.trainer.log_dir}" in out
    # no progress bar without a terminal: one short line per epoch instead
    assert "\r" not in out and out.count("\nepoch ") + out.startswith("epoch ") == 2


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
