"""A run stopped inside an epoch (``trainer.max_steps`` here; ``max_time`` and Ctrl-C stop the same
way) and resumed with ``--ckpt_path=last`` trains the rest of that epoch, then the following ones:
the result equals the uninterrupted run's, weights and optimizer moments, for the embedding
trainer and the encoder trainer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import run_train, scalars

pytest.importorskip("lightning")

from hypermem.train.encoder_data import rank_share  # noqa: E402
from hypermem.train.mid_epoch import ResumableLoader  # noqa: E402
from hypermem.train.run_folder import finished_checkpoint  # noqa: E402

torch.set_num_threads(1)

# 4 loader batches an epoch, 2 optimizer steps each: 8 steps an epoch
BASE = ["fit", "--config", "mammals_poincare", "--trainer.limit_train_batches=4", "--trainer.check_val_every_n_epoch=1",
        "--trainer.enable_model_summary=false", "--model.burn_in=1", "--data.burn_in=1", "--data.batch_size=64",
        "--data.negatives=10", "--data.batches_per_step=2", "--model.dim=5", "--model.schedule_epochs=3",
        "--model.log_images=false", "--model.log_projector=false", "--model.optimizer=radam",
        "--trainer.max_epochs=3"]


def _last(tmp: Path, cli) -> dict:
    return torch.load(tmp / cli.trainer.log_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)


def _assert_same_training(a: dict, b: dict) -> None:
    assert a["global_step"] == b["global_step"]
    for key, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][key], value, rtol=0, atol=0, msg=key)
    sa, sb = a["optimizer_states"][0]["state"], b["optimizer_states"][0]["state"]
    assert sa.keys() == sb.keys() and sa
    for i in sa:
        for moment in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(sa[i][moment], sb[i][moment]), (i, moment)


@pytest.fixture(scope="module")
def embedding_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mid-epoch")
    whole = run_train(tmp, [*BASE, "--trainer.logger.init_args.name=whole"])
    # stopped after epoch 1 and 2 of the 4 batches of epoch 2 (step 12), then resumed
    first = run_train(tmp, [*BASE, "--trainer.max_steps=12", "--trainer.logger.init_args.name=parts"])
    stopped = tmp / first.trainer.log_dir / "checkpoints" / "last.ckpt"
    stopped_state = torch.load(stopped, map_location="cpu", weights_only=True)
    resumed = run_train(tmp, [*BASE, "--trainer.logger.init_args.name=parts", "--ckpt_path=last"])
    return tmp, whole, first, stopped_state, resumed


def test_a_stop_inside_an_epoch_resumes_at_its_batch_and_equals_the_whole_run(embedding_runs):
    tmp, whole, first, stopped, resumed = embedding_runs
    assert first.trainer.global_step == 12 and stopped["global_step"] == 12
    assert Path(resumed.trainer.log_dir) == Path(first.trainer.log_dir)
    assert resumed.trainer.global_step == whole.trainer.global_step == 24
    a, b = _last(tmp, whole), _last(tmp, resumed)
    assert a["epoch"] == b["epoch"] == 2
    _assert_same_training(a, b)
    # the loss of every step on one axis: the stopped run's steps, then the resumed run's, as the whole run's
    assert scalars(tmp / resumed.trainer.log_dir, "train/loss_step") == scalars(tmp / whole.trainer.log_dir,
                                                                                   "train/loss_step")


def test_a_stopped_epoch_is_not_complete(embedding_runs, tmp_path):
    stopped = embedding_runs[3]
    path = tmp_path / "stopped.ckpt"
    torch.save(stopped, path)
    assert finished_checkpoint(path, max_epochs=2, max_steps=None) is None   # the rest of epoch 2 is to train
    assert finished_checkpoint(path, max_epochs=1, max_steps=None).startswith(
        f"already complete: {path} holds 1 epoch and 2 batches of epoch 2,")
    assert "--trainer.max_steps=12" in finished_checkpoint(path, max_epochs=3, max_steps=12)


def test_a_checkpoint_of_an_older_run_stopped_inside_an_epoch_resumes_there_too(embedding_runs):
    """Written before the loader was resumable: no loader state, and the schedule stepped at the stop."""
    tmp, whole, _, stopped, _ = embedding_runs
    old = {**stopped, "loops": {**stopped["loops"], "fit_loop": dict(stopped["loops"]["fit_loop"])}}
    old["loops"]["fit_loop"]["state_dict"] = {}
    old["lr_schedulers"] = [{**s, "last_epoch": s["last_epoch"] + 1} for s in stopped["lr_schedulers"]]
    folder = tmp / "runs" / "old" / "version_0" / "checkpoints"
    folder.mkdir(parents=True)
    torch.save(old, folder / "last.ckpt")
    resumed = run_train(tmp, [*BASE, "--trainer.logger.init_args.name=old", "--ckpt_path=last"])
    _assert_same_training(_last(tmp, whole), _last(tmp, resumed))


def test_a_restored_loader_skips_the_batches_of_its_epoch_on_each_rank():
    """Under DDP each rank's loader holds its share of the epoch (``rank_share``); restored, it skips
    the batches this rank trained, in that epoch only."""

    class Share(torch.utils.data.IterableDataset):
        def __iter__(self):
            return rank_share(range(11), 1, 2)

    where = [(3, 0)]
    loader = ResumableLoader(Share(), batch_size=None, position=lambda: where[0])
    loader.load_state_dict({"epoch": 3, "batches": 2})
    assert list(loader) == [5, 7, 9]     # rank 1's share of 11 batches is 1, 3, 5, 7, 9 (10 is left out)
    where[0] = (3, 4)
    assert loader.state_dict() == {"epoch": 3, "batches": 4}
    assert list(loader) == [1, 3, 5, 7, 9]  # restored once: the next iterator runs the whole epoch
    loader.load_state_dict({"epoch": 2, "batches": 2})
    assert list(loader) == [1, 3, 5, 7, 9]  # a state of another epoch skips nothing


def test_the_encoder_trainer_resumes_inside_an_epoch_exactly(tmp_path):
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import EDGES, tiny_model_folder

    from hypermem.train.hierarchy_cli import main

    model = tiny_model_folder(tmp_path / "m")
    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))

    def args(name, *extra):
        return ["fit", "--config", "wordnet_encoder", f"--model.base={model}", "--model.lr=0.002",
                "--data.hierarchy=files", f"--data.edges={tmp_path / 'edges.tsv'}", "--data.task=none",
                "--data.batch_size=8", "--trainer.max_epochs=2", "--trainer.val_check_interval=1.0",
                f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--model.schedule_steps=8",
                f"--trainer.logger.init_args.name={name}", *extra]

    whole = main(args("whole"))
    per_epoch = whole.trainer.num_training_batches
    assert per_epoch >= 2 and whole.trainer.global_step == 2 * per_epoch
    first = main(args("parts", f"--trainer.max_steps={per_epoch + 1}"))   # batch 1 of epoch 2
    assert first.trainer.global_step == per_epoch + 1
    resumed = main(args("parts", "--ckpt_path=last"))
    assert resumed.trainer.global_step == 2 * per_epoch
    _assert_same_training(_last(tmp_path, whole), _last(tmp_path, resumed))


def test_a_resume_inside_an_epoch_with_another_batch_size_is_refused(embedding_runs, capsys):
    """The resume skips the trained batches by their count: with other batches, other rows."""
    tmp, _, first, _, _ = embedding_runs
    run_train(tmp, [*BASE, "--trainer.max_steps=12", "--trainer.logger.init_args.name=bs"])
    with pytest.raises(SystemExit) as exc:
        run_train(tmp, [*BASE, "--data.batch_size=32", "--trainer.logger.init_args.name=bs", "--ckpt_path=last"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "stopped inside epoch 2 after 2 batches of data.batch_size=64" in err and "--data.batch_size=64" in err
