"""The adapters' upsert (``integrations._common.upsert``) checks a replacement's parent before
anything changes: an unknown parent leaves the stored memory as it was."""

from __future__ import annotations

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C


def test_an_unknown_parent_of_a_replacement_changes_nothing():
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add("a", id="a", meta={"k": 1})
    with pytest.raises(KeyError, match="unknown memory id 'zz'"):
        C.upsert(m, [{"id": "b", "text": "b"}, {"id": "a", "text": "a2", "parent": "zz"}])
    assert m.ids == ["a"] and m.get("a").text == "a" and m.get("a").meta == {"k": 1}


def test_a_replacement_may_name_a_parent_of_the_same_call():
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add("a", id="a")
    assert C.upsert(m, [{"id": "a", "text": "a2", "parent": "p"}, {"id": "p", "text": "the parent"}]) == ["a", "p"]
    assert m.parent("a") == "p" and m.get("a").text == "a2"
