"""The MCP server as agents met it (hypermem.integrations.mcp_server): other processes' writes
seen by every tool, expired memories left out, a busy store answered at once, out-of-range times
and crashes as one-line tool errors, text limits, the store's warnings returned, schemas that
say their limits and refuse unknown arguments, signals, stateless HTTP, start-up errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

pytest.importorskip("mcp")


from mcp_helpers import _call, _data, _error, db_fixture  # noqa: E402, F401

from hypermem import HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations.mcp_server import build_server  # noqa: E402


def test_every_tool_sees_what_another_process_added_or_removed(db, tmp_path):
    db.add("temporary note", id="tmp")
    app = build_server(db)

    async def script(c):
        await c.call_tool("list_recent", {"n": 5})
        with Memory.open(tmp_path / "agent.db") as other:         # another process's handle
            other.add("added elsewhere", id="new")
            other.remove("tmp")
        recent = [r["id"] for r in _data(await c.call_tool("list_recent", {"n": 5}))["results"]]
        tree = _data(await c.call_tool("recall_structure", {"id": "new"}))
        child = _data(await c.call_tool("remember", {"text": "under it", "parent": "new"}))
        changed = _data(await c.call_tool("update", {"id": "new", "meta": {"seen": True}}))
        gone = _data(await c.call_tool("forget", {"id": child["id"]}))
        return recent, tree, changed, gone

    recent, tree, changed, gone = _call(app, script)
    assert recent == ["new"] and tree["total"] == 1 and changed["meta"] == {"seen": True} and len(gone["removed"]) == 1


def test_recall_leaves_out_expired_memories_unless_asked(db):
    async def script(c):
        old = _data(await c.call_tool("remember", {"text": "the user lives in Berlin",
                                                   "valid_until": "2020-01-01T00:00:00Z"}))["id"]
        new = _data(await c.call_tool("remember", {"text": "the user lives in Lisbon"}))["id"]
        now = _data(await c.call_tool("recall", {"query": "where does the user live", "k": 5}))["results"]
        both = _data(await c.call_tool("recall", {"query": "where does the user live", "k": 5,
                                                  "include_expired": True}))["results"]
        cleared = _data(await c.call_tool("update", {"id": old, "valid_until": "never"}))
        back = _data(await c.call_tool("recall", {"query": "where does the user live", "k": 5}))["results"]
        return old, new, now, both, cleared, back

    old, new, now, both, cleared, back = _call(build_server(db), script)
    assert [h["id"] for h in now] == [new]                          # a memory with no window stays
    assert {h["id"] for h in both} == {old, new}
    assert "valid_until" not in cleared and {h["id"] for h in back} == {old, new}


@pytest.mark.parametrize("tool, args, name", [
    ("recall", {"query": "x", "at_time": "9999-12-31T23:59:59-12:00"}, "at_time"),
    ("remember", {"text": "x", "valid_until": "0001-01-01T00:00:00+14:00"}, "valid_until"),
    ("update", {"id": "a", "valid_until": "0001-01-01T00:00:00+14:00"}, "valid_until"),
])
def test_out_of_range_times_are_tool_errors_naming_the_argument(db, tool, args, name):
    db.add("a memory", id="a")

    async def script(c):
        return await c.call_tool(tool, args)

    text = _error(_call(build_server(db), script))
    assert f": {name} is out of range" in text and "\n" not in text


def test_an_unexpected_failure_is_a_one_line_tool_error(db, caplog):
    db.add("the kitchen", id="kitchen")

    def broken(memory, text):
        raise RuntimeError("boom\nsecond line")

    async def script(c):
        return await c.call_tool("remember", {"text": "a drawer", "parent": "auto"})

    text = _error(_call(build_server(db, auto_parent=broken), script))
    assert text == "remember failed unexpectedly (RuntimeError: boom)"
    mine = [r for r in caplog.records if r.name == "hypermem.mcp"]
    assert len(mine) == 1 and mine[0].exc_info is None


def test_a_write_waiting_on_another_process_answers_busy_and_reads_go_on(db, tmp_path):
    db.add("a memory", id="a")
    holder = sqlite3.connect(tmp_path / "agent.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")                                # another process writes
    try:
        async def script(c):
            t0 = time.monotonic()
            busy = await c.call_tool("remember", {"text": "blocked"})
            waited = time.monotonic() - t0
            read = await c.call_tool("recall", {"query": "memory", "k": 1})
            return busy, waited, read

        busy, waited, read = _call(build_server(db, write_wait=0.3), script)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    text = _error(busy)
    assert ": store busy" in text and "retry" in text and str(tmp_path) not in text and "touch=" not in text
    assert waited < 10 and _data(read)["results"][0]["id"] == "a"
    assert db.storage.con.execute("PRAGMA busy_timeout").fetchone()[0] == 60000   # restored for others


def test_text_limits_and_invisible_text(db):
    db.add("x" * 5000, id="long")
    app = build_server(db, max_text=100)

    async def script(c):
        big = await c.call_tool("remember", {"text": "y" * 101})
        blank = [await c.call_tool("remember", {"text": t}) for t in ("\u0000", "\u200b\u200b", " \u2028 ")]
        got = _data(await c.call_tool("list_recent", {"n": 1}))["results"][0]
        return big, blank, got

    big, blank, got = _call(app, script)
    assert "at most 100" in _error(big)
    assert all("blank" in _error(b) for b in blank) and len(db) == 1
    assert len(got["text"]) == 2000 and got["truncated"] == 5000


def test_the_stores_warnings_come_back_with_the_result(db):
    db.add("a pet", meta={"kind": "pet"})

    async def script(c):
        return [_data(await c.call_tool("recall", {"query": "pet", "filters": {"kidn": "pet"}})) for _ in range(2)]

    for got in _call(build_server(db), script):                      # every time, not once per store
        assert got["results"] == [] and any("'kidn'" in w and "misspelled" in w for w in got["warnings"])


def test_schemas_state_limits_and_unknown_arguments_are_refused(db):
    db.add("a memory", id="a")

    async def script(c):
        tools = {t.name: t.input_schema for t in (await c.list_tools()).tools}
        extra = await c.call_tool("update", {"id": "a", "text": "moved?", "priority": "x"})
        bogus = await c.call_tool("remember", {"text": "x", "bogus": 1})
        bad = await c.call_tool("recall", {"query": "x", "k": "many"})
        return tools, extra, bogus, bad

    tools, extra, bogus, bad = _call(build_server(db), script)
    recall = tools["recall"]["properties"]
    assert (recall["k"]["minimum"], recall["k"]["maximum"]) == (1, 200) and "cone" in recall["mode"]["enum"]
    assert "UTC" in recall["at_time"]["description"] and recall["query"]["description"]
    assert tools["list_recent"]["properties"]["n"]["maximum"] == 2000
    assert tools["recall_structure"]["properties"]["limit"]["maximum"] == 2000
    assert all(s["additionalProperties"] is False for s in tools.values())
    assert "'priority'" in _error(extra) and db.get("a").text == "a memory"
    assert "'bogus'" in _error(bogus) and len(db) == 1
    assert "k:" in _error(bad) and "pydantic.dev" not in _error(bad)


def test_auto_placement_details_are_short_in_results(db):
    db.add("the kitchen", id="kitchen")
    db.add("a kitchen table", parent="kitchen")

    async def script(c):
        i = _data(await c.call_tool("remember", {"text": "a kitchen chair", "parent": "auto"}))["id"]
        return i, _data(await c.call_tool("list_recent", {"n": 1}))["results"][0]

    i, got = _call(build_server(db), script)
    assert got["id"] == i and set(got["meta"]["auto_parent"]) <= {"parent", "score", "by"}
    assert "suggested" in db.get(i).meta["auto_parent"]               # the store keeps the details


def test_http_is_stateless(db, monkeypatch):
    from mcp.server import MCPServer

    from hypermem.integrations import mcp_server

    seen = {}
    monkeypatch.setattr(MCPServer, "run", lambda self, transport, **kw: seen.update(kw, transport=transport))
    mcp_server.serve(db, http="127.0.0.1:8765", signals=False)
    assert seen == {"transport": "streamable-http", "host": "127.0.0.1", "port": 8765, "stateless_http": True}


def test_a_port_in_use_is_one_error_line(tmp_path, capsys):
    from hypermem.cli.main import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        rc = main(["mcp", "--store", str(tmp_path / "a.db"), "--embedder", "hashing", "--http",
                   str(s.getsockname()[1])])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and err.startswith("hypermem mcp: error: cannot listen") and "in use" in err
    assert "\n" not in err and not (tmp_path / "a.db").exists()


def test_a_missing_folder_is_named_missing(tmp_path):
    from hypermem.store.backends.durable import StorageError

    with pytest.raises(StorageError, match="does not exist") as info:
        Memory.open(tmp_path / "no" / "dir" / "a.db", embedder=HashingEmbedder(dim=8))
    assert "not writable" not in str(info.value)


@pytest.mark.parametrize("sig, rc", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_stop_the_stdio_server_and_close_the_store(tmp_path, sig, rc):
    store = tmp_path / "s.db"
    proc = subprocess.Popen([sys.executable, "-m", "hypermem.cli", "mcp", "--store", str(store), "--embedder",
                             "hashing"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        assert b'"result"' in proc.stdout.readline()                  # serving, stdin still open
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == rc
    finally:
        if proc.poll() is None:
            proc.kill()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            f.close()
    assert not os.path.exists(str(store) + "-wal") or os.path.getsize(str(store) + "-wal") == 0
    with Memory.open(store, read_only=True) as again:
        assert len(again) == 0


def test_update_moves_a_memory_under_another_or_to_the_top(db):
    """An agent could not re-file a memory: update refused (then ignored) a parent."""
    db.add("the kitchen", id="kitchen")
    db.add("the garage", id="garage")
    db.add("the blue toolbox", id="toolbox", parent="kitchen")
    db.add("a hammer", id="hammer", parent="toolbox")

    async def script(c):
        moved = _data(await c.call_tool("update", {"id": "toolbox", "parent": "garage"}))
        cycle = await c.call_tool("update", {"id": "garage", "parent": "hammer"})
        unknown = await c.call_tool("update", {"id": "toolbox", "parent": "attic"})
        both = await c.call_tool("update", {"id": "toolbox", "parent": "kitchen", "to_root": True})
        top = _data(await c.call_tool("update", {"id": "hammer", "to_root": True, "meta": {"loose": True}}))
        return moved, cycle, unknown, both, top

    moved, cycle, unknown, both, top = _call(build_server(db), script)
    assert moved["id"] == "toolbox" and db.parent("toolbox") == "garage"
    assert "cycle" in _error(cycle).lower() or "under" in _error(cycle)
    assert db.parent("garage") is None and "unknown memory id 'attic'" in _error(unknown)
    assert "not both" in _error(both)
    assert db.parent("hammer") is None and db.get("hammer").meta == {"loose": True} and top["id"] == "hammer"
