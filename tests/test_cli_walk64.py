"""A newcomer's CLI walk: text search on a trained layout warns, import names a parent that the
file lacks and refuses an empty source, demo --out at a file is one clear line."""

import json

import torch
from test_cli_walk_outputs import run

from hypermem import Memory
from hypermem.train.export import embedding_to_memory


def fails(capsys, *argv):
    code, out, err = run(capsys, *argv)
    assert code not in (0, None), (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


def trained_store(path):
    gen = torch.Generator().manual_seed(0)
    names = ["mammal", "feline", "canine", "lion", "lioness", "dog", "puppy", "cat"]
    pts = {n: 0.6 * torch.nn.functional.normalize(torch.randn(8, generator=gen, dtype=torch.float64), dim=0)
           for n in names}
    tree = [("mammal", "feline"), ("mammal", "canine"), ("feline", "lion"), ("feline", "lioness"),
            ("feline", "cat"), ("canine", "dog"), ("canine", "puppy")]
    embedding_to_memory(pts, tree, {"lioness": "a female lion"}).save(path)


WARNING = "warning: text queries do not locate the points of this store"


def test_text_search_on_a_trained_layout_warns_on_stderr(tmp_path, capsys):
    db = tmp_path / "trained.db"
    trained_store(db)
    code, out, err = run(capsys, "search", db, "a female lion", "-k", "3")
    assert code == 0 and out.count("\n") == 3
    assert err.count("\n") == 1 and err.startswith(WARNING) and "--root ID" in err and "subtree|ancestors" in err
    code, out, err = run(capsys, "search", db, "a female lion", "-k", "2", "--json")
    assert code == 0 and len(json.loads(out)) == 2 and err.startswith(WARNING)
    code, out, err = run(capsys, "search", db, "--mode", "subtree", "--root", "feline", "-k", "5")
    assert code == 0 and err == "" and "[lioness]" in out


def test_text_search_on_an_embedded_store_does_not_warn(tmp_path, capsys):
    mem = Memory()
    a = mem.add("animals", id="a")
    mem.add("a female lion", parent=a)
    mem.save(tmp_path / "plain.db")
    code, out, err = run(capsys, "search", tmp_path / "plain.db", "a female lion", "-k", "1")
    assert code == 0 and err == "" and "a female lion" in out


def test_import_names_a_parent_that_the_file_lacks(tmp_path, capsys):
    rows = tmp_path / "rex.json"
    rows.write_text(json.dumps([{"id": "rex", "text": "Rex", "parent_id": "pets"},
                                {"id": "walk", "text": "a walk", "parent_id": "rex"}]))
    err = fails(capsys, "import", rows, tmp_path / "rex.db")
    assert "unknown parent id 'pets' (item #0; no item of the file has that id: import the whole store, or " \
           "drop the field)" in err
    assert "must precede" not in err and not (tmp_path / "rex.db").exists()
    rows.write_text(json.dumps([{"id": "walk", "text": "a walk", "parent": "rex"}, {"id": "rex", "text": "Rex"}]))
    assert run(capsys, "import", rows, tmp_path / "ok.db")[0] == 0   # a parent later in the file goes first
    assert Memory.load(tmp_path / "ok.db").parent("walk") == "rex"


def test_library_hint_for_a_parent_absent_from_the_batch():
    mem = Memory()
    try:
        mem.add_many([{"text": "x", "id": "x"}, {"text": "y", "parent": "ghost"}])
    except KeyError as exc:
        msg = exc.args[0]
    assert "unknown parent id 'ghost' (item #1; neither a stored memory nor an item of the batch" in msg
    try:
        mem.add_many([{"text": "y", "id": "y", "parent": "x"}, {"text": "x", "id": "x"}])
    except KeyError as exc:
        msg = exc.args[0]
    assert "(item #0; parents must precede their children)" in msg


def test_import_refuses_an_empty_source(tmp_path, capsys, monkeypatch):
    import io
    import sys

    for name, text in (("empty.json", ""), ("blank.jsonl", "  \n\n")):
        (tmp_path / name).write_text(text)
        assert fails(capsys, "import", tmp_path / name, tmp_path / "e.db") == \
            f"hypermem import: error: {tmp_path / name} is empty: no items to import"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert "stdin (-) is empty: no items to import" in fails(capsys, "import", "-", tmp_path / "e.db")
    assert not (tmp_path / "e.db").exists()
    (tmp_path / "none.json").write_text("[]")
    code, out, _ = run(capsys, "import", tmp_path / "none.json", tmp_path / "none.db")
    assert code == 0 and "(0 memories)" in out   # a valid document of no items still imports


def test_demo_out_at_a_file_is_one_line(tmp_path, capsys):
    (tmp_path / "f.db").touch()
    (tmp_path / "a.txt").touch()
    assert fails(capsys, "demo", "--dataset", "events", "--out", tmp_path / "f.db").endswith(
        f"error: --out {tmp_path / 'f.db'} is a file: give a folder (it is created when missing)")
    err = fails(capsys, "demo", "--dataset", "events", "--out", tmp_path / "a.txt" / "sub")
    assert f"{tmp_path / 'a.txt'} is a file, not a folder" in err
    err = fails(capsys, "demo", "--dataset", "events", "-o", tmp_path / "a.txt" / "x")
    assert err.startswith("hypermem demo: error: -o ") and "is a file, not a folder" in err
