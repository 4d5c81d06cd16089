"""``torch.jit.script`` of the layers TorchScript cannot compile says so and names
``torch.compile`` (:mod:`hypermem.nn.scripting`), for the layer and for a model holding it;
the plain layers (``ParentVote``, ``CosineKeys``, ``PairReader``) still script."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hypermem import Memory
from hypermem.nn import (
    BallEncoder,
    CosineKeys,
    HyperbolicMemory,
    HyperbolicRAG,
    LatentRetrievalReader,
    PairReader,
    ParentVote,
)

pytestmark = pytest.mark.usefixtures("one_thread")

K = F.normalize(torch.randn(6, 4, generator=torch.Generator().manual_seed(0)), dim=1) * 0.5


def _rag():
    mem = Memory()
    root = mem.add("animals")
    for t in ["dogs are loyal", "cats purr", "parrots talk"]:
        mem.add(t, parent=root)
    return HyperbolicRAG(mem, torch.tensor([-1, 0, 0, 0]), feature_dim=8, k=2)


LAYERS = {
    "HyperbolicMemory": lambda: HyperbolicMemory(K),
    "BallEncoder": lambda: BallEncoder(8, 4),
    "HyperbolicRAG": _rag,
    "LatentRetrievalReader": lambda: LatentRetrievalReader(CosineKeys(K, values=torch.randn(6, 2)),
                                                           PairReader(4, 2, 3), k=2),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_scripting_a_layer_is_refused_naming_torch_compile(name):
    with pytest.raises(TypeError, match=f"{name} cannot be compiled by torch.jit.script.*torch.compile"):
        torch.jit.script(LAYERS[name]())


def test_scripting_a_model_that_holds_the_memory_is_refused_by_name():
    model = torch.nn.Sequential(BallEncoder(8, 4), HyperbolicMemory(K))
    with pytest.raises(TypeError, match="cannot be compiled by torch.jit.script.*torch.compile"):
        torch.jit.script(model)


def test_the_plain_layers_still_script():
    torch.jit.script(ParentVote(torch.tensor([-1, 0, 0])))
    torch.jit.script(CosineKeys(K))
    reader = PairReader(4, 2, 3)
    x, v = torch.randn(2, 4), torch.randn(2, 5, 2)
    assert torch.allclose(torch.jit.script(reader)(x, v), reader(x, v))
    with pytest.raises(ValueError, match="pass values"):
        reader(x)
