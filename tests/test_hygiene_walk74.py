"""Walk 74 (hygiene): warnings that do not depend on the machine's speed and name the caller's
line, a Python-API MCP server that leaves the app's logging alone, and a DataFrame of integer
ids refused with the recipe that loads it."""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import os
import warnings

import pytest
from test_migration_walk69 import _fake_clock as _clock  # a machine of any speed

import hypermem
from hypermem import CallableEmbedder, HashingEmbedder, Memory
from hypermem.caller_warning import warn_caller
from hypermem.data.hierarchy_files import read_edges, read_hierarchy, read_names
from hypermem.store.add_hint import AddManyHint, OneByOne


# ---------------------------------------------------------------------- 1. AddManyHint counts, it does not time
@pytest.mark.parametrize("step", [0.0001, 0.05])   # a fast machine, a loaded one (50 ms an add: 2 s at add 20)
def test_a_durable_hashing_store_is_told_at_the_same_add_on_a_fast_and_a_slow_machine(monkeypatch, tmp_path, step):
    """400 single adds on SQLite raised AddManyHint under -W error at add 406 after 2.05 s on a loaded
    machine and not on a quiet one; now the count decides: add 501 on both, never before."""
    _clock(monkeypatch, step)
    with Memory.open(tmp_path / "a.db", embedder=HashingEmbedder(dim=16)) as db:
        db.one_by_one.commit_calls = 60                 # 500 by default; the rule, scaled down
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for i in range(60):
                db.add(f"note {i} about tea")
            with pytest.raises(AddManyHint, match="60 or more single add"):
                db.add("note 60 about tea")
        assert len(db) == 60 and db.one_by_one.told


