"""Every stored memory has a direction and a depth its point can hold, so every saved file loads.

Before: a text without words ("!!!", an emoji, "\\u200b") or an all-zero / huge embedding was
stored with the zero direction; save wrote it and both loaders refused the whole file ("not a
unit vector (norm 2)").  A base_depth or depth_step near 720 crashed every search, 400 dropped
deep memories from hyperbolic search, and a depth beyond the float64 margin was recorded for a
point that cannot be that deep.
"""

import json

import pytest
import torch

from hypermem import CallableEmbedder, HashingEmbedder, Memory
from hypermem.geometry import poincare as P
from hypermem.store.checks import max_depth
from hypermem.store.persistence import MemoryFileError

NO_WORDS = ["!!!", ".", "?", "--", "\U0001f600", "\u200b"]


def reloads(m, tmp_path):
    path = tmp_path / "m.db"
    m.save(path)
    for back in (Memory.load(path), Memory.from_json(m.to_json())):
        assert back.ids == m.ids
        assert torch.allclose(back.points, m.points)
    return back


# ------------------------------------------------------------------ texts without words
def test_hashing_gives_every_non_empty_text_a_direction():
    e = HashingEmbedder()
    X = e.embed(NO_WORDS + ["a !!! b", "a b", ""])
    assert torch.allclose(X[: len(NO_WORDS)].norm(dim=1), torch.ones(len(NO_WORDS), dtype=torch.float64))
    assert torch.equal(X[-3], X[-2])  # texts with words: their tokens alone, as before
    assert not X[-1].any()  # the empty text has nothing to hash
    assert torch.equal(e.embed(["!!!"]), e.embed(["!!!"]))  # deterministic
    assert not torch.equal(X[0], X[1])


@pytest.mark.parametrize("text", NO_WORDS)
def test_a_text_without_words_is_stored_and_loads(text, tmp_path):
    m = Memory()
    m.add("animals", id="a")
    m.add("dogs bark", id="d", parent="a")
    m.add(text, id="x")
    back = reloads(m, tmp_path)
    assert back.get("x").text == text


# ------------------------------------------------------------------ embeddings without a direction
def test_an_all_zero_embedding_is_refused_naming_the_item():
    m = Memory()
    m.add("animals", id="a")
    with pytest.raises(ValueError, match=r"item #1 \(text 'z'\): its embedding is all zeros"):
        m.add_many([{"text": "ok"}, {"text": "z", "embedding": [0.0] * m.dim}])
    assert m.ids == ["a"]


def test_an_embedder_giving_zeros_is_refused_at_add_add_many_and_update():
    def emb(texts):
        return [[0.0] * 8 if t == "empty" else [1.0] + [0.0] * 7 for t in texts]

    m = Memory(embedder=CallableEmbedder(emb, dim=8))
    m.add("fine", id="f")
    with pytest.raises(ValueError, match=r"add\(\) \(text 'empty'\): the embedder CallableEmbedder gave the zero"):
        m.add("empty")
    with pytest.raises(ValueError, match=r"item #2 \(text 'empty'\)"):
        m.add_many([{"text": "a"}, {"text": "b"}, {"text": "empty"}])
    with pytest.raises(ValueError, match=r"update\('f'\) \(text 'empty'\)"):
        m.update("f", text="empty")
    assert m.ids == ["f"] and m.get("f").text == "fine"


def test_the_hashing_message_says_it_found_no_word(monkeypatch):
    m = Memory()
    monkeypatch.setattr(m.embedder, "text_row", lambda text: torch.zeros(m.dim, dtype=torch.float64))
    with pytest.raises(ValueError, match="the hashing embedder found no word in its text"):
        m.add("!!!")


@pytest.mark.parametrize("scale", [1e155, 1e200, 1e300, 1e-170, 1e-300])
def test_huge_and_tiny_embeddings_get_their_direction(scale, tmp_path):
    m = Memory()
    m.add("animals", id="a")
    m.add_many([{"text": "big", "id": "big", "embedding": [scale] * m.dim}])
    u = m.state.direction[m.state.row["big"]]
    assert torch.allclose(u, torch.full_like(u, m.dim ** -0.5))
    reloads(m, tmp_path)


