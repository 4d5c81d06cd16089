"""A moving average of the encoder's trained weights: the update's formula, the swap in and
out, the setting's checks, and fit_hierarchy_encoder validating the weights and their average."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.hierarchy.encoder_average import WeightAverage, check_average  # noqa: E402
from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


def test_the_average_follows_the_formula_and_swaps_in_and_out():
    w = torch.nn.Parameter(torch.tensor([0.0, 2.0]))
    avg = WeightAverage([w], decay=0.9)
    expected = torch.tensor([0.0, 2.0])
    for t, value in enumerate([1.0, 3.0, -1.0, 5.0, 2.0] * 4, start=1):
        with torch.no_grad():
            w.fill_(value)
        avg.update()
        beta = min(0.9, (1 + t) / (10 + t))
        expected = beta * expected + (1 - beta) * torch.full((2,), value)
        assert torch.allclose(avg.shadow[0], expected)
    with avg.applied():
        assert torch.allclose(w.detach(), expected)
    assert torch.equal(w.detach(), torch.full((2,), 2.0))   # the weights back
    with pytest.raises(RuntimeError), avg.applied():
        raise RuntimeError("inside")
    assert torch.equal(w.detach(), torch.full((2,), 2.0))   # back after an error too


def test_check_average_names_the_setting():
    assert check_average(0) == 0.0 and check_average(0.999) == 0.999
    for bad in (-0.1, 1.0, 2, True, "0.9", float("nan"), None):
        with pytest.raises(ValueError, match="average must be 0"):
            check_average(bad)


@pytest.mark.filterwarnings("ignore:fit_hierarchy_encoder. the validation holds")
def test_fit_validates_the_weights_and_their_average_and_keeps_the_best(tiny):
    val = [("tabby", "cat"), ("rose", "flower")]
    train = [e for e in EDGES if e not in val]
    common = dict(base=str(tiny), epochs=3, batch_size=8, lr=2e-3, negatives=3, hard_negatives=2,
                  validation_edges=val, seed=1, validate_every=2)
    plain = fit_hierarchy_encoder(train, NAMES, **common)
    averaged = fit_hierarchy_encoder(train, NAMES, average=0.5, **common)
    raw = [h for h in averaged.config["history"] if h["averaged"] == 0.0]
    avg = [h for h in averaged.config["history"] if h["averaged"] == 1.0]
    assert len(raw) == len(avg) == len(plain.config["history"]) >= 2
    # the average is a read-out: the weights train exactly as without it
    assert [h["f1"] for h in raw] == [h["f1"] for h in plain.config["history"]]
    assert [h["step"] for h in avg] == [h["step"] for h in raw]
    assert averaged.metrics["val_f1"] == max(h["f1"] for h in averaged.config["history"])
    with pytest.raises(ValueError, match="average must be 0"):
        fit_hierarchy_encoder(train, NAMES, average=1.0, **common)
