"""Defects a tester found against the wheel: the MCP server's meta size limit, ``root`` refused
with ``mode="nearest"``, a long query's own message, ``~`` in ``--store``, the read-only folder
hint an MCP user can follow; filter messages and operands checked once per filter; "1 memory" in
the inspector and the CLI; ``NOTEBOOK_MAX_INLINE`` read at call time; the label callable's error."""

from __future__ import annotations

import os

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.cli import main
from hypermem.store import filters as F
from hypermem.store.filters import FilterError, compile_filter
from hypermem.viz import html as H

# --------------------------------------------------------------------------------- filters


def test_a_not_that_is_no_dict_names_its_path_without_a_stray_dot():
    with pytest.raises(FilterError, match=r"^filter \$not must be a dict, got list$"):
        compile_filter({"$not": [{"a": 1}]})
    with pytest.raises(FilterError, match=r"^filter \$or\[0\]\.\$not must be a dict, got int$"):
        compile_filter({"$or": [{"$not": 3}]})
    with pytest.raises(FilterError, match=r"for place\.room; "):
        compile_filter({"place": {"room": {"$bogus": 1}}})


@pytest.mark.parametrize("spec, words", [
    ({"tag": {"$exists": "yes"}}, r"\$exists for tag takes a bool \(True or False\), got str 'yes'"),
    ({"tag": {"$empty": 3}}, r"\$empty for tag takes a bool \(True or False\), got int 3"),
    ({"s": {"$text_match": 5}}, r"\$text_match for s takes a str, got int 5"),
    ({"s": {"$text_match_insensitive": None}}, r"\$text_match_insensitive for s takes a str, got NoneType"),
    ({"n": {"$gt": [1, 2]}}, r"\$gt for n compares numbers or strings .*got list \[1, 2\]"),
    ({"n": {"$lte": {"a": 1}}}, r"\$lte for n compares numbers or strings .*got dict"),
])
def test_an_operand_the_operator_cannot_use_is_refused_naming_both(spec, words):
    with pytest.raises(FilterError, match=words):
        compile_filter(spec)
    mem = Memory(embedder=HashingEmbedder(dim=32))
    mem.add("a note", meta={"tag": "x", "n": 2, "s": "hello"})
    with pytest.raises(ValueError, match=words):
        mem.search("note", filters=spec)


def test_operands_the_docs_promise_still_work():
    metas = [{"n": 2, "s": "Hello world", "t": "2025-03-01T00:00:00Z"}, {"n": 7, "tag": [], "t": "2026-01-01T00:00:00Z"}]

    def hits(spec):
        pred = compile_filter(spec)
        return [i for i, m in enumerate(metas) if pred(m)]
    assert hits({"n": {"$gt": 3}}) == [1]
    assert hits({"t": {"$gte": "2025-06-01"}}) == [1]              # ISO 8601 times compare as strings
    assert hits({"n": {"$gt": "abc"}}) == []                       # a number is never above a string (docs)
    assert hits({"tag": {"$empty": True}}) == [0, 1] and hits({"tag": {"$exists": False}}) == [0]
    assert hits({"s": {"$text_match_insensitive": "WORLD"}}) == [0]


def test_operands_are_checked_once_per_filter_not_per_row(monkeypatch):
    calls = []
    real = F._check_operand
    monkeypatch.setattr(F, "_check_operand", lambda *a: (calls.append(a), real(*a))[1])
    pred = compile_filter({"n": {"$gt": 1}, "tag": {"$exists": True}})
    assert len(calls) == 2
    assert [pred({"n": i, "tag": 1}) for i in range(100)].count(True) == 98
    assert len(calls) == 2


# --------------------------------------------------------------------------------- inspector and CLI


def test_one_memory_is_singular_in_the_page_title_and_the_cli(tmp_path, capsys):
    mem = Memory(embedder=HashingEmbedder(dim=32))
    mem.add("just one")
    assert "<title>hypermem: 1 memory</title>" in H.render_html(mem)
    mem.add("and two")
    assert "<title>hypermem: 2 memories</title>" in H.render_html(mem)
    one = Memory.open(tmp_path / "one.db", embedder=HashingEmbedder(dim=32))
    one.add("just one")
    one.close()
    assert main(["inspect", str(tmp_path / "one.db"), "-o", str(tmp_path / "one.html")]) == 0
    out = capsys.readouterr().out
    assert "(1 memory)" in out and "memories" not in out
    assert main(["export", str(tmp_path / "one.db"), str(tmp_path / "one.json")]) == 0
    assert "(1 memory, json)" in capsys.readouterr().out


