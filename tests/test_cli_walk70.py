"""A CLI walk in shell pipelines (walk 70): SIGTERM / SIGHUP stop export and import cleanly (status
143 / 129, no hidden temporary file left, an existing output untouched); a CSV export into
``head -1`` is status 141 and streamed; the tool's own CSV given to import is named as such;
``search --root`` with ``--mode nearest`` warns; import names a parent cycle, a self-parent and
both lines of a duplicate id; two imports to one new name never replace each other."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import signal
import subprocess
import time

import pytest
from test_cli_pipe import HYPERMEM, _env
from test_cli_walk64 import fails
from test_cli_walk_outputs import run

from hypermem import Memory
from hypermem.cli.main import main
from hypermem.cli.store_commands import csv_chunks
from hypermem.embed import HashingEmbedder

TEXTS = ["plain", "a, comma", 'a "quote"', "two\nlines", "ünïcode ✓", "tab\there", ""]


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A snapshot whose JSON export takes a second or more (10,000 memories at dim 256)."""
    path = tmp_path_factory.mktemp("walk70") / "big.db"
    mem = Memory(embedder=HashingEmbedder(dim=256))
    mem.add_many([{"text": f"note number {i} about things", "id": f"n{i}", "meta": {"n": i}} for i in range(10000)])
    mem.save(path)
    return path


def _litter(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", "-wal", "-shm", "-journal"))
                  or p.name.startswith("."))


