"""`hypermem train` stopped by SIGTERM (`timeout`, a job scheduler) says where it stopped and how
to resume, as Ctrl-C does, and exits 143 (it exited 0 without a word: Lightning's SIGTERMException
is a SystemExit without a code)."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("lightning")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.train.hierarchy_cli import main  # noqa: E402

torch.set_num_threads(1)


def test_sigterm_prints_the_resume_line_and_exits_143(tmp_path, monkeypatch, capsys):
    from hypermem.train.encoder_module import EncoderModule

    (tmp_path / "edges.jsonl").write_text("".join(json.dumps({"child": c, "parent": p}) + "\n" for c, p in EDGES))
    (tmp_path / "names.jsonl").write_text("".join(json.dumps({"id": i, "name": f"a {t}"}) + "\n"
                                                  for i, t in sorted(NAMES.items())))
    (tmp_path / "my.yaml").write_text("data: {hierarchy: files, edges: edges.jsonl, names: names.jsonl, task: none}\n")
    model = tiny_model_folder(tmp_path / "m")

    def sigterm_at_step_6(self, outputs, batch, batch_idx):
        if self.global_step == 6:
            os.kill(os.getpid(), signal.SIGTERM)   # what `timeout -s TERM` sends, in the second epoch

    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(EncoderModule, "on_train_batch_end", sigterm_at_step_6, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", "wordnet_encoder", "--config", str(tmp_path / "my.yaml"), f"--model.base={model}",
              "--data.batch_size=8", "--trainer.max_epochs=3", "--trainer.enable_progress_bar=false",
              f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--trainer.logger.init_args.name=term"])
    assert exc.value.code == 143
    assert signal.getsignal(signal.SIGTERM) is handler
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("interrupted")]
    last = tmp_path / "runs" / "term" / "version_0" / "checkpoints" / "last.ckpt"
    assert len(lines) == 1 and lines[0].startswith(f"interrupted at step 6 (epoch 2): last checkpoint {last} "
                                                   "(step 4); resume: python -m hypermem.train "), lines