def test_notebook_max_inline_is_read_when_the_memory_is_shown(monkeypatch):
    mem = Memory(embedder=HashingEmbedder(dim=32))
    for i in range(3):
        mem.add(f"memory {i}")
    assert mem._repr_html_().startswith("<iframe")
    monkeypatch.setattr(H, "NOTEBOOK_MAX_INLINE", 2)
    shown = mem._repr_html_()
    assert not shown.startswith("<iframe") and "more than 2 memories" in shown
    assert H.notebook_html(mem, max_inline=5).startswith("<iframe")       # an explicit value still wins


def test_a_label_that_returns_no_str_says_so_for_the_memory():
    mem = Memory(embedder=HashingEmbedder(dim=32))
    i = mem.add("a note")
    with pytest.raises(TypeError, match=rf"^label must return a str .*got NoneType for memory '{i}'$"):
        mem.inspect(None, label=lambda r: None)
    assert "a-note-label" in mem.inspect(None, label=lambda r: r.text.replace(" ", "-") + "-label")


# --------------------------------------------------------------------------------- MCP


mcp = pytest.importorskip("mcp")

from mcp_helpers import _call, _data, _error, db_fixture  # noqa: E402, F401

from hypermem.integrations import mcp_server  # noqa: E402
from hypermem.integrations.mcp_server import build_server, open_store  # noqa: E402


def test_a_meta_over_the_limit_is_refused_by_remember_and_update(db):
    big = {"blob": "x" * 40_000}

    async def script(c):
        err = _error(await c.call_tool("remember", {"text": "a note", "meta": big}))
        i = _data(await c.call_tool("remember", {"text": "a note", "meta": {"kind": "small"}}))["id"]
        err2 = _error(await c.call_tool("update", {"id": i, "meta": big}))
        return err, err2, i
    err, err2, i = _call(build_server(db), script)
    assert err.startswith("Error executing tool remember: meta is 40011 characters as JSON; this server takes at most 32000") and "\n" not in err
    assert err2.startswith("Error executing tool update: meta is 40011 characters as JSON")
    assert len(db) == 1 and db.get(i).meta == {"kind": "small"}

    async def small(c):
        return _error(await c.call_tool("remember", {"text": "b", "meta": {"a": "y" * 60}}))
    assert "at most 50" in _call(build_server(db, max_meta=50), small)


def test_recall_refuses_root_with_mode_nearest(db):
    async def script(c):
        i = _data(await c.call_tool("remember", {"text": "the house"}))["id"]
        err = _error(await c.call_tool("recall", {"query": "house", "root": i}))
        ok = _data(await c.call_tool("recall", {"query": "house", "mode": "subtree", "root": i}))
        return err, ok, i
    err, ok, i = _call(build_server(db), script)
    assert err.startswith("Error executing tool recall: mode='nearest' searches all memories and takes no root") and "subtree" in err
    assert [h["id"] for h in ok["results"]] == [i]


def test_a_long_query_gets_its_own_message(db):
    async def script(c):
        return _error(await c.call_tool("recall", {"query": "q" * 101}))
    err = _call(build_server(db, max_text=100), script)
    assert err.startswith("Error executing tool recall: query is 101 characters long; this server takes at most 100 (search with a shorter")
    assert "memories under one parent" not in err


def test_a_store_path_with_a_tilde_is_the_home_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    mem = open_store("~/agent.db", None)
    try:
        assert os.path.isfile(tmp_path / "agent.db") and not os.path.exists("~")
    finally:
        mem.close()
    assert mcp_server.choose_embedder("~/agent.db") is None                      # its own (hashing)


def test_a_read_only_folder_hint_is_one_an_mcp_user_can_follow(tmp_path, monkeypatch):
    import sqlite3

    from hypermem.store.backends import sqlite_open
    from hypermem.store.backends.durable import StorageError

    path = str(tmp_path / "agent.db")
    Memory.open(path, embedder=HashingEmbedder(dim=32)).close()

    class ReadOnly(sqlite3.OperationalError):
        sqlite_errorcode = 8          # SQLITE_READONLY: what opening for writes meets there

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **kw: False if str(p) == str(tmp_path) else real(p, m, **kw))
    said = sqlite_open.explain(ReadOnly("attempt to write a readonly database"), path)
    assert "read_only=True" in said                                               # what Python users read

    def refuse(*a, **kw):
        raise StorageError(said)
    monkeypatch.setattr(Memory, "open", staticmethod(refuse))
    with pytest.raises(StorageError) as info:
        open_store(path, None)
    text = str(info.value)
    assert "read_only=True" not in text and "\n" not in text
    assert "hypermem mcp writes to its store" in text and "make the folder writable" in text
    assert "serve the copy (--store COPY)" in text
