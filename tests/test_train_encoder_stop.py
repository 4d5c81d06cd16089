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
