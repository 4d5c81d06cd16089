"""Where `hypermem` writes, as a tester met it: symlinks, named pipes and /dev/stdout are never
replaced by a regular file; a command never writes over its own input; one overwrite rule
(--force) for export, import, inspect, demo and fit-reranker; `-` for stdin and stdout."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from hypermem import Memory
from hypermem.cli import main
from hypermem.store.atomic import NotARegularFileError, atomic_write_text


@pytest.fixture
def store(tmp_path):
    return saved_store(tmp_path)


def saved_store(tmp_path: Path) -> Path:
    """m.db: pets with Rex and Mimi under it (a SQLite snapshot)."""
    mem = Memory()
    mem.add("pets", id="pets")
    mem.add("Rex, a dog", id="rex", parent="pets")
    mem.add("Mimi, a cat", id="mimi", parent="pets")
    path = tmp_path / "m.db"
    mem.save(path)
    return path


def run(capsys, *argv):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_atomic_write_goes_through_a_symlink_and_refuses_a_pipe(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    dangling = tmp_path / "dangling.txt"
    dangling.symlink_to(tmp_path / "later.txt")
    atomic_write_text(dangling, "made")
    assert dangling.is_symlink() and (tmp_path / "later.txt").read_text() == "made"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFileError, match="named pipe"):
        atomic_write_text(fifo, "x")
    assert fifo.is_fifo()


def test_export_and_inspect_keep_a_symlink_and_stream_into_a_pipe(store, tmp_path, capsys):
    target = tmp_path / "t.csv"
    target.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    assert run(capsys, "export", store, link, "--force")[0] == 0
    assert link.is_symlink() and target.read_text().startswith("id,text,parent")
    page = tmp_path / "p.html"
    page.write_text("old")
    plink = tmp_path / "plink.html"
    plink.symlink_to(page)
    assert run(capsys, "inspect", store, "-o", plink, "--force")[0] == 0
    assert plink.is_symlink() and page.read_text().startswith("<!DOCTYPE html>")
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = {}
    reader = threading.Thread(target=lambda: got.setdefault("text", fifo.read_text()))
    reader.start()
    code, out, err = run(capsys, "export", store, fifo, "--format", "json")
    reader.join(10)
    assert code == 0 and fifo.is_fifo() and json.loads(got["text"])["config"]
    assert out == "" and "wrote" in err    # the report leaves the stream alone


def test_dash_is_stdout_for_export_and_stdin_for_import(store, tmp_path, capsys, monkeypatch):
    code, out, err = run(capsys, "export", store, "-", "--format", "csv")
    assert code == 0 and out.startswith("id,text,parent") and "wrote -" in err
    assert "needs --format" in run(capsys, "export", store, "-")[2]
    lines = '{"text": "a dog", "id": "d"}\n{"text": "a puppy", "parent": "d"}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
    assert run(capsys, "import", "-", tmp_path / "x.db")[0] == 0
    assert len(Memory.load(tmp_path / "x.db")) == 2
    code, _, err = run(capsys, "import", tmp_path / "x.db", "-")
    assert code == 1 and "needs a file" in err and not Path("-").exists()


def test_no_command_writes_over_its_input(store, tmp_path, capsys):
    before = store.read_bytes()
    for argv in (["inspect", store, "-o", store, "--force"], ["export", store, store, "--format", "json", "--force"],
                 ["import", store, store, "--force"]):
        code, _, err = run(capsys, *argv)
        assert code == 1 and "is the input" in err, (argv, err)
    js = tmp_path / "mem.html"   # a memory JSON named .html: the default page would be itself
    js.write_text(Memory.load(store).to_json())
    code, _, err = run(capsys, "inspect", js)
    assert code == 1 and "already ends in .html" in err
    link = tmp_path / "other.db"
    link.symlink_to(store)
    assert "is the input" in run(capsys, "export", store, link, "--format", "json", "--force")[2]
    assert store.read_bytes() == before and json.loads(js.read_text())["config"]


def test_one_overwrite_rule(store, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert run(capsys, "export", store, out)[0] == 0
    code, _, err = run(capsys, "export", store, out)
    assert code == 1 and "pass --force" in err
    assert run(capsys, "export", store, out, "--force")[0] == 0
    page = tmp_path / "m.html"
    assert run(capsys, "inspect", store, "-o", page)[0] == 0
    assert run(capsys, "inspect", store, "-o", page)[0] == 0     # its own page is regenerated
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>")
    code, _, err = run(capsys, "inspect", store, "-o", notes)
    assert code == 1 and "--force" in err and notes.read_text() == "<p>my notes</p>"
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "events.html").write_text("mine")
    code, _, err = run(capsys, "demo", "--dataset", "events", "--out", demo)
    assert code == 1 and "not a file the demo wrote" in err and (demo / "events.html").read_text() == "mine"


def test_an_unwritable_place_is_one_line_without_errno(store, capsys):
    code, _, err = run(capsys, "export", store, "/proc/hypermem-x.json")
    assert code == 1 and "[Errno" not in err and err.count("\n") == 1


def test_fit_reranker_never_overwrites_a_users_folder(store, tmp_path, capsys):
    pytest.importorskip("transformers")
    from hypermem.embed.reranker import CONFIG_FILE, check_save_folder

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "README.md").write_text("mine")
    (proj / "config.json").write_text("{}")
    code, _, err = run(capsys, "fit-reranker", store, "--out", proj)
    assert code == 1 and "not a placement reranker folder" in err
    assert (proj / "README.md").read_text() == "mine" and (proj / "config.json").read_text() == "{}"
    with pytest.raises(FileExistsError):
        check_save_folder(proj / "README.md")
    old = tmp_path / "old"
    old.mkdir()
    (old / CONFIG_FILE).write_text("{}")
    assert check_save_folder(old) == old and check_save_folder(tmp_path / "new") == tmp_path / "new"
    code, _, err = run(capsys, "fit-reranker", store, "--out", old)
    assert code == 1 and "pass --force" in err


def test_dev_stdout_stays_a_link(store):
    import subprocess

    before = os.lstat("/dev/stdout")
    got = subprocess.run([sys.executable, "-m", "hypermem.cli", "export", str(store), "/dev/stdout", "--format",
                          "csv"], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0 and got.stdout.startswith("id,text,parent"), got.stderr
    assert os.lstat("/dev/stdout").st_mode == before.st_mode
