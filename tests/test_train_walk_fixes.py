"""`hypermem train` as a tester met it: ``validate --ckpt_path`` logs at the checkpoint's step
(one optimizer-step axis with the fit), and a resume whose ``trainer.max_time`` the resumed run
already used up says that nothing was trained and counts the checkpoint's epochs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

pytest.importorskip("lightning")

from train_helpers import run_train, scalars, train_tiny  # noqa: E402

from hypermem.train.run_folder import progress_text  # noqa: E402

torch.set_num_threads(1)


def _ckpt(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def test_validate_logs_at_the_checkpoints_step(tmp_path, capsys):
    fit = train_tiny(tmp_path, "--trainer.max_epochs=3")
    run = tmp_path / fit.trainer.log_dir
    fit_steps = [s for s, _ in scalars(run, "val/map")]
    last = _ckpt(run / "checkpoints" / "last.ckpt")["global_step"]
    assert last > 0 and last in fit_steps
    val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--ckpt_path=last"])
    assert val.trainer.callback_metrics["step"] == last       # the printed table's step
    assert val.model.final_metrics["step"] == last
    assert val.model.final_metrics["epoch"] == 3
    steps = [s for s, _ in scalars(tmp_path / val.trainer.log_dir, "val/map")]
    assert steps == [last], steps   # its own run beside the fit's (validate-last), at the fit's step
    assert [s for s, _ in scalars(run, "val/map")] == fit_steps   # the fit's curve: nothing added
    best = next((run / "checkpoints").glob("best-*.ckpt"))
    best_step = _ckpt(best)["global_step"]
    val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", f"--ckpt_path={best}"])
    assert val.trainer.callback_metrics["step"] == best_step
    # without a checkpoint, validate evaluates the weights in memory at their own step (0)
    val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", "--trainer.logger.init_args.name=fresh"])
    assert val.trainer.callback_metrics["step"] == 0


def _done(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("done: "))


def test_a_resume_whose_max_time_is_used_up_says_nothing_was_trained(tmp_path, capsys):
    first = train_tiny(tmp_path, "--trainer.max_epochs=100000", "--trainer.max_time=00:00:00:02")
    ckpt = _ckpt(tmp_path / first.trainer.log_dir / "checkpoints" / "last.ckpt")
    held = progress_text(ckpt)   # "N epochs", or "N epochs and B batches of epoch N+1" when stopped inside one
    steps = ckpt["global_step"]
    assert _done(capsys.readouterr().out).endswith("(stopped at the time limit, trainer.max_time 0:00:02)")
    again = train_tiny(tmp_path, "--trainer.max_epochs=100000", "--trainer.max_time=00:00:00:01", "--ckpt_path=last")
    assert again.trainer.global_step == steps
    done = _done(capsys.readouterr().out)
    assert done.startswith(f"done: {held}, {steps} optimizer steps"), done
    assert "nothing trained: trainer.max_time 0:00:01 was already used up by the run being resumed" in done
    assert "raise it to train more" in done


def test_a_resume_with_time_left_trains_on_and_says_the_usual(tmp_path, capsys):
    first = train_tiny(tmp_path, "--trainer.max_epochs=100000", "--trainer.max_time=00:00:00:01")
    steps = first.trainer.global_step
    capsys.readouterr()
    again = train_tiny(tmp_path, "--trainer.max_epochs=100000", "--trainer.max_time=00:00:00:03", "--ckpt_path=last")
    assert again.trainer.global_step > steps
    done = _done(capsys.readouterr().out)
    assert "nothing trained" not in done
    assert done.endswith("(stopped at the time limit, trainer.max_time 0:00:03)"), done


def test_encoder_validate_logs_at_the_checkpoints_step(tmp_path):
    pytest.importorskip("sentence_transformers")
    import json

    from encoder_helpers import EDGES, NAMES, tiny_model_folder

    from hypermem.train.hierarchy_cli import main

    (tmp_path / "edges.jsonl").write_text("".join(json.dumps({"child": c, "parent": p}) + "\n" for c, p in EDGES))
    (tmp_path / "names.jsonl").write_text("".join(json.dumps({"id": i, "name": f"a {t}"}) + "\n"
                                                  for i, t in sorted(NAMES.items())))
    (tmp_path / "my.yaml").write_text(f"data: {{hierarchy: files, edges: {tmp_path / 'edges.jsonl'}, "
                                      f"names: {tmp_path / 'names.jsonl'}, task: none}}\n")
    args = ["--config", "wordnet_encoder", "--config", str(tmp_path / "my.yaml"),
            f"--model.base={tiny_model_folder(tmp_path / 'm')}", "--data.batch_size=8",
            "--trainer.enable_progress_bar=false", f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}",
            "--trainer.logger.init_args.name=my"]
    fit = main(["fit", *args, "--trainer.max_epochs=2"])
    run = Path(fit.trainer.log_dir)
    best = next((run / "checkpoints").glob("best-step=*.ckpt"))
    step = _ckpt(best)["global_step"]
    assert step > 0
    val = main(["validate", *args, "--ckpt_path=best"])
    assert val.trainer.callback_metrics["step"] == step
    assert val.model.final_metrics["step"] == step
    steps = [s for s, _ in scalars(Path(val.trainer.log_dir), "val/f1")]
    assert 0 not in steps and step in steps, steps


def test_a_resumed_runs_finish_line_says_which_steps_its_time_took(tmp_path, capsys):
    """Not "N optimizer steps in S s" with N the whole run's steps and S the resumed part's time."""
    first = train_tiny(tmp_path, "--trainer.max_epochs=2")
    before = first.trainer.global_step
    assert re.match(rf"done: 2 epochs, {before} optimizer steps in \d+\.\d s$", _done(capsys.readouterr().out))
    again = train_tiny(tmp_path, "--trainer.max_epochs=4", "--ckpt_path=last")
    after = again.trainer.global_step
    assert after == 2 * before
    done = _done(capsys.readouterr().out)
    assert re.match(rf"done: 4 epochs, optimizer steps {before + 1}-{after} \({after - before} this run\) "
                    rf"in \d+\.\d s; {after} in all$", done), done
