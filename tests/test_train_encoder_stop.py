"""An encoder run stopped by ``trainer.max_steps`` validates at the stop (its export considers the last
weights), and without ``model.schedule_steps`` warns that the stop changes the learning-rate schedule."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("lightning")
pytest.importorskip("sentence_transformers")

torch.set_num_threads(1)


def _args(tmp_path, model, name, *extra):
    return ["fit", "--config", "wordnet_encoder", f"--model.base={model}", "--data.hierarchy=files",
            f"--data.edges={tmp_path / 'edges.tsv'}", "--data.task=none", "--data.batch_size=8",
            "--trainer.max_epochs=2", "--trainer.val_check_interval=1.0", "--model.log_images=false",
            f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", f"--trainer.logger.init_args.name={name}",
            *extra]


def test_a_max_steps_stop_validates_at_the_stop_and_warns_about_the_schedule(tmp_path):
    from encoder_helpers import EDGES, tiny_model_folder

    from hypermem.train.hierarchy_cli import main

    model = tiny_model_folder(tmp_path / "m")
    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    with pytest.warns(UserWarning, match=r"pass --model.schedule_steps=\d+ to keep the whole run's schedule"):
        cli = main(_args(tmp_path, model, "stop", "--trainer.max_steps=1"))
    assert cli.trainer.num_training_batches >= 2 and cli.trainer.global_step == 1   # inside epoch 1
    assert cli.model.final_metrics["step"] == 1   # a validation of the stop's weights
    assert (tmp_path / cli.trainer.log_dir / "checkpoints" / "best-step=1.ckpt").is_file()   # what the export takes


def test_a_stop_at_an_epochs_end_validates_once(tmp_path):
    from encoder_helpers import EDGES, tiny_model_folder

    from hypermem.train.hierarchy_cli import main

    model = tiny_model_folder(tmp_path / "m")
    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    probe = main(_args(tmp_path, model, "probe", "--trainer.max_epochs=1", "--model.schedule_steps=8"))
    per_epoch = probe.trainer.num_training_batches
    runs = []
    from hypermem.train.encoder_module import EncoderModule

    real = EncoderModule.validation_step

    def counted(self, batch, batch_idx):
        if not self.trainer.sanity_checking:
            runs.append(self.global_step)
        return real(self, batch, batch_idx)

    EncoderModule.validation_step = counted
    try:
        main(_args(tmp_path, model, "edge", f"--trainer.max_steps={per_epoch}", "--model.schedule_steps=8"))
    finally:
        EncoderModule.validation_step = real
    assert runs == [per_epoch]


def _counting(monkeypatch):
    """The steps of the module's validations (sanity check left out), recorded as they run."""
    from hypermem.train.encoder_module import EncoderModule

    runs, real = [], EncoderModule.validation_step

    def counted(self, batch, batch_idx):
        if not self.trainer.sanity_checking:
            runs.append(self.global_step)
        return real(self, batch, batch_idx)

    monkeypatch.setattr(EncoderModule, "validation_step", counted)
    return runs


def _exported_predicts(run) -> None:
    """The run's exported encoder has a threshold and its metrics: ``predict`` works."""
    import json

    from hypermem.embed.hierarchy_encoder import HierarchyEncoder

    saved = json.loads((run / "encoder" / "hypermem_encoder.json").read_text())
    assert saved["threshold"] is not None and saved["metrics"], saved
    enc = HierarchyEncoder.load(run / "encoder")
    assert len(enc.predict(["a"], ["b"])) == 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from encoder_helpers import EDGES, tiny_model_folder

    root = tmp_path_factory.mktemp("stops")
    (root / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))
    return root, tiny_model_folder(root / "m")


def test_a_max_steps_stop_in_an_epoch_without_validation_validates_and_exports_a_threshold(tiny, monkeypatch):
    from hypermem.train.hierarchy_cli import main

    root, model = tiny
    runs = _counting(monkeypatch)
    cli = main(_args(root, model, "every20", "--trainer.max_epochs=30", "--trainer.check_val_every_n_epoch=20",
                     "--trainer.max_steps=5", "--model.schedule_steps=8"))
    per_epoch = cli.trainer.num_training_batches
    assert 5 % per_epoch != 0 and cli.trainer.global_step == 5   # inside an epoch, not a validated one
    assert runs == [5]
    assert cli.trainer.check_val_every_n_epoch == 20   # put back
    run = root / cli.trainer.log_dir
    assert (run / "checkpoints" / "best-step=5.ckpt").is_file()
    _exported_predicts(run)


def test_a_time_limit_stop_validates_at_its_step(tiny, monkeypatch):
    """Lightning's Timer asks for the stop after a batch (``should_stop``); here at step 3."""
    from lightning.pytorch.callbacks import Timer

    from hypermem.train.hierarchy_cli import main

    def out_of_time(self, trainer, *args, **kwargs):
        if trainer.global_step >= 3:
            trainer.should_stop = True

    monkeypatch.setattr(Timer, "on_train_batch_end", out_of_time)
    root, model = tiny
    runs = _counting(monkeypatch)
    cli = main(_args(root, model, "timed", "--trainer.max_epochs=30", "--trainer.check_val_every_n_epoch=20",
                     "--model.schedule_steps=8"))
    assert cli.trainer.global_step == 3 and runs == [3]
    _exported_predicts(root / cli.trainer.log_dir)


def test_the_last_epoch_validates_when_check_val_every_n_epoch_skips_it(tiny, monkeypatch):
    from hypermem.train.hierarchy_cli import main

    root, model = tiny
    runs = _counting(monkeypatch)
    cli = main(_args(root, model, "last", "--trainer.max_epochs=3", "--trainer.check_val_every_n_epoch=2",
                     "--model.schedule_steps=8"))
    per_epoch = cli.trainer.num_training_batches
    assert runs == [2 * per_epoch, 3 * per_epoch]
    _exported_predicts(root / cli.trainer.log_dir)


def test_a_run_that_never_validates_still_exports_a_threshold(tiny, capsys):
    from hypermem.train.hierarchy_cli import main

    root, model = tiny
    cli = main(_args(root, model, "noval", "--trainer.max_epochs=1", "--trainer.limit_val_batches=0",
                     "--model.schedule_steps=8"))
    assert "validated them now" in capsys.readouterr().out
    _exported_predicts(root / cli.trainer.log_dir)


def test_after_a_ctrl_c_one_more_step_exports_the_encoder(tiny, monkeypatch):
    """A Ctrl-C stop exports nothing; ``--ckpt_path=last --trainer.max_steps=S+1`` (docs/encoder.md) does."""
    from hypermem.train.encoder_module import EncoderModule
    from hypermem.train.hierarchy_cli import main

    def ctrl_c(self, *args):
        if self.global_step == 5:
            raise KeyboardInterrupt

    root, model = tiny
    base = ["--trainer.max_epochs=30", "--trainer.check_val_every_n_epoch=2", "--model.schedule_steps=8"]
    monkeypatch.setattr(EncoderModule, "on_train_batch_end", ctrl_c, raising=False)
    with pytest.raises(SystemExit):
        main(_args(root, model, "cut", *base))
    monkeypatch.undo()
    run = root / "runs" / "cut" / "version_0"
    assert not (run / "encoder").exists()
    cli = main(_args(root, model, "cut", *base, "--ckpt_path=last", "--trainer.max_steps=6"))
    assert cli.trainer.global_step == 6
    _exported_predicts(root / cli.trainer.log_dir)
