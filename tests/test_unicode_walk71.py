"""A multilingual user's walk (71): a lone surrogate (``os.fsdecode`` of a name that is not UTF-8)
in metadata or an id is refused on the way in, naming the field; the command line writes to a
stdout that is not UTF-8 (cp1252: Windows' ``> out.txt``); zero-width characters are escapes in
human-readable output; an episodic memory's repr writes terminal controls as escapes."""

from __future__ import annotations

import csv
import io
import json
import os
import sys

import pytest
from test_cli_walk_outputs import run

from hypermem import HashingEmbedder, Memory
from hypermem.cli import main
from hypermem.store.shown_text import json_safe, shown

NAME = os.fsdecode(b"caf\xe9.txt")   # 'caf\udce9.txt': what os.listdir gives for a Latin-1 file name
SURROGATE = r"meta\['source'\] is not valid Unicode: surrogates not allowed at position 3 .*UTF-8 cannot store"


def memory(path=None):
    emb = HashingEmbedder(dim=32)
    return Memory(embedder=emb) if path is None else Memory.open(path, embedder=emb)


@pytest.mark.parametrize("durable", [False, True])
def test_a_lone_surrogate_in_meta_is_refused_naming_the_key(tmp_path, durable):
    mem = memory(tmp_path / "d.db" if durable else None)
    with pytest.raises(ValueError, match=SURROGATE) as err:
        mem.add("notes from a file", meta={"source": NAME})
    assert "os.fsencode(name).decode('utf-8', 'replace')" in str(err.value)
    with pytest.raises(ValueError, match=r"item #1: meta\['source'\] is not valid Unicode"):
        mem.add_many([{"text": "ok", "meta": {"source": "ok"}}, {"text": "x", "meta": {"source": NAME}}])
    with pytest.raises(ValueError, match=r"add\(\): the meta key 'caf\\udce9.txt' is not valid Unicode"):
        mem.add("x", meta={NAME: 1})
    with pytest.raises(ValueError, match=r"add\(\): in meta, 'files'\['names'\]\[1\] is not valid Unicode"):
        mem.add("x", meta={"files": {"names": ["a.txt", NAME]}})
    i = mem.add("fine", meta={"source": "café.txt", "tags": ["日本", "ü"]})   # valid non-ASCII: stored as it is
    with pytest.raises(ValueError, match=r"update\(.*\): meta\['source'\] is not valid Unicode"):
        mem.update(i, meta={"source": NAME})
    with pytest.raises(ValueError, match=r"update\(.*\): in meta, 'n'\[0\] is not valid Unicode"):
        mem.update(i, meta={"n": [NAME]})
    assert len(mem) == 1 and mem.get(i).meta == {"source": "café.txt", "tags": ["日本", "ü"]}
    if durable:
        mem.close()
    else:
        mem.save(tmp_path / "m.db")   # nothing stored that the file cannot hold
        assert Memory.load(tmp_path / "m.db").get(i).meta["tags"] == ["日本", "ü"]


@pytest.mark.parametrize("durable", [False, True])
def test_a_lone_surrogate_id_or_parent_is_refused_naming_the_field(tmp_path, durable):
    mem = memory(tmp_path / "d.db" if durable else None)
    p = mem.add("root", id="räume")
    with pytest.raises(ValueError, match=r"add\(\): id 'caf\\udce9.txt' is not valid Unicode: surrogates not allowed"):
        mem.add("x", id=NAME)
    with pytest.raises(ValueError, match=r"item #0: parent 'caf\\udce9.txt' is not valid Unicode"):
        mem.add_many([{"text": "x", "parent": NAME}])
    with pytest.raises(ValueError, match=r"touch\(\): id 'caf\\udce9.txt' is not valid Unicode"):
        mem.touch([p, NAME])
    assert list(mem.ids) == [p] and mem.get(p).access_count == 0
    if durable:
        mem.close()


def test_the_langchain_adapter_refuses_a_surrogate_id_and_meta(tmp_path):
    pytest.importorskip("langchain_core")
    from hypermem.integrations.langchain import HypermemVectorStore

    vs = HypermemVectorStore(memory=memory(tmp_path / "lc.db"))
    with pytest.raises(ValueError, match=r"item #0: id 'caf\\udce9.txt' is not valid Unicode"):
        vs.add_texts(["a"], ids=[NAME])
    with pytest.raises(ValueError, match=r"item #0: meta\['src'\] is not valid Unicode"):
        vs.add_texts(["a"], metadatas=[{"src": NAME}])
    assert len(vs.memory) == 0


