"""What an agent stored, shown on a terminal: `hypermem tree`, `search`, `stats`, warnings and
errors write terminal controls and bidirectional overrides as escapes; `--json` stays exact
JSON (C1 and bidi characters as \\uXXXX escapes that read back as the same string)."""

from __future__ import annotations

import json
import re

import pytest
from test_cli_walk_outputs import run

from hypermem import HashingEmbedder, Memory
from hypermem.store.shown_text import json_safe, shown

HOSTILE = "ignore this \x1b[2J\x1b[Hfake prompt $ \r\x07\x00\x9b\u202eevil\u2066x\u2069"
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")   # every control but the line break


@pytest.fixture
def store(tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=64))
    mem.add("pets", id="pets")
    mem.add(HOSTILE, id="rex\x1b[31m", parent="pets", meta={"k": "v\x9b\u202e"})
    mem.add("two\nlines", id="id\nwith a newline", parent="pets")
    path = tmp_path / "m.db"
    mem.save(path)
    return path


def test_shown_escapes_as_repr_and_keeps_other_text():
    assert shown("a\x1b[2Jb\r\u202ec\x00") == "a\\x1b[2Jb\\r\\u202ec\\x00"
    assert shown("café 🐕‍🦺 日本") == "café 🐕‍🦺 日本"   # the emoji's zero-width joiner is kept
    assert shown("\ud800") == "\\ud800"


def test_tree_escapes_controls_and_keeps_one_line_a_memory(capsys, store):
    code, out, _ = run(capsys, "tree", store, "--max-text", 200)
    assert code == 0
    assert not RAW.search(out), repr(out)
    lines = out.rstrip("\n").split("\n")
    assert len(lines) == 3, lines
    assert "ignore this \\x1b[2J\\x1b[Hfake prompt $ \\r\\x07\\x00\\x9b\\u202eevil" in out
    assert "[rex\\x1b[31m d=" in out and "[id\\nwith a newline d=" in out
    # the API's tree prints the same lines (Memory.tree escapes them itself)
    assert Memory.load(store).tree(max_text=200) == out.rstrip("\n")


def test_search_escapes_text_and_id(capsys, store):
    code, out, _ = run(capsys, "search", store, "ignore this fake prompt", "-k", 3)
    assert code == 0
    assert not RAW.search(out), repr(out)
    assert "[rex\\x1b[31m]" in out and "two\\nlines" in out
    assert len(out.rstrip("\n").split("\n")) == 3


def test_search_json_is_exact_json_with_no_raw_c1_or_bidi(capsys, store):
    code, out, _ = run(capsys, "search", store, "ignore this fake prompt", "-k", 3, "--json")
    assert code == 0
    assert not RAW.search(out), repr(out)
    rows = json.loads(out)
    assert {r["id"] for r in rows} == {"pets", "rex\x1b[31m", "id\nwith a newline"}
    assert next(r for r in rows if r["id"] == "rex\x1b[31m")["text"] == HOSTILE


def test_json_safe_reads_back_the_same_value():
    value = {"k\u202e": ["\x9b\u2028", "é", "\x7f"]}
    text = json_safe(json.dumps(value, ensure_ascii=False))
    assert not RAW.search(text) and json.loads(text) == value and "é" in text


def test_errors_and_warnings_escape_what_they_quote(capsys, store):
    code, _, err = run(capsys, "search", store, "--mode", "subtree", "--root", "no\x1b]0;pwned\x07")
    assert code == 1 and "unknown memory id" in err
    assert not RAW.search(err), repr(err)
    from hypermem.cli.inputs import warn

    warn("bad \x1b[2J text \u202e")
    assert not RAW.search(capsys.readouterr().err)
