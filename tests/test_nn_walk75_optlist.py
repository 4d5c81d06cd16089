"""``append`` / ``remove`` with every optimizer of a model (``rag.optimizers()``: a dense one for the
temperature beside a sparse one for the keys): the one that holds the keys follows the write, the
other is skipped; an optimizer that holds nothing of the memory is still refused."""
import pytest
import torch

from hypermem import Memory
from hypermem.nn import HyperbolicRAG


def _rag():
    store = Memory()
    a = store.add("animals")
    for t in ["dogs are loyal", "cats purr", "parrots talk"]:
        store.add(t, parent=a)
    return HyperbolicRAG(store, torch.tensor([-1, 0, 0, 0]), store.embedder.dim)


def test_append_and_remove_take_the_models_optimizers_as_a_list():
    rag = _rag()
    opts = rag.optimizers(lr=1e-2)
    assert len(opts) == 2
    mem = rag.memory
    n = mem.keys.shape[0]
    values = None if mem.values is None else mem.values.detach()[:1]
    mem.append(mem.keys.detach()[:1] * 0.5, values, optimizer=opts)
    assert mem.keys.shape[0] == n + 1
    mem.remove([0], optimizer=opts)
    assert mem.keys.shape[0] == n


def test_an_optimizer_over_other_parameters_alone_is_still_refused():
    rag = _rag()
    mem = rag.memory
    other = torch.optim.SGD([torch.nn.Parameter(torch.zeros(3))], lr=0.1)
    values = None if mem.values is None else mem.values.detach()[:1]
    with pytest.raises(ValueError, match="holds neither the keys nor the values"):
        mem.append(mem.keys.detach()[:1] * 0.5, values, optimizer=[other])
    with pytest.raises(ValueError, match="holds neither the keys nor the values"):
        mem.append(mem.keys.detach()[:1] * 0.5, values, optimizer=other)