def test_a_point_at_the_origin_keeps_its_embeddings_direction(tmp_path):
    m = Memory()
    m.add_many([{"text": "centre", "id": "o", "point": [0.0] * m.dim}])
    assert m.depth("o") < 1e-100
    assert torch.allclose(m.state.direction[0], m.embedder.embed(["centre"])[0])
    reloads(m, tmp_path)


def test_the_loader_says_the_actual_norm_and_save_refuses_a_zero_direction(tmp_path):
    m = Memory()
    m.add("animals", id="a")
    doc = json.loads(m.to_json())
    doc["records"][0]["direction"] = [0.0] * m.dim
    with pytest.raises(MemoryFileError, match=r"memory 'a' is not a unit vector \(norm 0\)"):
        Memory.from_json(json.dumps(doc))
    m.state.direction[0] = 0.0  # as an older version stored a text without words
    with pytest.raises(ValueError, match=r"cannot save: the direction of memory 'a' is not a unit vector \(norm 0\)"):
        m.save(tmp_path / "m.db")
    assert not (tmp_path / "m.db").exists()
    with pytest.raises(ValueError, match="cannot save"):
        m.to_json()


# ------------------------------------------------------------------ depths a point can hold
def test_max_depth_is_the_float64_margin():
    assert max_depth(1.0) == pytest.approx(23.719, abs=1e-3)
    assert max_depth(4.0) == pytest.approx(max_depth(1.0) / 2)
    assert float(P.distance_to_origin(P.point_at(torch.ones(4, dtype=torch.float64), max_depth(1.0)))) \
        == pytest.approx(max_depth(1.0), rel=1e-6)


@pytest.mark.parametrize("kw", [{"base_depth": 720.0}, {"base_depth": 1e6}, {"depth_step": 400.0},
                                {"base_depth": 12.0, "curvature": 4.0}])
def test_depth_settings_beyond_the_bound_are_refused(kw, tmp_path):
    with pytest.raises(ValueError, match=r"(base_depth|depth_step) must be at most [\d.]+ \(the deepest radius"):
        Memory(**kw)
    m = Memory()
    m.add("animals")
    doc = json.loads(m.to_json())
    doc["config"].update(kw)
    with pytest.raises(MemoryFileError, match="must be at most"):
        Memory.from_json(json.dumps(doc))


def test_the_largest_settings_search_and_deep_levels_are_clamped(tmp_path):
    top = max_depth(1.0)
    m = Memory(base_depth=top, depth_step=top)
    prev = None
    for i in range(4):
        prev = m.add(f"note {i} about dogs", id=f"n{i}", parent=prev)
    assert all(m.depth(i) == pytest.approx(top) for i in m.ids)
    for metric in ("shell", "hyperbolic"):
        assert len(m.search("dogs", k=10, metric=metric)) == 4
    chain = Memory()
    prev = None
    for i in range(60):
        prev = chain.add(f"level {i}", id=f"l{i}", parent=prev)
    assert chain.depth("l59") == pytest.approx(top)
    assert chain.depth("l10") == pytest.approx(1.0 + 0.5 * 10)
    assert len(chain.search("level", k=100, metric="hyperbolic")) == 60
    with pytest.raises(ValueError, match="query_depth"):
        chain.search("level", metric="hyperbolic", query_depth=1000.0)
    reloads(chain, tmp_path)


def test_a_point_beyond_the_margin_is_stored_at_the_depth_it_holds(tmp_path):
    m = Memory()
    p = torch.zeros(m.dim, dtype=torch.float64)
    p[0] = 1 - 1e-15
    m.add_many([{"text": "edge", "id": "e", "point": p}])
    assert m.depth("e") == pytest.approx(max_depth(1.0))
    assert float(P.distance_to_origin(m.point("e"))) == pytest.approx(m.depth("e"), rel=1e-6)
    reloads(m, tmp_path)
