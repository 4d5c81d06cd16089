"""Frozen lower layers computed once (hypermem.hierarchy.encoder_prefix): the cached path gives
the full model's points and gradients, trains only the upper layers, and refuses bad settings."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.embed import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy import fit_hierarchy_encoder  # noqa: E402
from hypermem.hierarchy.encoder_prefix import (  # noqa: E402
    FrozenPrefix,
    freeze_lower_layers,
    resolve_frozen_layers,
    transformer_layers,
)
from hypermem.hierarchy.encoder_step import TokenCache  # noqa: E402

TEXTS = sorted(NAMES.values()) + ["a very long descriptive phrase about a small domestic animal that purrs"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


def _encoder(tiny, geometry="poincare", dim=None):
    torch.manual_seed(0)
    return HierarchyEncoder.from_pretrained(str(tiny), geometry, dim=dim)


@pytest.mark.parametrize("geometry,dim", [("poincare", None), ("euclidean", None), ("poincare", 6)])
def test_cached_points_and_gradients_equal_the_full_model(tiny, geometry, dim):
    enc = _encoder(tiny, geometry, dim)
    tokens = TokenCache(enc.model.tokenizer, TEXTS, 16)
    assert len({len(s) for s in tokens.ids}) > 2           # texts of several lengths share chunks
    rows = [len(TEXTS) - 1, 3, 0, 7, 3, 12]                 # unsorted, a repeat, the long one first
    enc.model.eval()                                        # no dropout: both paths are deterministic
    full = tokens.points(enc, rows)
    (full * torch.linspace(-1, 1, full.shape[1])).sum().backward()
    upper = {n: p.grad.clone() for n, p in enc.model.named_parameters() if ".layer.1." in n or "linear" in n}
    assert any("linear" in n for n in upper) == (dim is not None)   # the head trains too
    enc.model.zero_grad(set_to_none=True)

    prefix = FrozenPrefix(enc, tokens, 1, chunk=4)
    cached = prefix.points(enc, rows, chunk=3)
    assert cached.shape == full.shape
    assert torch.allclose(cached, full.detach(), atol=1e-5)
    assert torch.allclose(cached, enc.encode([TEXTS[r] for r in rows]), atol=1e-5)   # inference runs every layer
    (cached * torch.linspace(-1, 1, cached.shape[1])).sum().backward()
    for name, p in enc.model.named_parameters():
        if name in upper:
            assert torch.allclose(p.grad, upper[name], atol=1e-5, rtol=1e-4), name
        else:          # the embeddings and layer 0 take no gradient (nor BERT's unused pooler)
            assert p.grad is None and (not p.requires_grad or ".pooler." in name), name


def test_fit_with_a_frozen_layer_trains_only_the_upper_one(tiny, tmp_path):
    enc = _encoder(tiny)
    before = {n: p.detach().clone() for n, p in enc.model.named_parameters()}
    trained = fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=3, batch_size=8, lr=5e-3, frozen_layers=1,
                                    validate_every=4, seed=0, out=str(tmp_path / "enc"))
    assert trained.config["frozen_layers"] == 1 and trained.config["steps"] > 0
    after = dict(trained.model.named_parameters())
    frozen = [n for n in before if "embeddings" in n or ".layer.0." in n]
    moved = [n for n in before if ".layer.1." in n and not torch.equal(before[n], after[n].detach())]
    assert frozen and all(torch.equal(before[n], after[n].detach()) for n in frozen)
    assert moved                                            # the upper layer trained
    back = HierarchyEncoder.load(tmp_path / "enc")          # a whole model, loaded like any other
    assert torch.allclose(back.encode(["dog", "oak"]), trained.encode(["dog", "oak"]), atol=1e-6)


def test_bad_frozen_layers_are_refused(tiny):
    enc = _encoder(tiny)
    assert transformer_layers(enc) == 2
    for bad in (2, 5, -1, 1.5, True):
        with pytest.raises(ValueError, match="frozen_layers must be an integer from 0 to 1"):
            freeze_lower_layers(enc, bad)
    assert all(p.requires_grad for p in enc.model.parameters())   # nothing frozen by a refused call
    with pytest.raises(ValueError, match="frozen_layers must be"):
        fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=1, batch_size=8, frozen_layers=2)


def test_a_base_without_bert_layers_is_refused_by_name(tiny):
    enc = _encoder(tiny)

    class Plain(torch.nn.Module):
        pass

    enc.model[0].model = Plain()
    with pytest.raises(ValueError, match="BERT-style base.*Plain"):
        transformer_layers(enc)
    assert resolve_frozen_layers(enc, None) == 0          # the default trains every layer of such a base
    with pytest.raises(ValueError, match="BERT-style base.*Plain"):
        freeze_lower_layers(enc, 1)


def test_the_default_freezes_all_but_the_last_two_layers(tiny, tmp_path):
    assert resolve_frozen_layers(_encoder(tiny), None) == 0   # a base of two layers trains both
    tiny = tiny_model_folder(tmp_path, layers=3)
    enc = _encoder(tiny)
    assert resolve_frozen_layers(enc, None) == 1 and resolve_frozen_layers(enc, 0) == 0
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="frozen_layers must be None or an integer"):
            resolve_frozen_layers(enc, bad)
    trained = fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=1, batch_size=8, validate_every=100)
    assert trained.config["frozen_layers"] == 1 and trained.config["lr"] == 3e-4
    full = fit_hierarchy_encoder(EDGES, NAMES, base=str(tiny), epochs=1, batch_size=8, validate_every=100,
                                 frozen_layers=0)
    assert full.config["frozen_layers"] == 0
    assert not torch.equal(full.model[0].auto_model.embeddings.word_embeddings.weight,
                           trained.model[0].auto_model.embeddings.word_embeddings.weight)   # 0: every layer trains