def _signal_when_tmp_appears(argv, folder, stem, signum):
    """Run the CLI, send ``signum`` as soon as its hidden temporary file ``.STEM...`` appears."""
    proc = subprocess.Popen([*HYPERMEM, *map(str, argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    try:
        while proc.poll() is None and not any(p.name.startswith(f".{stem}.") for p in folder.iterdir()):
            time.sleep(0.005)
        assert proc.poll() is None, "the command ended before its temporary file was seen"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err


def test_sigterm_mid_export_removes_the_tmp_file_and_keeps_the_old_output(big, tmp_path):
    old = tmp_path / "ex.json"
    old.write_text("the old export\n")
    code, out, err = _signal_when_tmp_appears(["export", big, old, "--force"], tmp_path, "ex.json", signal.SIGTERM)
    assert code == 143, err[-2000:]
    assert "wrote" not in out and "Traceback" not in err, err[-2000:]
    assert _litter(tmp_path) == [] and old.read_text() == "the old export\n"


def test_sighup_mid_durable_import_leaves_no_tmp_wal_or_shm(big, tmp_path):
    code, out, err = _signal_when_tmp_appears(["import", big, tmp_path / "d.db", "--durable"], tmp_path, "d.db",
                                              signal.SIGHUP)
    assert code == 129, err[-2000:]
    assert "Traceback" not in err and sorted(p.name for p in tmp_path.iterdir()) == [], err[-2000:]


def test_in_process_sigterm_is_143_and_the_handlers_come_back(tmp_path, monkeypatch):
    from hypermem.cli import parser

    def stats_then_term(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)   # the handler raises before this ends
        return 0

    def unhandled(signum, frame):   # without the CLI's own handler the test fails, not the test run
        raise RuntimeError("SIGTERM reached the caller's handler")

    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        monkeypatch.setattr(parser, "cmd_stats", stats_then_term)
        assert main(["stats", str(tmp_path / "m.db")]) == 143
        assert signal.getsignal(signal.SIGTERM) is unhandled
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_ignored_sighup_stays_ignored():
    from hypermem.cli.stop_signals import stopping_on_signals

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)   # what nohup does
    try:
        with stopping_on_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    """A store whose CSV is far longer than a pipe's buffer, with texts CSV must quote."""
    path = tmp_path_factory.mktemp("walk70csv") / "notes.db"
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("all notes", id="root", meta={"k": "v, \"q\"", "n": [1, None]})
    mem.add_many([{"text": f"{TEXTS[i % len(TEXTS)]} {i}, " * 4, "id": f"n{i}", "parent": "root",
                   "meta": {"i": i, "s": TEXTS[i % len(TEXTS)]}} for i in range(3000)])
    mem.save(path)
    return path


def test_csv_export_into_head_is_141_without_the_wrote_line(notes):
    cmd = f"{shlex.join([*HYPERMEM, 'export', str(notes), '-', '--format', 'csv'])} | head -1; " \
          "echo \"status=${PIPESTATUS[0]}\" >&2"
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, env=_env())
    assert out.stdout == "id,text,parent,level,depth,time,weight,accesses,meta\n"
    assert out.stderr.strip() == "status=141", out.stderr[-2000:]


def _old_csv(mem, at_time=None) -> str:
    """The CSV export as it was written before it streamed (one string)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["id", "text", "parent", "level", "depth", "time", "weight",
                                             "accesses", "meta"], extrasaction="ignore")
    writer.writeheader()
    for r in mem.table(at_time=at_time):
        writer.writerow(dict(r, meta=json.dumps(r["meta"], ensure_ascii=False)))
    return buf.getvalue()


def test_streamed_csv_is_byte_for_byte_the_old_export(notes, tmp_path, capsys):
    mem = Memory.load(notes)
    chunks = list(csv_chunks(mem.table(), per_chunk=7))
    assert len(chunks) > 100 and "".join(chunks) == _old_csv(mem)
    code, out, err = run(capsys, "export", notes, tmp_path / "n.csv", "--at", "2030-01-01")
    assert code == 0, err
    from hypermem.cli.inputs import time_arg

    assert (tmp_path / "n.csv").read_bytes() == _old_csv(mem, time_arg("2030-01-01")).encode()


def test_importing_the_tools_own_csv_says_it_is_no_import_format(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"text": "a", "id": "x"}\n')
    assert run(capsys, "import", tmp_path / "a.jsonl", tmp_path / "a.db")[0] == 0
    assert run(capsys, "export", tmp_path / "a.db", tmp_path / "a.csv")[0] == 0
    (tmp_path / "t.tsv").write_text("id\ttext\nx\thello\n")
    (tmp_path / "items.txt").write_text("id,text\nx,hello\n")   # a CSV header, whatever the name
    for name in ("a.csv", "t.tsv", "items.txt"):
        err = fails(capsys, "import", tmp_path / name, tmp_path / f"{name}.db")
        assert "CSV/TSV is not an import format: convert to JSON lines" in err and "line 1 is not JSON" not in err
    err = fails(capsys, "import", tmp_path / "a.jsonl.bad", tmp_path / "z.db")   # unchanged: a missing file
    assert "no such file" in err
    (tmp_path / "broken.jsonl").write_text('{"text": "a"}\nnot json\n')
    assert "line 2 is not JSON" in fails(capsys, "import", tmp_path / "broken.jsonl", tmp_path / "b.db")


def test_root_with_nearest_warns_that_it_does_nothing(notes, capsys):
    code, out, err = run(capsys, "search", notes, "note", "-k", "2", "--root", "n5")
    assert code == 0 and err.startswith("warning: --root n5 does nothing with --mode nearest"), err
    code, out, err = run(capsys, "search", notes, "note", "-k", "2", "--root", "root", "--mode", "children")
    assert code == 0 and "warning" not in err, err


@pytest.mark.parametrize("lines, message", [
    ([{"text": "a", "id": "x", "parent": "y"}, {"text": "b", "id": "y", "parent": "x"}],
     "parent cycle: 'x' (line 1) -> 'y' (line 2) -> 'x'"),
    ([{"text": "r", "id": "r"}, {"text": "a", "id": "x", "parent": "x"}], "line 2: id 'x' is its own parent"),
    ([{"text": "a", "id": "x"}, {"text": "c", "id": "z"}, {"text": "b", "id": "x"}],
     "duplicate id 'x' (line 1 and line 3)"),
])
def test_import_names_cycles_self_parents_and_both_duplicate_lines(tmp_path, capsys, lines, message):
    (tmp_path / "i.jsonl").write_text("".join(json.dumps(item) + "\n" for item in lines))
    err = fails(capsys, "import", tmp_path / "i.jsonl", tmp_path / "o.db")
    assert message in err and "unknown parent" not in err, err
    assert not (tmp_path / "o.db").exists()


def test_an_import_never_replaces_a_file_made_while_it_ran(tmp_path, capsys, monkeypatch):
    """Two imports to one new name: the one that finishes second is refused, the first kept."""
    from hypermem.store import persistence

    (tmp_path / "a.jsonl").write_text('{"text": "a", "id": "x"}\n')
    out = tmp_path / "out.db"
    save = persistence.save

    def other_import_finishes_first(memory, path, **kw):
        if not out.exists():
            other = Memory()
            other.add("the other import's", id="other")
            save(other, out)
        save(memory, path, **kw)

    monkeypatch.setattr(persistence, "save", other_import_finishes_first)
    err = fails(capsys, "import", tmp_path / "a.jsonl", out)
    assert "was created by another process while this command ran; pass --force" in err
    assert Memory.load(out).ids == ["other"] and _litter(tmp_path) == []
    monkeypatch.setattr(persistence, "save", save)
    code, _, err = run(capsys, "import", tmp_path / "a.jsonl", tmp_path / "new.db")
    assert code == 0 and Memory.load(tmp_path / "new.db").ids == ["x"], err
    assert oct((tmp_path / "new.db").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
