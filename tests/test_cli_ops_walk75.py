"""The command line in a bare container (operator walk 75): stdout on a full disk or closed, stdin
closed, a query that is not UTF-8, matplotlib's lines under a read-only HOME.  In-process:
``main`` with stdout and stdin swapped for the files a shell would give."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from hypermem import Memory
from hypermem.cli.main import main
from hypermem.embed import HashingEmbedder

FULL = "/dev/full"


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    path = tmp_path_factory.mktemp("ops") / "notes.db"
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("all notes", id="root")
    mem.add_many([{"text": f"dog note {i}", "id": f"n{i}", "parent": "root"} for i in range(20)])
    mem.save(path)
    return str(path)


@pytest.fixture
def full_stdout():
    """A file on a full disk (``> /dev/full``): every write of its buffer fails with ENOSPC.  The test
    puts it in place itself: pytest's capture sets sys.stdout again when the test's call begins."""
    if not os.path.exists(FULL):
        pytest.skip("no /dev/full here")
    with open(FULL, "w", encoding="utf-8") as out:
        yield out


@pytest.mark.parametrize("args", [["search", "{db}", "dog"], ["tree", "{db}"], ["stats", "{db}", "--json"],
                                  ["export", "{db}", "-", "--format", "csv"]])
def test_a_full_disk_under_stdout_is_one_error_line(notes, full_stdout, capsys, monkeypatch, args):
    monkeypatch.setattr(sys, "stdout", full_stdout)
    argv = [a.format(db=notes) for a in args]
    assert main(argv) == 1
    assert capsys.readouterr().err == f"hypermem {argv[0]}: error: cannot write to stdout: No space left on device\n"
    full_stdout.flush()   # Python's own flush at exit: stdout now points at os.devnull, nothing raises


def test_help_onto_a_full_disk_is_one_error_line(full_stdout, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", full_stdout)
    assert main(["--help"]) == 1
    assert capsys.readouterr().err == "hypermem: error: cannot write to stdout: No space left on device\n"
    full_stdout.flush()


@pytest.mark.parametrize("args", [["search", "{db}", "dog"], ["tree", "{db}"], ["stats", "{db}", "--json"],
                                  ["export", "{db}", "-", "--format", "csv"], ["inspect", "{db}", "-o", "-"]])
def test_a_closed_stdout_is_one_error_line(notes, capsys, monkeypatch, args):
    monkeypatch.setattr(sys, "stdout", None)   # what Python sets where fd 1 was closed (`>&-`)
    argv = [a.format(db=notes) for a in args]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"hypermem {argv[0]}: error: stdout is closed") and err.count("\n") == 1, err


def test_a_closed_stdout_still_lets_a_file_be_written(notes, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)
    out = tmp_path / "x.csv"
    assert main(["export", notes, str(out)]) == 0   # only the "wrote" line is lost
    assert out.read_text().startswith("id,") and capsys.readouterr().err == ""


def test_a_closed_stdin_is_one_error_line_and_nothing_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)   # what Python sets where fd 0 was closed (`<&-`)
    out = tmp_path / "out.db"
    assert main(["import", "-", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hypermem import: error: stdin is closed") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_a_query_that_is_not_utf8_is_named_in_the_terms_of_a_terminal(notes, capsys):
    query = os.fsdecode(b"caf\xe9")   # what Python makes of a Latin-1 terminal's argument: "caf\udce9"
    assert main(["search", notes, query]) == 1
    assert capsys.readouterr().err == ("hypermem search: error: the query is not UTF-8 (byte 0xe9 at position 3): "
                                       "set your terminal/locale to UTF-8\n")


def test_matplotlib_says_nothing_of_an_unwritable_home(notes, caplog, monkeypatch):
    """`hypermem train --help` and `demo` load Lightning, whose torchmetrics imports matplotlib:
    under a HOME it cannot write, matplotlib's own two lines about its cache are not the CLI's to show
    (its logger's records, which pytest's handler receives here and Python's last resort prints)."""
    matplotlib = pytest.importorskip("matplotlib")
    find_dir = getattr(matplotlib, "_get_config_or_cache_dir", None)
    if find_dir is None or not hasattr(matplotlib, "_get_xdg_config_dir"):
        pytest.skip("this matplotlib finds its folder otherwise")
    monkeypatch.setenv("HOME", "/dev/null")   # ~/.config/matplotlib cannot be made, not even by root
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("MPLCONFIGDIR", "unset")   # recorded, so the folder matplotlib then sets is undone
    monkeypatch.delenv("MPLCONFIGDIR")
    assert main(["stats", notes]) == 0   # any command
    caplog.clear()
    tmp = find_dir(matplotlib._get_xdg_config_dir)   # what matplotlib does on import (it removes tmp at exit)
    assert os.path.basename(tmp).startswith("matplotlib-")
    logging.getLogger("matplotlib").warning("another warning of matplotlib's")
    assert [r.getMessage() for r in caplog.records] == ["another warning of matplotlib's"]   # only those dropped
