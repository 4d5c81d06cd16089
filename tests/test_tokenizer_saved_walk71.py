"""Walk 71: a store's lexical settings (``Lexical(tokenizer=words, k1=..., ...)``, docs/hybrid.md's
advice for text that is not English) survive save/load, to_json/from_json and Memory.open
(SQLite, PostgreSQL with and without the mirror); a custom tokenizer warns instead of being
dropped silently; files written before the key load with the default ``tokenize``."""

from __future__ import annotations

import json
import sqlite3
import warnings

import pytest

from hypermem import Memory
from hypermem.retrieval.bm25 import TOKENIZERS, tokenize, words
from hypermem.store import MemoryFileError
from hypermem.store.lexical import Lexical

TEXTS = ["Die Häuser sind alt", "the who played here", "a note about nothing"]


def my_tokens(text: str) -> list[str]:
    return text.lower().split()


def _store(lexical: Lexical | None = None) -> Memory:
    mem = Memory(hybrid=0.3)
    if lexical is not None:
        mem.searcher.lexical = lexical
    mem.add_many([{"text": t, "id": f"m{i}"} for i, t in enumerate(TEXTS)])
    return mem


def _settings(mem) -> tuple:
    lex = mem.searcher.lexical
    return lex.index.tokenizer, lex.index.k1, lex.index.b, lex.family, lex.neighbour, lex.families.tokenizer


WORDS = (words, 0.9, 0.5, 0.0, 0.25, words)


def _words_lexical() -> Lexical:
    return Lexical(tokenizer=words, k1=0.9, b=0.5, family=0.0, neighbour=0.25)


def test_registry_names_the_builtin_tokenizers():
    assert TOKENIZERS == {"tokenize": tokenize, "words": words}


def test_save_load_keeps_the_tokenizer_and_bm25_settings(tmp_path):
    mem = _store(_words_lexical())
    mem.save(tmp_path / "m.db")
    back = Memory.load(tmp_path / "m.db")
    assert _settings(back) == WORDS
    # it ranks by the words: "the who" is all English stop words, which tokenize drops
    assert back.search("the who", k=1)[0].id == "m1"
    assert mem.searcher.lexical.term(mem.state, "the who", 0.3).tolist() == \
        back.searcher.lexical.term(back.state, "the who", 0.3).tolist()
    with sqlite3.connect(tmp_path / "m.db") as con:
        stored = json.loads(con.execute("SELECT value FROM config WHERE key = 'lexical'").fetchone()[0])
    assert stored == {"tokenizer": "words", "k1": 0.9, "b": 0.5, "family": 0.0, "neighbour": 0.25}


def test_json_round_trip_keeps_the_settings(tmp_path):
    mem = _store(_words_lexical())
    assert _settings(Memory.from_json(mem.to_json())) == WORDS
    mem.to_json(tmp_path / "m.json", indent=1)
    assert _settings(Memory.from_json(tmp_path / "m.json")) == WORDS
    assert json.loads(mem.to_json())["config"]["lexical"]["tokenizer"] == "words"


def test_default_lexical_round_trips_as_tokenize(tmp_path):
    mem = _store()
    mem.save(tmp_path / "m.db")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = Memory.load(tmp_path / "m.db")
    assert _settings(back) == (tokenize, 1.2, 0.75, 1.0, 0.6, tokenize)


def test_files_without_the_key_load_with_the_default(tmp_path):
    mem = _store(_words_lexical())
    mem.save(tmp_path / "m.db")
    with sqlite3.connect(tmp_path / "m.db") as con:
        con.execute("DELETE FROM config WHERE key = 'lexical'")
    assert _settings(Memory.load(tmp_path / "m.db")) == (tokenize, 1.2, 0.75, 1.0, 0.6, tokenize)
    doc = json.loads(mem.to_json())
    del doc["config"]["lexical"]
    assert _settings(Memory.from_json(doc))[0] is tokenize


@pytest.mark.parametrize("bad, match", [
    ({"tokenizer": "snowball", "k1": 1.2, "b": 0.75, "family": 1.0, "neighbour": 0.6}, "unknown lexical tokenizer"),
    ({"tokenizer": "words", "k1": "1.2", "b": 0.75, "family": 1.0, "neighbour": 0.6}, "'k1' must be a number"),
    ({"tokenizer": "words", "k1": 1.2, "b": 2.0, "family": 1.0, "neighbour": 0.6}, "invalid lexical settings"),
    ({"tokenizer": "words", "k1": 1.2}, "lack"),
    ({"tokenizer": "words", "k1": 1.2, "b": 0.75, "family": 1.0, "neighbour": 0.6, "stem": "x"}, "unknown keys"),
    ("words", "must be an object"),
])
def test_a_bad_stored_spec_is_a_memory_file_error(bad, match):
    doc = json.loads(_store().to_json())
    doc["config"]["lexical"] = bad
    with pytest.raises(MemoryFileError, match=match):
        Memory.from_json(doc)


