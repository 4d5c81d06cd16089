"""Walk 69: fit_hierarchy_encoder(max_minutes=M) ends within M, everything after its last step
included (the final validation, the ranking lambda's choice, the save), with a validation's
time modelled as fixed + per text; and `hypermem train --config wordnet_encoder` says that it
is writing the encoder after its summary, the encoder's folder on the last line.

The budget is tested on a fake clock (each encoding, step, load and save advances it by a set
cost): no assertion on real time."""

from __future__ import annotations

import json
import time
import types
from pathlib import Path

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy import encoder_training  # noqa: E402
from hypermem.hierarchy.encoder_eval import CachedScorer  # noqa: E402
from hypermem.hierarchy.encoder_step import TAIL_ALLOWANCE, TAIL_MARGIN, EncodeCost, TimeBudget  # noqa: E402

torch.set_num_threads(1)


def test_a_validation_is_predicted_from_a_fixed_and_a_per_text_part():
    # the walker's tree: samples of 8 and 64 positives encode 158 and 1,039 texts; all 142, 1,798
    cost = EncodeCost.fit([(158, 1.6), (1039, 7.2)])
    assert cost.fixed == pytest.approx(1.6 - 158 * cost.per_text) and cost.fixed > 0
    assert cost.seconds(1798) == pytest.approx(12.0, abs=0.1)   # measured 14.6; per pair: 7.2 * 142 / 64 = 16
    assert EncodeCost.fit([(100, 2.0), (100, 3.0)]) == EncodeCost(0.0, 0.03)   # one size: the slowest, per text
    assert EncodeCost.fit([(100, 5.0), (400, 4.0)]) == EncodeCost(5.0, 0.0)    # noise: never below a timing
    with pytest.raises(ValueError, match="no timing"):
        EncodeCost.fit([])


def test_the_tail_reserves_the_final_validation_the_ranking_and_the_save():
    budget = TimeBudget(60.0, val_texts=1798, rank_texts=1046)
    assert budget.tail() == TAIL_ALLOWANCE
    budget.observe(158, 1.6)
    budget.observe(1039, 7.2)
    line = EncodeCost.fit(budget.timings)
    assert budget.tail() == pytest.approx(TAIL_MARGIN * (line.seconds(1798) + line.seconds(1046)) + TAIL_ALLOWANCE)
    budget.observe(1798, 20.0)   # a validation of the run: its own size timed, the slowest kept
    budget.observe(1798, 15.0)
    line = EncodeCost.fit(budget.timings)
    assert budget.tail() == pytest.approx(TAIL_MARGIN * (20.0 + line.seconds(1046)) + TAIL_ALLOWANCE)
    room = 60.0 - budget.tail()
    assert budget.fits(room - 3.0, 3.0) and not budget.fits(room - 2.9, 3.0)
    assert TimeBudget(60.0, 10, 0, margin=1.0, allowance=0.0).tail() == 0.0


def test_cached_scorer_encodes_each_text_once():
    calls = []
    inner = types.SimpleNamespace(encode=lambda texts: calls.append(list(texts)) or torch.arange(
        float(len(texts))).unsqueeze(1) + 10 * len(calls), score_terms=lambda c, p: (c, p))
    s = CachedScorer(inner)
    a = s.encode(["x", "y", "x"])
    b = s.encode(["y", "z"])
    assert calls == [["x", "y"], ["z"]] and a[0] == a[2] and b[0] == a[1]


FIXED, PER_TEXT, STEP, LOAD, SAVE = 1.0, 0.5, 2.0, 5.0, 0.5


class FakeClock:
    """``time`` for encoder_training: monotonic() is the fake clock, process_time() the real one."""

    def __init__(self) -> None:
        self.now = 0.0
        self.encodes: list[tuple[float, int]] = []   # (clock at the call, texts)

    def monotonic(self) -> float:
        return self.now

    @staticmethod
    def process_time() -> float:
        return time.process_time()


