"""The hierarchy encoder under Lightning DDP on CPU (gloo, 2 processes), as a tester ran it:
no unused trainable parameter (the pooler), the export at the end on every rank's terms, each
rank its own share of the batches, ``ddp_spawn`` refused in one line.  The hierarchy trainer's
DDP run stopped by ``max_steps`` is test_train_lightning.py::test_ddp_on_two_cpu_processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("lightning")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.train.encoder_data import rank_share  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("walk63")
    (root / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    (root / "names.tsv").write_text("".join(f"{i}\t{t}\n" for i, t in sorted(NAMES.items())))
    return root, tiny_model_folder(root / "m")


def _argv(root: Path, model: Path, name: str, *extra: str) -> list[str]:
    return ["train", "--config", "wordnet_encoder", "--data.hierarchy=files", f"--data.edges={root / 'edges.tsv'}",
            f"--data.names={root / 'names.tsv'}", "--data.task=none", "--data.negatives=4",
            "--data.hard_negatives=2", "--data.batch_size=4", f"--model.base={model}", "--model.log_images=false",
            "--trainer.accelerator=cpu", "--trainer.enable_progress_bar=false",
            f"--trainer.logger.init_args.save_dir={root / 'runs'}", f"--trainer.logger.init_args.name={name}",
            *extra]


def test_rank_share_gives_each_rank_every_wth_batch_in_equal_counts():
    assert list(rank_share(iter(range(10)), 0, 1)) == list(range(10))   # one process: all, in order
    shares = [list(rank_share(iter(range(11)), r, 3)) for r in range(3)]
    assert shares == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]   # 9, 10 to no rank: every rank runs 3 steps
    assert not set(shares[0]) & set(shares[1])
    with pytest.raises(ValueError):
        rank_share(iter(range(4)), 2, 2)


def test_every_trainable_parameter_gets_a_gradient(files):
    from hypermem.train.encoder_data import EncoderDataModule
    from hypermem.train.encoder_module import EncoderModule

    root, model = files
    for frozen in (None, 0):
        module = EncoderModule(base=str(model), frozen_layers=frozen, log_images=False)
        dm = EncoderDataModule(hierarchy="files", edges=str(root / "edges.tsv"), names=str(root / "names.tsv"),
                               task="none", batch_size=8, negatives=4, hard_negatives=2)
        module.trainer = type("T", (), {"datamodule": dm})()   # what setup reads
        module.setup("fit")
        dm.set_epoch(0)
        batch = next(iter(dm.batches.epoch(0)))
        from hypermem.hierarchy.encoder_step import batch_losses

        batch_losses(module.encoder, module.tokens, batch, module.weights)["loss"].backward()
        unused = [n for n, p in module.named_parameters() if p.requires_grad and p.grad is None]
        assert unused == [], (frozen, unused)
        assert not any(p.requires_grad for p in module.model[0].auto_model.pooler.parameters())


def test_ddp_spawn_is_refused_in_one_line(files, capsys):
    from hypermem.train.hierarchy_cli import main

    root, model = files
    with pytest.raises(SystemExit) as exc:
        main(_argv(root, model, "spawn", "--trainer.strategy=ddp_spawn", "--trainer.devices=2")[1:])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "--trainer.strategy=ddp_spawn" in err and "--trainer.strategy=ddp " in err
    assert not (root / "runs" / "spawn").exists()


@pytest.mark.slow
def test_two_process_ddp_run_trains_shares_exports_and_warns_once(files):
    """One two-process run serves four checks: it trains, each rank runs its share of the
    batches, the encoder is exported once, and a warning from reading the names (two ids, one
    text) is printed once, by the first process (walk 71)."""
    from hypermem.embed.hierarchy_encoder import HierarchyEncoder
    from hypermem.train.encoder_data import EncoderDataModule

    root, model = files
    names = root / "names_dup.tsv"
    names.write_text("".join(f"{i}\t{t}\n" for i, t in sorted(dict(NAMES, owl="eagle").items())))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONWARNINGS", None)   # the names' warning must reach stderr
    cmd = [sys.executable, "-m", "hypermem.cli", *_argv(root, model, "ddp", "--trainer.strategy=ddp",
                                                         "--trainer.devices=2", "--trainer.max_epochs=1",
                                                         f"--data.names={names}")]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.count("name more than one id") == 1, proc.stderr[-2000:]
    versions = sorted(p.name for p in (root / "runs" / "ddp").iterdir())
    assert versions == ["version_0"]
    run = root / "runs" / "ddp" / "version_0"
    enc = HierarchyEncoder.load(run / "encoder")
    assert enc.encode(["dog"], show_progress_bar=False).shape[0] == 1
    # one epoch, each rank its half of the batches: half the steps of one process
    with pytest.warns(UserWarning, match="name more than one id"):
        dm = EncoderDataModule(hierarchy="files", edges=str(root / "edges.tsv"), names=str(names),
                               task="none", batch_size=4, negatives=4, hard_negatives=2)
        dm.setup("fit")
    last = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["global_step"] == len(list(dm.batches.epoch(0))) // 2


def test_a_checkpoint_with_the_pooler_in_adamw_resumes(files, monkeypatch):
    """A last.ckpt of a version that handed the unused pooler to AdamW resumes with this one."""
    import hypermem.hierarchy.encoder_prefix as prefix
    from hypermem.train.hierarchy_cli import main

    root, model = files
    argv = _argv(root, model, "old", "--trainer.max_epochs=1")[1:]
    with monkeypatch.context() as m:
        m.setattr(prefix, "freeze_unused", lambda encoder: None)   # the former behaviour
        main(argv)
    ckpt = root / "runs" / "old" / "version_0" / "checkpoints" / "last.ckpt"
    old = torch.load(ckpt, map_location="cpu", weights_only=True)["optimizer_states"][0]
    cli = main([*argv, "--trainer.max_epochs=2", "--ckpt_path=last"])
    assert cli.trainer.current_epoch == 2
    new = cli.trainer.optimizers[0].state_dict()
    assert len(new["param_groups"][0]["params"]) == len(old["param_groups"][0]["params"]) - 2   # weight, bias
