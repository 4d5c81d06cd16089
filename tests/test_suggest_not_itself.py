"""A text is never its own parent: a stored memory (or an earlier item of the batch) whose text is
the query's, exactly, is no candidate of ``suggest_parents``, the root-free ancestors search or
``parent="auto"``; it still votes for its ancestors (where the same text was filed)."""

from __future__ import annotations

import pytest
import torch

from hypermem import Memory
from hypermem.embed import HashingEmbedder

TEXTS = ["Rust source code, a text file format", "text file format", "source code", "a file format",
         "Python source code", "image file format", "audio file format", "video file format"]
RUST = TEXTS[0]


@pytest.fixture(scope="module")
def enc(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import tiny_model_folder

    from hypermem.embed import HierarchyEncoder

    torch.manual_seed(0)
    e = HierarchyEncoder.from_pretrained(str(tiny_model_folder(tmp_path_factory.mktemp("tiny"))), "poincare")
    e.threshold = -1e30   # attach to the best candidate, whatever its score
    return e


def flat(enc) -> Memory:
    m = Memory(embedder=enc)
    m.add_many([{"text": t, "id": f"m{j}"} for j, t in enumerate(TEXTS)])
    return m


def test_the_pair_score_never_suggests_the_memory_of_the_same_text(enc):
    m = flat(enc)
    assert m.suggester.rank([RUST], 3, by="subsumption", parents=False)   # scored at all
    for got in (m.suggest_parents(RUST, k=len(TEXTS)), m.search(RUST, k=len(TEXTS), mode="ancestors"),
                m.suggest_parents(RUST, k=3, use_index=True)):
        assert "m0" not in [h.id for h in got]
    assert len(m.suggest_parents(RUST, k=len(TEXTS))) == len(TEXTS) - 1      # the others, all of them
    assert len(m.suggest_parents(RUST + " ", k=len(TEXTS))) == len(TEXTS)   # only the exact text
    new = m.add(RUST, parent="auto")
    assert m.get(new).parent_id is not None and m.get(new).parent_id != "m0"
    assert "m0" not in [s["id"] for s in m.get(new).meta["auto_parent"]["suggested"]]


def test_an_earlier_batch_item_of_the_same_text_is_no_parent(enc):
    m = Memory(embedder=enc)
    ids = m.add_many([{"text": t, "parent": "auto"} for t in ["text file format", RUST, RUST]])
    assert m.get(ids[2]).parent_id != ids[1]
    assert ids[1] not in [s["id"] for s in m.get(ids[2]).meta["auto_parent"]["suggested"]]


def test_the_vote_lets_the_same_text_vote_for_its_parent_but_not_be_one():
    m = Memory(embedder=HashingEmbedder(dim=64))
    m.add_many([{"text": "file format", "id": "fmt"}, {"text": RUST, "id": "rust", "parent": "fmt"},
                {"text": "image file format", "id": "img", "parent": "fmt"}])
    got = [h.id for h in m.suggest_parents(RUST, k=3, by="vote")]
    assert "rust" not in got and got[0] == "fmt"
    assert "rust" not in [h.id for h in m.search(RUST, k=3, mode="ancestors")]
    new = m.add(RUST, parent="auto")
    assert m.get(new).parent_id == "fmt"
    ids = m.add_many([{"text": "sound file format", "parent": "auto"}, {"text": "sound file format", "parent": "auto"}])
    assert m.get(ids[1]).parent_id != ids[0]
    assert ids[0] not in [s["id"] for s in m.get(ids[1]).meta["auto_parent"]["suggested"]]