@pytest.mark.parametrize("minutes", [1.5, 2.0, 3.0])
def test_max_minutes_ends_in_time_and_trains_until_the_tail_would_not_fit(tmp_path, monkeypatch, minutes):
    tiny = tiny_model_folder(tmp_path / "m")
    clock = FakeClock()
    monkeypatch.setattr(encoder_training, "time", clock)
    real_encode, real_losses, real_save = HierarchyEncoder.encode, encoder_training.batch_losses, HierarchyEncoder.save
    real_load = HierarchyEncoder.from_pretrained.__func__

    def encode(self, texts, **kw):
        clock.encodes.append((clock.now, len(texts)))
        clock.now += FIXED + PER_TEXT * len(texts)
        return real_encode(self, texts, **kw)

    def losses(*a, **kw):
        clock.now += STEP
        return real_losses(*a, **kw)

    def save(self, path):
        clock.now += SAVE
        return real_save(self, path)

    def load(cls, *a, **kw):
        clock.now += LOAD
        return real_load(cls, *a, **kw)

    monkeypatch.setattr(HierarchyEncoder, "encode", encode)
    monkeypatch.setattr(HierarchyEncoder, "save", save)
    monkeypatch.setattr(HierarchyEncoder, "from_pretrained", classmethod(load))
    monkeypatch.setattr(encoder_training, "batch_losses", losses)
    val, train = EDGES[::3], [e for i, e in enumerate(EDGES) if i % 3]
    budget = 60.0 * minutes
    enc = encoder_training.fit_hierarchy_encoder(train, NAMES, base=str(tiny), epochs=10_000, max_minutes=minutes,
                                                 validation_edges=val, out=str(tmp_path / "enc"), batch_size=8,
                                                 negatives=4, hard_negatives=2, validate_every=10**6)
    steps = enc.config["steps"]
    # before: 2x a validation was reserved, the ranking encoded every entity past it (over by 3-5 s)
    assert clock.now <= budget, (clock.now, steps)
    # the tail: the final validation, then the ranking's texts that validation did not encode
    (t_stop, n_val), (_, n_rank) = clock.encodes[-2:]
    tail = FIXED + PER_TEXT * n_val + FIXED + PER_TEXT * n_rank
    assert t_stop + STEP + TAIL_MARGIN * tail + TAIL_ALLOWANCE > budget   # one more step would not have fit
    assert clock.now == pytest.approx(t_stop + tail + SAVE)
    assert steps == round((t_stop - clock.encodes[1][0] - clock.encodes[1][1] * PER_TEXT - FIXED) / STEP)
    assert [h["step"] for h in enc.config["history"]] == [steps] and enc.ranking_weight is not None
    assert HierarchyEncoder.load(tmp_path / "enc").threshold == pytest.approx(enc.threshold)


def test_train_cli_says_it_writes_the_encoder_and_ends_with_its_folder(tmp_path, monkeypatch, capsys):
    pytest.importorskip("lightning")
    from hypermem.train.hierarchy_cli import main

    model = tiny_model_folder(tmp_path / "m")
    (tmp_path / "edges.jsonl").write_text("".join(json.dumps({"child": c, "parent": p}) + "\n" for c, p in EDGES))
    (tmp_path / "names.jsonl").write_text("".join(json.dumps({"id": i, "name": f"a {t}"}) + "\n"
                                                  for i, t in sorted(NAMES.items())))
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", "wordnet_encoder", "--data.hierarchy=files", "--data.edges=edges.jsonl",
          "--data.names=names.jsonl", "--data.task=none", f"--model.base={model}", "--data.batch_size=8",
          "--trainer.max_epochs=1", "--trainer.enable_progress_bar=false",
          f"--trainer.logger.init_args.save_dir={tmp_path / 'runs'}", "--trainer.logger.init_args.name=order"])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    logs = next(i for i, ln in enumerate(lines) if ln.startswith("logs: "))
    folder = tmp_path / "runs" / "order" / "version_0" / "encoder"
    # before: the summary's last line, then nothing while the ranking lambda was chosen
    assert lines[logs + 1].startswith(f"encoder: writing {folder} from ")
    assert lines[-1].startswith(f"encoder: {folder}  (HierarchyEncoder.load")
    assert Path(folder, "hypermem_encoder.json").is_file()
