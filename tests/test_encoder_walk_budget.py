"""fit_hierarchy_encoder(max_minutes=...) holds its budget on a short run, before any periodic
validation has measured what a validation costs (a tiny model; validations made slow)."""

from __future__ import annotations

import time

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.hierarchy import encoder_training  # noqa: E402

torch.set_num_threads(1)
SLOW = 1.2   # seconds each validation takes here (a large validation set's share of a short budget)


def test_a_short_budget_holds_with_slow_validations(tmp_path, monkeypatch):
    tiny = tiny_model_folder(tmp_path / "m")
    real = encoder_training.validate_encoder

    def slow(encoder, names, pairs):
        time.sleep(SLOW)
        return real(encoder, names, pairs)

    monkeypatch.setattr(encoder_training, "validate_encoder", slow)
    budget = 6.0
    t0 = time.monotonic()
    enc = encoder_training.fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=10_000, max_minutes=budget / 60,
                                                 batch_size=8, negatives=4, hard_negatives=2, validate_every=10**6)
    took = time.monotonic() - t0
    assert took <= budget + 0.5, took   # before: the budget, then the final validation past it
    assert enc.config["steps"] > 0 and [h["step"] for h in enc.config["history"]] == [enc.config["steps"]]