def test_the_default_durable_rule_is_500_adds_and_in_memory_hashing_is_never_told(monkeypatch):
    _clock(monkeypatch, 0.05)                           # 50 ms an add: the old rule's 2 s after 40 adds
    run, mem = OneByOne(commits=True), Memory(embedder=HashingEmbedder(dim=16))
    h = HashingEmbedder(dim=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(499):
            run.start()
            run.record(n, n + 0.5, h)
        for n in range(300):
            mem.add(f"note {n}")                        # slow, in memory, hashing: nothing to batch
    assert run.due is None and not mem.one_by_one.told
    run.record(499, 499.5, h)
    with pytest.warns(AddManyHint, match="500 or more single add.*commits of this durable store"):
        run.start()


def test_an_embedder_that_batches_is_told_at_add_21_however_fast_it_is(monkeypatch):
    """A model behind a callable was told only once its adds had taken 2 s: on a GPU, never."""
    _clock(monkeypatch, 0.0)
    mem = Memory(embedder=CallableEmbedder(HashingEmbedder(dim=16).embed, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(20):
            mem.add(f"note {n}")
        with pytest.raises(AddManyHint, match=r"20 or more single add\(\) calls in a row \(one embedder call each\)"):
            mem.add("note 20")
    assert len(mem) == 20


def test_a_pause_between_adds_starts_a_new_run():
    run = OneByOne(calls=3, gap=1.0)
    for start in (0.0, 0.1, 5.0, 5.1):                  # 2 adds, a pause of 4.9 s, 2 adds
        run.record(start, start + 0.05)
    assert run.count == 2 and run.due is None
    assert hypermem.store.AddManyHint is AddManyHint


# ---------------------------------------------------------------------- 2. the hierarchy files' warnings
def _warned_at(call):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        call()
    assert got, "no warning"
    return {(os.path.basename(w.filename), w.lineno) for w in got}


def test_the_hierarchy_files_warnings_name_the_callers_line(tmp_path):
    """The header-like line and the shared text warned at hypermem/data/hierarchy_files.py:151 and
    :217 when read through read_edges/read_hierarchy: a per-module filter missed them."""
    header, edges, names = tmp_path / "hdr.tsv", tmp_path / "edges.tsv", tmp_path / "names.tsv"
    header.write_text("from\tto\na\tb\nc\tb\n")
    edges.write_text("a\tb\nc\tb\n")
    names.write_text("a\tdog\nb\tanimal\nc\tdog\n")
    here = os.path.basename(__file__)
    line = inspect.currentframe().f_lineno
    assert _warned_at(lambda: read_edges(header)) == {(here, line + 1)}
    assert _warned_at(lambda: read_hierarchy(header)) == {(here, line + 2)}
    assert _warned_at(lambda: read_names(names)) == {(here, line + 3)}
    assert _warned_at(lambda: read_hierarchy(edges, names)) == {(here, line + 4)}
    from hypermem.store.caller_warning import warn_caller as the_stores  # the store's imports still work
    assert the_stores is warn_caller


# ---------------------------------------------------------------------- 3. build_server and the root logger
@contextlib.contextmanager
def bare_root():
    """The root logger of an app that configured no logging (pytest's own handlers set aside)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    for h in handlers:
        root.removeHandler(h)
    root.setLevel(logging.WARNING)
    try:
        yield root
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)


def test_build_server_leaves_an_unconfigured_apps_root_logger_alone(tmp_path):
    """The SDK's server called logging.basicConfig: a RichHandler at INFO on the root logger of an
    app that had configured none, printing every library's INFO records.  The Python API keeps the
    root logger as it was; serve() (hypermem mcp) keeps the SDK's set-up (keep_logging=False)."""
    pytest.importorskip("mcp")
    from hypermem.integrations.mcp_server import build_server, open_store

    with open_store(str(tmp_path / "agent.db"), None) as db, bare_root() as root:
        build_server(db)
        assert root.handlers == [] and root.level == logging.WARNING
        build_server(db, keep_logging=False)
        assert root.handlers and root.level == logging.INFO


def test_serve_keeps_the_sdks_logging(monkeypatch, tmp_path):
    pytest.importorskip("mcp")
    from hypermem.integrations import mcp_server

    seen = {}

    def build(memory, **kw):
        seen.update(kw)
        raise KeyboardInterrupt
    monkeypatch.setattr(mcp_server, "build_server", build)
    with mcp_server.open_store(str(tmp_path / "agent.db"), None) as db, pytest.raises(KeyboardInterrupt):
        mcp_server.serve(db, signals=False)
    assert seen["keep_logging"] is False


# ---------------------------------------------------------------------- 4. a DataFrame of integer ids
_CSV = "id,text,parent\n1,animals,\n2,dogs are loyal,1\n3,puppies,2\n"


def test_integer_ids_of_read_csv_are_refused_with_the_recipes_that_load_them():
    """'row 0: id must be a non-empty string, got 1', and the obvious astype(str) made the root's
    child's parent '1.0' ("unknown parent id '1.0'"): the message now gives two recipes, which work."""
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(io.StringIO(_CSV))
    with pytest.raises(ValueError, match=r"row 0: id must be a string \(a memory id\), got int 1") as got:
        Memory.from_dataframe(df, embedder=HashingEmbedder(dim=16))
    text = str(got.value)
    read = "pd.read_csv(path, dtype={'id': str, 'parent': str})"
    convert = "df.astype({'id': 'Int64', 'parent': 'Int64'}).astype({'id': 'string', 'parent': 'string'})"
    assert read in text and convert in text
    for frame in (eval(read.replace("path", "io.StringIO(_CSV)")), eval(convert)):
        mem = Memory.from_dataframe(frame, embedder=HashingEmbedder(dim=16))
        assert mem.ids == ["1", "2", "3"] and [mem.parent(i) for i in mem.ids] == [None, "1", "2"]
    with pytest.raises(ValueError, match=r"row 1: parent must be a string .*got float 1\.0.*"
                                         r"df\.astype\(\{'parent': 'Int64'\}\)\.astype\(\{'parent': 'string'\}\)"):
        Memory.from_dataframe(df.astype({"id": str}), embedder=HashingEmbedder(dim=16))   # ids fixed, parents not
