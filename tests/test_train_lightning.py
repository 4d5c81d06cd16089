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


def test_the_tags_the_docs_name_are_the_tags_tensorboard_shows(trained):
    """Every `train/...`, `val/...`, `embedding/...` tag named in docs/training.md and the README's
    training section is a tag of the run's events file (the docs said `train/loss`, which
    TensorBoard never shows: Lightning writes `train/loss_step` and `train/loss_epoch`)."""
    import re

    tmp, cli = trained
    acc = _events(tmp / cli.trainer.logger.log_dir)
    shown = {t for kind in ("scalars", "images", "histograms") for t in acc.Tags()[kind]}
    docs = (ROOT / "docs" / "training.md").read_text() + (ROOT / "README.md").read_text()
    named = set(re.findall(r"`((?:train|val|test|embedding)/[a-z_]+)`", docs))
    optional = {"val/f1", "test/f1"}  # with a link-prediction split only
    assert {"train/loss_step", "val/map", "embedding/disk"} <= named
    assert named - optional <= shown, named - shown


def test_run_prints_final_metrics_checkpoints_and_log_folder(trained):
    tmp, cli = trained
    out = cli.hypermem_stdout
    assert "final metrics (epoch 2, step 10): val/map" in out
    best = next(cb for cb in cli.trainer.checkpoint_callbacks if cb.monitor == "val/map").best_model_path
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
    """One two-process run: stopped by ``max_steps`` inside its first epoch, long before the
    next validation, it still validates at the end and offers that to the best checkpoint
    (walk 63), prints its summary once (rank 0) and no ``sync_dist`` advice."""
    cmd = [sys.executable, "-m", "hypermem.train", "fit", "--config", CONFIG, *QUICK,
           "--trainer.max_epochs=20", "--trainer.check_val_every_n_epoch=10", "--trainer.max_steps=3",
           "--trainer.strategy=ddp", "--trainer.accelerator=cpu", "--trainer.devices=2",
           "--model.log_projector=false", "--model.log_images=false", "--trainer.logger.init_args.name=ddp"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "sync_dist" not in proc.stderr, proc.stderr  # was: five "It is recommended to use ..." warnings
    ckpt = next((tmp_path / "runs" / "ddp").rglob("last.ckpt"))
    state = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert state["global_step"] == 3
    assert torch.isfinite(state["state_dict"]["embedding.weight"]).all()
    assert proc.stdout.count("final metrics (") == 1 and "step 3)" in proc.stdout  # printed once, by rank 0
    assert "logs: runs/ddp/version_0" in proc.stdout
    best = sorted((tmp_path / "runs" / "ddp").glob("version_0/checkpoints/best-*.ckpt"))
    assert len(best) == 1 and best[0].name.endswith("-step=3.ckpt"), best
    assert torch.load(best[0], map_location="cpu", weights_only=True)["global_step"] == 3
    assert "best checkpoint: " in proc.stdout and "step=3.ckpt" in proc.stdout



def test_lightnings_sync_dist_advice_is_quiet_for_the_values_logged_once():
    import warnings

    from lightning.fabric.utilities.rank_zero import rank_zero_warn
    from lightning.fabric.utilities.warnings import PossibleUserWarning

    from hypermem.train.hierarchy_cli import _quiet

    with warnings.catch_warnings(record=True) as caught:
        _quiet()
        for name in ("step", "epoch", "val/map", "val/mean_rank", "val/f1", "test/f1", "train/other"):
            rank_zero_warn(f"It is recommended to use `self.log({name!r}, ..., sync_dist=True)` when logging on epoch "
                           "level in distributed setting to accumulate the metric across devices.",
                           category=PossibleUserWarning)
    assert [str(w.message).split("'")[1] for w in caught] == ["train/other"]


@pytest.mark.parametrize("typo, near", [("--model.dimm=3", "--model.dim"), ("--data.negativs=5", "--data.negatives"),
                                        ("--trainer.max_epocs=5", "--trainer.max_epochs")])
def test_config_typo_prints_at_most_five_lines_with_the_nearest_key_and_a_working_tip(capsys, typo, near):
    from hypermem.train.hierarchy_cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", CONFIG, typo])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == ""
    assert len(lines) == 3, captured.err  # the error, the nearest key, the tip (the issue allows 5)
    assert lines[0].startswith("error:") and typo.split("=")[0] in lines[0]
    assert f"did you mean {near}?" in captured.err
    tip = next(line for line in lines if line.startswith("tip:"))
    assert "`python -m hypermem.train fit --help`" in tip
    with pytest.raises(SystemExit) as helped:  # the tip works
        main(["fit", "--help"])
    assert helped.value.code == 0 and near in capsys.readouterr().out


def test_bad_value_is_one_error_line(capsys):
    from hypermem.train.hierarchy_cli import main

    with pytest.raises(SystemExit):
        main(["fit", "--config", CONFIG, "--model.dim=abc"], prog="hypermem train")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "model.dim" in lines[0] and "abc" in lines[0]
    assert lines[1] == "tip: `hypermem train fit --help` lists every option"


def test_run_name_follows_the_config_and_the_overrides():
    from hypermem.train.hierarchy_cli import main, run_name

    assert run_name(["fit", "--config", "/x/mammals_poincare.yaml", "--model.dim=5", "--trainer.max_epochs=3"]) \
        == "mammals_poincare-dim=5"
    assert run_name(["--config=a/b.yaml", "--data.dataset", "wordnet:dog.n.01", "--model.kind", "cones"]) \
        == "b-data.dataset=wordnet_dog.n.01-kind=cones"
    cli = main(["--config", CONFIG, "--model.dim=5"], run=False)
    assert cli.trainer.logger.name == "mammals_poincare-dim=5"  # not the YAML's dim 10
    named = main(["--config", CONFIG, "--model.dim=5", "--trainer.logger.init_args.name=mine"], run=False)
    assert named.trainer.logger.name == "mine"


def test_shipped_config_off_a_terminal_is_quiet_and_warns_about_a_long_burn_in(tmp_path):
    """One epoch of the shipped config with stdout piped: no progress-bar bytes, no
    log_every_n_steps warning, a burn-in warning (20 epochs of burn-in > 1 epoch)."""
    cmd = [sys.executable, "-m", "hypermem.train", "fit", "--config", "mammals_poincare", "--trainer.max_epochs=1",
           "--model.log_projector=false"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\r" not in proc.stdout and "\r" not in proc.stderr
    assert len(proc.stdout) + len(proc.stderr) < 6000, proc.stdout + proc.stderr
    assert "log_every_n_steps" not in proc.stderr
    assert "the burn-in lasts 20 epochs" in proc.stderr and "--model.burn_in" in proc.stderr
    assert "epoch 1/1  step 103" in proc.stdout and "last checkpoint: runs/mammals_poincare-log_projector=false/version_0/" in proc.stdout


def test_init_from_loads_weights_only_unless_trusted(trained, tmp_path):
    from hypermem.train.hierarchy_module import load_init_weights

    tmp, cli = trained
    ckpt = tmp / cli.trainer.log_dir / "checkpoints" / "last.ckpt"
    w = load_init_weights(str(ckpt))
    assert torch.equal(w, cli.model.embedding.weight.detach().cpu())
    marker = tmp_path / "ran"
    bad = tmp_path / "crafted.ckpt"
    torch.save({"state_dict": {"embedding.weight": torch.zeros(3, 2)}, "x": _RunsCode(str(marker))}, bad)
    with pytest.raises(ValueError, match="init_from_trusted"):
        load_init_weights(str(bad))
    assert not marker.exists()  # nothing ran
    with pytest.raises(ValueError, match="not a checkpoint of HierarchyModule"):
        torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
        load_init_weights(str(tmp_path / "other.pt"))
    with pytest.raises(FileNotFoundError, match="init_from"):
        load_init_weights(str(tmp_path / "missing.ckpt"))
    assert load_init_weights(str(bad), trusted=True).shape == (3, 2) and marker.exists()


class _RunsCode:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("kind", ["poincare", "cones"])
def test_bf16_mixed_precision_leaves_the_embedding_math_in_its_dtype(tmp_path, kind):
    """Under precision=bf16-mixed the loss runs with autocast off: the same weights as in
    full precision (Riemannian Adam through autograd, and the cone loss)."""
    extra = ["--model.dim=5", "--trainer.max_epochs=1", "--trainer.limit_train_batches=3", "--trainer.logger=false",
             "--trainer.enable_checkpointing=false", "--trainer.callbacks=null", "--model.optimizer=radam",
             "--model.log_images=false", "--model.log_projector=false", "--trainer.limit_val_batches=0",
             "--model.dtype=float32"]  # float32: what autocast would cast to bf16 (float64 it leaves alone)
    if kind == "cones":
        extra += ["--model.kind=cones", "--model.init_epochs=1", "--data.negatives_kind=both_ends"]
    full = _run_cli(tmp_path, *extra)
    half = _run_cli(tmp_path, *extra, "--trainer.precision=bf16-mixed")
    assert half.trainer.precision == "bf16-mixed"
    a, b = full.model.embedding.weight.detach(), half.model.embedding.weight.detach()
    assert b.dtype == torch.float32 and torch.equal(a, b)


def test_unknown_config_name_lists_the_shipped_configs(capsys):
    from hypermem.train.hierarchy_cli import main

    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", "mammals_poincaree"])
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and "does not exist" in lines[0]
    assert "mammals_poincare," in lines[1] and "mammals_cones" in lines[1]


@pytest.mark.parametrize("run", [True, False])
def test_a_prefix_of_an_option_is_refused_with_did_you_mean(capsys, run):
    from hypermem.train.hierarchy_cli import main

    with pytest.raises(SystemExit) as exc:  # argparse's prefix matching took this as max_epochs
        main(["--config", CONFIG, "--trainer.max_epoch=5"], run=run)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "did you mean --trainer.max_epochs?" in err and "--trainer.max_epoch is not an option" in err


@pytest.mark.parametrize("yaml_text, bad, near", [("model:\n  dimm: 5\n", "model.dimm", "model.dim"),
                                                   ("trainer:\n  max_epoch: 5\n", "trainer.max_epoch",
                                                    "trainer.max_epochs"),
                                                   ("modle:\n  dim: 5\n", "modle.dim", "model.dim")])
@pytest.mark.parametrize("run", [True, False])
def test_a_yaml_key_typo_names_the_file_and_the_nearest_key(capsys, tmp_path, yaml_text, bad, near, run):
    from hypermem.train.hierarchy_cli import main

    cfg = tmp_path / "mine.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(SystemExit) as exc:
        main(["--config", CONFIG, "--config", str(cfg)], run=run)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3, lines
    assert lines[1] == f"did you mean {near}?  ({bad} in {cfg} is not an option)"
