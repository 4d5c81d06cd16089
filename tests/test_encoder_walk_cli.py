"""`hypermem train --config wordnet_encoder` on a user's own (non-WordNet) hierarchy, as a tester
met it: files beside a user YAML, Ctrl-C, the printed figures, one step axis, warnings, time limits
(a tiny model built in the test)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("lightning")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.train.hierarchy_cli import main  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """exp/my.yaml naming edges.jsonl and names.jsonl beside it; a tiny model."""
    root = tmp_path_factory.mktemp("enc-walk-cli")
    exp = root / "exp"
    exp.mkdir()
    (exp / "edges.jsonl").write_text("".join(json.dumps({"child": c, "parent": p}) + "\n" for c, p in EDGES))
    (exp / "names.jsonl").write_text("".join(json.dumps({"id": i, "name": f"a {t}"}) + "\n"
                                             for i, t in sorted(NAMES.items())))
    (exp / "my.yaml").write_text("data: {hierarchy: files, edges: edges.jsonl, names: names.jsonl, task: none}\n")
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    return root, tiny_model_folder(root / "m")


def _args(root, model, name, *extra, config=None):
    return ["fit", "--config", "wordnet_encoder", "--config", str(config or root / "exp" / "my.yaml"),
            f"--model.base={model}", "--model.lr=0.002", "--data.batch_size=8", "--trainer.max_epochs=2",
            "--trainer.enable_progress_bar=false", f"--trainer.logger.init_args.save_dir={root / 'runs'}",
            f"--trainer.logger.init_args.name={name}", *extra]


def test_files_named_in_a_user_yaml_are_read_beside_it(setup, monkeypatch, capsys):
    root, model = setup
    monkeypatch.chdir(root / "elsewhere")
    main(_args(root, model, "beside", "--trainer.max_epochs=1"))
    assert (root / "runs" / "beside" / "version_0" / "encoder" / "hypermem_encoder.json").is_file()
    # a file missing everywhere: one line naming the setting, the YAML and both places looked in
    (root / "exp" / "other.yaml").write_text("data: {hierarchy: files, edges: nothere.jsonl, task: none}\n")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(_args(root, model, "missing", config=root / "exp" / "other.yaml"))
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "data.edges: no such file: 'nothere.jsonl'" in err
    assert str(root / "exp" / "other.yaml") in err
    assert str(root / "exp" / "nothere.jsonl") in err and str(root / "elsewhere" / "nothere.jsonl") in err
    # a command-line value is read from the working folder
    with pytest.raises(SystemExit):
        main(_args(root, model, "missing", "--data.names=names.jsonl"))
    err = capsys.readouterr().err
    assert "data.names: no such file: 'names.jsonl' (given on the command line" in err
    assert str(root / "elsewhere" / "names.jsonl") in err and str(root / "exp" / "names.jsonl") not in err


def test_ctrl_c_says_where_the_run_stopped_and_how_to_resume(setup, monkeypatch, capsys):
    import os
    import shlex
    import signal

    from hypermem.train.encoder_module import EncoderModule

    root, model = setup

    def sigint_at_step_6(self, outputs, batch, batch_idx):
        if self.global_step == 6:
            os.kill(os.getpid(), signal.SIGINT)   # a real Ctrl-C, in the second epoch (4 steps each)

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:   # a suite started in the background (`... &`)
        signal.signal(signal.SIGINT, signal.default_int_handler)   # inherits an ignored Ctrl-C: a terminal's
    handler = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(EncoderModule, "on_train_batch_end", sigint_at_step_6, raising=False)
    with pytest.raises(SystemExit) as exc:
        main(_args(root, model, "ctrl-c", "--trainer.max_epochs=3"))
    assert exc.value.code == 130
    assert signal.getsignal(signal.SIGINT) is handler   # Lightning's "ignore a second Ctrl-C" is undone
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("interrupted")]
    last = root / "runs" / "ctrl-c" / "version_0" / "checkpoints" / "last.ckpt"
    # the Ctrl-C's own checkpoint, at the end of its step (hypermem.train.interrupt_checkpoint)
    assert lines == [f"interrupted at step 6 (epoch 2): last checkpoint {last} (step 6); resume: "
                     f"python -m hypermem.train {shlex.join(_args(root, model, 'ctrl-c', '--trainer.max_epochs=3'))}"
                     " --ckpt_path=last"], out
    monkeypatch.undo()
    main(shlex.split(lines[0].split("resume: ")[1])[3:])   # the printed command resumes the run
    assert "done: 3 epochs, optimizer steps 7-12 (6 this run) in " in capsys.readouterr().out   # the resumed part


def _events(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run), size_guidance={"images": 0, "histograms": 0, "scalars": 0})
    ea.Reload()
    return ea


def test_piped_output_shows_the_loss_and_the_validation_figures(setup, capsys):
    root, model = setup
    main(_args(root, model, "figures", "--trainer.max_epochs=3"))
    out = capsys.readouterr().out
    epochs = [line for line in out.splitlines() if line.startswith("epoch ")]
    assert len(epochs) == 3
    for line in epochs:
        assert "train/loss " in line and "val/f1 " in line and "val/mrr " in line, line
    final = [line for line in out.splitlines() if line.startswith("final metrics")]
    assert len(final) == 1 and final[0].startswith("final metrics (epoch 3, step 12): val/f1 ") and "val/mrr" in final[0]
    run = root / "runs" / "figures" / "version_0"
    f1 = float(final[0].split("val/f1 ")[1].split()[0])
    assert f1 == pytest.approx(_events(run).Scalars("val/f1")[-1].value, rel=1e-3)


def test_one_validation_is_one_step_in_tensorboard_and_the_checkpoint_name(setup):
    root, model = setup
    main(_args(root, model, "axis", "--trainer.max_epochs=3", "--trainer.log_every_n_steps=1"))
    run = root / "runs" / "axis" / "version_0"
    ea = _events(run)
    val = [e.step for e in ea.Scalars("val/f1")]
    assert val == [4, 8, 12]                     # 4 optimizer steps an epoch: after each epoch's 4th step
    assert [e.step for e in ea.Images("embedding/disk")] == val
    depth_tags = [t for t in ea.Tags()["histograms"] if t.startswith("embedding/norm_depth_")]
    assert depth_tags and all([e.step for e in ea.Histograms(t)] == val for t in depth_tags)
    assert [e.step for e in ea.Scalars("train/loss")] == list(range(1, 13))   # step S: the loss of the S-th step
    best = next((run / "checkpoints").glob("best-step=*.ckpt")).name
    assert int(best[len("best-step="):-len(".ckpt")]) in val


def test_a_time_limit_stop_is_said_and_the_export_records_its_validation_step(setup, capsys):
    root, model = setup
    main(_args(root, model, "timed", "--trainer.max_epochs=100000", "--trainer.max_time=00:00:00:02"))
    out = capsys.readouterr().out
    done = next(line for line in out.splitlines() if line.startswith("done: "))
    assert done.endswith("s (stopped at the time limit, trainer.max_time 0:00:02)"), done
    settings = json.loads((root / "runs" / "timed" / "version_0" / "encoder" / "hypermem_encoder.json").read_text())
    assert settings["metrics"]["val_step"] > 0 and settings["metrics"]["val_step"] % 4 == 0
    assert settings["metrics"]["val_epoch"] == settings["metrics"]["val_step"] / 4


def test_no_lightning_noise_on_a_small_hierarchy_and_the_best_checkpoint_pattern(setup, capsys):
    import warnings

    root, model = setup
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        main(_args(root, model, "quiet", "--trainer.max_epochs=1"))   # 4 batches, the config's log_every_n_steps: 10
    texts = [str(w.message) for w in caught]
    assert not [t for t in texts if "IterableDataset" in t or "logging interval" in t], texts
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(_args(root, model, "quiet", "--ckpt_path=best"))
    err = capsys.readouterr().err
    assert "fit resumes from --ckpt_path=last" in err and "checkpoints/best-step=S.ckpt)" in err, err
