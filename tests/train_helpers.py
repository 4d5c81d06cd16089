"""Helpers of the Lightning CLI tests: run ``hypermem.train`` in a folder, read its scalars."""

import os
from pathlib import Path

# a 7-node tree (hyponym, hypernym) and a tiny config over it, as a user writes them
EDGES = [("b", "a"), ("c", "a"), ("d", "b"), ("e", "b"), ("f", "c"), ("g", "c")]
CONFIG = """\
seed_everything: 0
model: {kind: poincare, dim: 2, lr: 0.3, burn_in: 1, log_images: false, log_projector: false}
data: {dataset: edges.tsv, batch_size: 4, negatives: 3, burn_in: 1}
trainer:
  max_epochs: 2
  accelerator: cpu
  enable_progress_bar: false
  enable_model_summary: false
  logger:
    class_path: lightning.pytorch.loggers.TensorBoardLogger
    init_args: {save_dir: runs, default_hp_metric: false}
  callbacks:
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args: {filename: last, every_n_epochs: 1, save_on_train_epoch_end: true, enable_version_counter: false}
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args: {filename: "best-{epoch}-{step}", monitor: val/map, mode: max, save_on_train_epoch_end: false}
"""


def run_train(tmp: Path, argv: list[str]):
    """``hypermem.train.hierarchy_cli.main(argv)`` with ``tmp`` as the working folder (runs/ goes there)."""
    from hypermem.train.hierarchy_cli import main

    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        return main(argv)
    finally:
        os.chdir(cwd)


def scalars(logdir: Path, tag: str) -> list[tuple[int, float]]:
    """``(step, value)`` of every TensorBoard scalar ``tag`` under ``logdir``, in the order they
    were logged (the accumulator reads a run's event files in name order, and two files written
    in one second by one process order by a counter as text: ``...10`` before ``...9``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in sorted(acc.Scalars(tag), key=lambda e: e.wall_time)]


def train_tiny(tmp: Path, *argv: str, edges=EDGES):
    """``hypermem train fit --config tiny.yaml *argv`` in ``tmp`` (CONFIG over ``edges``, written there)."""
    (tmp / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in edges))
    (tmp / "tiny.yaml").write_text(CONFIG)
    return run_train(tmp, ["fit", "--config", "tiny.yaml", *argv])


# a short mammals run: 4 loader batches an epoch, 2 optimizer steps each: 8 steps an epoch, 3 epochs
MID_EPOCH_BASE = [
    "fit", "--config", "mammals_poincare", "--trainer.limit_train_batches=4", "--trainer.check_val_every_n_epoch=1",
    "--trainer.enable_model_summary=false", "--model.burn_in=1", "--data.burn_in=1", "--data.batch_size=64",
    "--data.negatives=10", "--data.batches_per_step=2", "--model.dim=5", "--model.schedule_epochs=3",
    "--model.log_images=false", "--model.log_projector=false", "--model.optimizer=radam", "--trainer.max_epochs=3"]


def assert_same_training(a: dict, b: dict) -> None:
    """Two checkpoints (dicts) hold the same training: step, weights and Adam's moments, bit for bit."""
    import torch

    assert a["global_step"] == b["global_step"]
    for key, value in a["state_dict"].items():
        assert torch.equal(b["state_dict"][key], value), key
    sa, sb = a["optimizer_states"][0]["state"], b["optimizer_states"][0]["state"]
    assert sa.keys() == sb.keys() and sa
    for i in sa:
        for moment in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(sa[i][moment], sb[i][moment]), (i, moment)