def test_custom_tokenizer_warns_at_save_and_at_load(tmp_path):
    mem = _store(Lexical(tokenizer=my_tokens, k1=2.0))
    with pytest.warns(UserWarning, match=r"my_tokens.*custom callable.*pass it again") as got:
        mem.save(tmp_path / "m.db")
    assert len([w for w in got if "my_tokens" in str(w.message)]) == 1  # once per save
    with pytest.warns(UserWarning, match=r"custom BM25 tokenizer .*my_tokens.*default tokenize"):
        back = Memory.load(tmp_path / "m.db")
    assert _settings(back)[:2] == (tokenize, 2.0)  # the other settings kept
    with pytest.warns(UserWarning, match="my_tokens"):
        text = mem.to_json()
    assert json.loads(text)["config"]["lexical"]["custom"] is True
    with pytest.warns(UserWarning, match="my_tokens"):
        Memory.from_json(text)


def test_open_sqlite_records_and_checks_the_lexical_settings(tmp_path):
    path = tmp_path / "s.db"
    with Memory.open(path, hybrid=0.3, lexical=_words_lexical()) as mem:
        assert _settings(mem) == WORDS
        mem.add("the who played here", id="w")
    with Memory.open(path) as again:   # the stored settings, not the default
        assert _settings(again) == WORDS
        assert again.search("the who", k=1)[0].id == "w"
    with Memory.open(path, lexical=_words_lexical()) as same:   # the same settings: fine
        assert _settings(same) == WORDS
    with pytest.raises(ValueError, match="created with the lexical tokenizer='words'; cannot open it with "
                                         "tokenizer='tokenize'"):
        Memory.open(path, lexical=Lexical())
    with pytest.raises(ValueError, match="k1=0.9; cannot open it with k1=1.2"):
        Memory.open(path, lexical=Lexical(tokenizer=words))
    with pytest.raises(TypeError, match="lexical must be"):
        Memory.open(tmp_path / "new.db", lexical=words)
    assert not (tmp_path / "new.db").exists()
    with Memory.open(path, read_only=True) as ro:
        assert _settings(ro) == WORDS


def test_open_with_a_custom_tokenizer(tmp_path):
    path = tmp_path / "c.db"
    with pytest.warns(UserWarning, match="my_tokens"):
        Memory.open(path, lexical=Lexical(tokenizer=my_tokens)).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Memory.open(path, lexical=Lexical(tokenizer=my_tokens)) as mem:   # passed again: no warning
            assert mem.searcher.lexical.index.tokenizer is my_tokens
    with pytest.warns(UserWarning, match="custom BM25 tokenizer .*my_tokens"):
        with Memory.open(path) as mem:
            assert mem.searcher.lexical.index.tokenizer is tokenize
    with pytest.raises(ValueError, match="tokenizer="):
        Memory.open(path, lexical=Lexical(tokenizer=words))


def test_durable_snapshot_and_copy_keep_the_settings(tmp_path):
    with Memory.open(tmp_path / "s.db", lexical=_words_lexical()) as mem:
        mem.add("Die Häuser sind alt")
        mem.save(tmp_path / "snap.db")
        text = mem.to_json()
    assert _settings(Memory.load(tmp_path / "snap.db")) == WORDS
    assert _settings(Memory.from_json(text)) == WORDS


def test_postgres_keeps_the_lexical_settings(pg_url):
    with Memory.open(pg_url, hybrid=0.3, lexical=_words_lexical()) as mem:
        mem.add("the who played here", id="w")
    with Memory.open(pg_url) as again:
        assert _settings(again) == WORDS
    with pytest.raises(ValueError, match="tokenizer='words'; cannot open it with tokenizer='tokenize'"):
        Memory.open(pg_url, lexical=Lexical())
    server = Memory.open(pg_url, mirror=False)   # no mirror: reads the same stored settings
    server.close()
    with pytest.raises(ValueError, match="cannot open it with tokenizer='tokenize'"):
        Memory.open(pg_url, mirror=False, lexical=Lexical())


def test_postgres_without_mirror_records_the_settings_it_creates(pg_url):
    Memory.open(pg_url, mirror=False, lexical=_words_lexical()).close()
    with Memory.open(pg_url) as mem:
        assert _settings(mem) == WORDS


def test_lexical_refuses_settings_json_cannot_hold():
    with pytest.raises(ValueError, match="k1 must be a finite number"):
        Lexical(k1=float("inf"))
    with pytest.raises(ValueError, match="b must be in"):
        Lexical(b=1.5)


def test_durable_copy_of_a_snapshot_keeps_the_settings(tmp_path):
    # the way `hypermem mcp --store` and `hypermem import --durable` make a served store of a snapshot
    from hypermem.integrations._common import durable_copy

    snap = _store(_words_lexical())
    snap.add("Die Häuser sind alt")
    with durable_copy(snap, tmp_path / "served.db") as served:
        assert _settings(served) == WORDS
    with Memory.open(tmp_path / "served.db") as back:
        assert _settings(back) == WORDS
