"""Walk 75 of the nn layers: ``to_memory`` exports a slot whose key is the origin of the ball (a
root), and a slot whose value is all zeros; a text that gives no direction is named by its slot."""

from __future__ import annotations

import pytest
import torch

from hypermem.embed import CallableEmbedder
from hypermem.nn import HyperbolicMemory

D = 8


def _keys() -> torch.Tensor:
    K = torch.zeros(3, D, dtype=torch.float64)  # slot 0: the origin
    K[1, 0], K[2, 1] = 0.3, 0.6
    return K


@pytest.mark.parametrize("values", [None, torch.ones(3, 2, dtype=torch.float64)])   # no value of the keys' dim
def test_a_key_at_the_origin_is_exported_there_and_scores_as_in_the_layer(values):
    layer = HyperbolicMemory(_keys(), values, ids=["root", "a", "b"])
    store = layer.to_memory(texts=["the root", "alpha", "beta"])
    assert store.ids == ["root", "a", "b"] and float(store.point("root").norm()) < 1e-100
    assert torch.allclose(store.points, _keys(), atol=1e-12)
    q = torch.tensor([[0.1, 0.2, 0, 0, 0, 0, 0, 0.05], [0, -0.4, 0.1, 0, 0, 0, 0, 0]], dtype=torch.float64)
    out = layer(q)
    for b in range(2):
        hits = {h.record.id: h.score for h in store.search(q[b], k=3, touch=False)}
        assert [hits[i] for i in layer.ids] == pytest.approx(out.scores[b].tolist(), abs=1e-9)


def test_a_zero_value_of_the_embedders_dimension_takes_the_keys_direction():
    V = torch.randn(3, D, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    V[1] = 0.0
    store = HyperbolicMemory(_keys(), V).to_memory()
    assert torch.allclose(store.points, _keys(), atol=1e-12)
    assert torch.allclose(store.embeddings[1], _keys()[1] / 0.3)   # the raw embedding: its key's direction
    assert torch.allclose(store.embeddings[2], V[2])


def test_an_origin_whose_text_gives_no_direction_is_named_by_its_slot():
    def emb(texts):
        return [[0.0] * D if t == "nothing" else [1.0] + [0.0] * (D - 1) for t in texts]

    layer = HyperbolicMemory(_keys(), ids=["r", "a", "b"])
    with pytest.raises(ValueError, match=r"slot #0 \(id 'r'\).*origin of the ball.*no direction.*texts="):
        layer.to_memory(embedder=CallableEmbedder(emb, dim=D), texts=["nothing", "x", "y"])


def test_under_the_shell_metric_the_origin_exports_too_with_its_texts_direction():
    store = HyperbolicMemory(_keys(), metric="shell").to_memory(texts=["the root", "alpha", "beta"])
    assert store.metric == "shell" and torch.allclose(store.points, _keys(), atol=1e-12)


def test_a_layer_below_the_hashing_embedders_dimension_is_told_to_pass_an_embedder():
    K = torch.zeros(2, 4, dtype=torch.float64)
    K[0, 0], K[1, 1] = 0.2, 0.5
    layer = HyperbolicMemory(K, ids=["a", "b"])
    with pytest.raises(ValueError, match=r"dimension 4, too few .*hashing embedder.*>= 8.*: pass embedder= "
                                         r"an embedder of dimension 4"):
        layer.to_memory()
    emb = CallableEmbedder(lambda texts: [[1.0, 0.0, 0.0, 0.0] for _ in texts], dim=4)
    store = layer.to_memory(embedder=emb)   # the way out the message names works
    assert store.ids == ["a", "b"] and torch.allclose(store.points, K, atol=1e-12)