@pytest.fixture
def tokyo(tmp_path):
    path = tmp_path / "m.db"
    with memory(path) as db:
        db.add("東京は日本の首都です 🗼", id="tokyo", meta={"city": "東京"})
    return path


def cp1252(monkeypatch):
    """Stdout as Python opens it for ``PYTHONIOENCODING=cp1252`` (or Windows' ``> out.txt``)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="cp1252", errors="strict", newline="\n")
    monkeypatch.setattr(sys, "stdout", out)
    return out


def written(out) -> bytes:
    out.flush()
    return out.buffer.getvalue()


def test_search_and_tree_write_escapes_to_a_stdout_that_is_not_utf8(monkeypatch, tokyo):
    out = cp1252(monkeypatch)
    assert main(["search", str(tokyo), "Tokyo", "-k", "1"]) == 0
    assert main(["tree", str(tokyo)]) == 0
    text = written(out).decode("cp1252")
    assert text.count("\\u6771\\u4eac\\u306f") == 2 and "[tokyo]" in text and "\\U0001f5fc" in text
    assert out.errors == "strict"   # main puts stdout back as it found it


def test_search_json_is_ascii_json_on_a_stdout_that_is_not_utf8(monkeypatch, tokyo):
    out = cp1252(monkeypatch)
    assert main(["search", str(tokyo), "Tokyo", "-k", "1", "--json"]) == 0
    data = written(out)
    assert data.isascii()
    hit = json.loads(data)[0]
    assert hit["text"] == "東京は日本の首都です 🗼" and hit["meta"] == {"city": "東京"}


def test_export_csv_to_a_stdout_that_is_not_utf8_writes_the_files_utf8(monkeypatch, tokyo, tmp_path):
    assert main(["export", str(tokyo), str(tmp_path / "x.csv")]) == 0
    out = cp1252(monkeypatch)
    assert main(["export", str(tokyo), "-", "--format", "csv"]) == 0
    data = written(out)
    assert data == (tmp_path / "x.csv").read_bytes()
    row = next(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    assert row["text"] == "東京は日本の首都です 🗼"


@pytest.mark.parametrize("hidden", ["\u200b", "\u2060", "\ufeff", "\u00ad", "\u200d", "\U000e0041"])
def test_zero_width_characters_are_escapes_in_search_and_tree(capsys, tmp_path, hidden):
    path = tmp_path / "m.db"
    with memory(path) as db:
        db.add("reset the password", id="admin")
        db.add("reset the password", id="admin" + hidden)
    code, out, _ = run(capsys, "search", path, "password", "-k", "2")
    assert code == 0
    escaped = repr(hidden)[1:-1]
    assert "[admin]" in out and f"[admin{escaped}]" in out and hidden not in out
    code, out, _ = run(capsys, "tree", path)
    assert code == 0 and f"[admin{escaped} " in out and hidden not in out
    code, out, _ = run(capsys, "search", path, "password", "-k", "2", "--json")
    assert hidden not in out and {h["id"] for h in json.loads(out)} == {"admin", "admin" + hidden}


def test_joiners_inside_a_word_or_an_emoji_and_a_flag_are_kept():
    persian = "می\u200cخواهم"   # ZWNJ shapes the word
    for text in (persian, "🐕\u200d🦺", "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f"):
        assert shown(text) == text
        assert json.loads(json_safe(json.dumps(text, ensure_ascii=False))) == text
    assert shown("a\u200db") == "a\\u200db" and shown("\u200c日本") == "\\u200c日本"
    assert json_safe('"x\U000e0041"') == '"x\\udb40\\udc41"' and json.loads('"x\\udb40\\udc41"') == "x\U000e0041"


def test_episodic_repr_writes_terminal_controls_as_escapes():
    from hypermem.episodic import MemoryStorage

    s = MemoryStorage(embedder=HashingEmbedder(), importance_threshold=0.1)
    m = s.instantiate('((Bob say-to.v Alice "hi\x1b[2J\x1b[31mpwned\u202e") ** E1)', importance=0.8)
    r = repr(m)
    assert "\x1b" not in r and "\u202e" not in r
    assert '"hi\\x1b[2J\\x1b[31mpwned\\u202e"' in r and r.startswith("EpisodicMemory((Bob say-to.v Alice")
