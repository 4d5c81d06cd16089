"""Walk 74 (hygiene): a fit leaves its caller's torch state alone -- the global generators'
streams and the thread count -- and warns when its validation is too small to choose a threshold."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.hierarchy import (  # noqa: E402
    encoder_training,
    fit_hierarchy_encoder,
    fit_placement_reranker,
)
from hypermem.hierarchy.encoder_inputs import MIN_VALIDATION_PAIRS  # noqa: E402

VAL = EDGES[:MIN_VALIDATION_PAIRS]   # enough pairs: no warning about the validation's size


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(tiny_model_folder(tmp_path_factory.mktemp("tiny")))


@pytest.fixture
def two_threads():
    kept = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(kept)


def _stream(seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.rand(4)


def test_the_encoder_fit_keeps_the_callers_stream_and_threads_and_its_own_determinism(tiny, two_threads):
    models = []
    for app_seed in (11, 12):
        want = _stream(app_seed)
        torch.manual_seed(app_seed)
        enc = fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=2, batch_size=8, negatives=2, seed=3,
                                    validation_edges=VAL, threads=1, progress=False)
        assert torch.equal(torch.rand(4), want)          # the caller's stream goes on where it was
        assert torch.get_num_threads() == 2              # threads=1 was the fit's only
        models.append(enc.model.state_dict())
    # the same seed gives the same model, whatever the caller drew before
    assert all(torch.equal(models[0][k], models[1][k]) for k in models[0])


def test_a_fit_that_fails_inside_still_restores_the_callers_state(tiny, two_threads, monkeypatch):
    def broken(*args, **kwargs):
        torch.rand(100)   # a draw inside the fit
        raise RuntimeError("the base does not load")

    monkeypatch.setattr(encoder_training.HierarchyEncoder, "from_pretrained", broken)
    want = _stream(5)
    torch.manual_seed(5)
    with pytest.raises(RuntimeError, match="does not load"):
        fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=1, validation_edges=VAL, threads=1)
    assert torch.equal(torch.rand(4), want) and torch.get_num_threads() == 2


def test_the_reranker_fit_keeps_the_callers_stream(tiny, tmp_path):
    edges = [(f"{k}:{c}", k) for k, cs in {"dog": "abc", "tree": "abc"}.items() for c in cs] + \
        [("dog", "thing"), ("tree", "thing")]
    names = {e: e.replace(":", " ") for pair in edges for e in pair}
    gen = torch.Generator().manual_seed(0)
    vectors = {i: torch.randn(8, generator=gen) for i in names}
    want = _stream(7)
    torch.manual_seed(7)
    rr = fit_placement_reranker(edges, names, vectors, base=tiny, epochs=1, group=4, negatives=2, neighbours=4,
                                progress=False)
    assert rr.config["steps"] >= 1
    assert torch.equal(torch.rand(4), want)


def test_a_validation_of_few_pairs_warns_at_the_callers_line_naming_the_remedy(tiny):
    with pytest.warns(UserWarning, match=r"the validation holds 1 positive pair\(s\) \(5% of edges held out, 31 "
                                         r"left to train on\).*pass validation_edges= with 20 or more") as got:
        enc = fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=1, batch_size=8, negatives=2)
    assert enc.threshold is not None
    assert [w.filename for w in got if "validation holds" in str(w.message)] == [__file__]
    with pytest.warns(UserWarning, match=r"holds 3 positive pair\(s\) \(validation_edges, or val_size\)"):
        fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=1, batch_size=8, negatives=2,
                              validation_edges=VAL[:3])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)   # 20 pairs: nothing to say
        fit_hierarchy_encoder(EDGES, NAMES, base=tiny, max_steps=1, batch_size=8, negatives=2, validation_edges=VAL)
