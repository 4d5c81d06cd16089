"""`hypermem search --filter JSON --valid-only`: the metadata filter and the validity window of
`Memory.search` from the command line; a bad filter is an argument error naming it (status 2)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from test_cli_walk_outputs import run

from hypermem import HashingEmbedder, Memory


@pytest.fixture
def store(tmp_path):
    now = datetime.now(timezone.utc)
    m = Memory(embedder=HashingEmbedder())
    m.add("the dog was sick", id="a", meta={"user": "u1", "n": 1})
    m.add("the dog is fine", id="b", meta={"user": "u2", "n": 5}, valid_until=now - timedelta(days=1))
    m.add("the dog ate", id="c", meta={"user": "u2", "n": 9})
    m.save(tmp_path / "n.db")
    return str(tmp_path / "n.db")


def ids(out: str) -> list[str]:
    return [line.rsplit("[", 1)[1].rstrip("]") for line in out.splitlines() if line.strip()]


def test_filter_and_valid_only(store, capsys):
    assert sorted(ids(run(capsys, "search", store, "dog", "--filter", '{"user": "u2"}')[1])) == ["b", "c"]
    assert ids(run(capsys, "search", store, "dog", "--filter", '{"n": {"$gt": 3}}', "--valid-only")[1]) == ["c"]
    assert sorted(ids(run(capsys, "search", store, "dog", "--valid-only")[1])) == ["a", "c"]


@pytest.mark.parametrize("bad,words", [('{"user": ', "not JSON"), ("[1]", "JSON object"),
                                       ('{"n": {"$gtx": 1}}', "unknown filter operator '$gtx'")])
def test_a_bad_filter_is_an_argument_error(store, capsys, bad, words):
    code, _, err = run(capsys, "search", store, "dog", "--filter", bad)
    assert code == 2 and err.strip().splitlines()[-1].startswith("hypermem search: error: argument --filter:")
    assert words in err


def test_which_stores_are_searched_with_minilm_one_rule():
    """`hypermem search` and `hypermem mcp` share one rule (embed.spec.searches_with_minilm)."""
    from hypermem.embed.spec import MINILM, searches_with_minilm

    assert searches_with_minilm({"type": "SentenceTransformerEmbedder", "dim": 384, "model": MINILM})
    assert searches_with_minilm({"type": "SentenceTransformerEmbedder", "dim": 384, "custom": True})   # older record
    assert not searches_with_minilm({"type": "SentenceTransformerEmbedder", "dim": 384, "model": "another-model"})
    assert not searches_with_minilm({"type": "SentenceTransformerEmbedder", "dim": 768})
    assert not searches_with_minilm({"type": "hashing", "dim": 384}) and not searches_with_minilm(None)
