"""The ``hypermem`` command line: every subcommand, its --help, and one-line errors."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hypermem import Memory
from hypermem.cli import build_parser, main
from hypermem.demo import DEMO_NOW, DEMO_SEARCHES, EVENTS

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ["demo", "inspect", "tree", "search", "stats", "export", "import"]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--dataset", "events", "--out", str(out)]) == 0
    return out


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def fails(capsys, *argv, code=1):
    """Run a command that must fail with one clear line on stderr and no traceback."""
    try:
        got = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: bad options
        got = exc.code
    out, err = capsys.readouterr()
    assert got == code, (out, err)
    assert "Traceback" not in err
    if code == 1:
        assert len(err.strip().splitlines()) == 1 and err.startswith(f"hypermem {argv[0]}: error: ")
    return err


@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_help_everywhere(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main(["--help"] if command is None else [command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hypermem") and "-h, --help" in out


def test_version(capsys):
    """``hypermem --version`` prints the package's version and exits 0, as users of any CLI expect."""
    import hypermem

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"hypermem {hypermem.__version__}"


def test_a_multi_line_error_prints_as_one_line(capsys, monkeypatch):
    """psycopg's "connection refused" text holds newlines: `hypermem stats postgresql://...` printed
    two lines where docs/cli.md promises one."""
    import importlib

    cli_main = importlib.import_module("hypermem.cli.main")

    def boom(args):
        raise ValueError('connection failed: connection to server at "127.0.0.1", port 1 failed: refused\n'
                         '\tIs the server running on that host?\n')

    parser = cli_main.build_parser
    monkeypatch.setattr(cli_main, "build_parser", lambda: _with_func(parser(), boom))
    assert main(["stats", "x.db"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused; Is the server running" in err


def _with_func(parser, func):
    parser.set_defaults(func=func)
    for action in parser._subparsers._group_actions:
        for sub in action.choices.values():
            sub.set_defaults(func=func)
    return parser


def test_every_subcommand_is_there():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(SUBCOMMANDS) <= set(sub.choices)


def test_demo_saves_inspects_and_searches(demo_dir, capsys):
    db, page = demo_dir / "events.db", demo_dir / "events.html"
    mem = Memory.load(db)
    assert len(mem) == len(EVENTS) and len(mem.roots()) == 4
    assert Memory.from_json(demo_dir / "events.json").ids == mem.ids
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "hm-data" in text
    # Printed: the tree and one block per search, each with the expected top hit.
    code, out, _ = run(capsys, "demo", "--dataset", "events", "--out", demo_dir, "--no-inspector")
    assert code == 0 and "└── " in out and out.count("\nsearch ") == len(DEMO_SEARCHES["events"])
    assert "Rex ate chocolate and was sick overnight  [rex-choc]" in out.split("search 'the dog was sick'")[1]


def test_demo_defaults_to_mammals_and_forwards_its_options(capsys, monkeypatch, tmp_path):
    import hypermem.demo

    calls = []
    monkeypatch.setattr(hypermem.demo, "run_demo", lambda out, **kw: calls.append((out, kw)) or {"html": None})
    assert main(["demo", "--out", str(tmp_path)]) == 0
    assert calls[-1] == (str(tmp_path), {"dataset": "mammals", "inspector": True, "config": None, "epochs": None,
                                         "runs_dir": "runs", "progress": True})
    assert main(["demo", "--epochs", "3", "--runs", "r", "--no-progress", "--config", "c.yaml", "--no-inspector"]) == 0
    assert calls[-1][1] == {"dataset": "mammals", "inspector": False, "config": "c.yaml", "epochs": 3,
                            "runs_dir": "r", "progress": False}
    assert main(["demo", "--dataset", "events"]) == 0 and calls[-1][1] == {"dataset": "events", "inspector": True}
    err = fails(capsys, "demo", "--dataset", "events", "--epochs", "3", "--no-progress")
    assert "--epochs, --no-progress: only for the mammals demo" in err
    fails(capsys, "demo", "--epochs", "0", code=2)


def test_inspect(demo_dir, capsys, tmp_path):
    code, out, _ = run(capsys, "inspect", demo_dir / "events.db", "-o", tmp_path / "p.html", "--title", "<x>",
                       "--layout", "projection", "--at", "2025-05-01T00:00")
    assert code == 0 and "wrote" in out
    page = (tmp_path / "p.html").read_text()
    assert "<title>&lt;x&gt;</title>" in page and '"layout": "projection"' in page
    assert '"now": "2025-05-01T00:00:00+00:00"' in page
    json_copy = tmp_path / "m.json"
    json_copy.write_text((demo_dir / "events.json").read_text())
    assert run(capsys, "inspect", json_copy)[0] == 0 and (tmp_path / "m.html").exists()
    fails(capsys, "inspect", demo_dir / "events.db", "--layout", "spiral", code=2)
    fails(capsys, "inspect", demo_dir / "events.db", "--at", "yesterday", code=2)


def test_tree(demo_dir, capsys):
    code, out, _ = run(capsys, "tree", demo_dir / "events.db")
    assert code == 0 and out.splitlines()[0] == "Alex's pets  [pets d=1.00]" and len(out.splitlines()) == len(EVENTS)
    code, out, _ = run(capsys, "tree", demo_dir / "events.db", "--root", "rex", "--max-text", "10")
    assert code == 0 and out.splitlines() == ["Rex, a go…  [rex d=1.50]", "├── Rex had a…  [rex-vet d=2.00]",
                                              "├── Rex ate c…  [rex-choc d=2.00]", "└── Rex learn…  [rex-fetch d=2.00]"]
    assert "unknown memory id 'nope'" in fails(capsys, "tree", demo_dir / "events.db", "--root", "nope")


def test_search(demo_dir, capsys):
    db = demo_dir / "events.db"
    before = db.read_bytes()
    code, out, _ = run(capsys, "search", db, "index rebuild", "-k", "2", "--mode", "subtree", "--root", "work")
    assert code == 0 and len(out.splitlines()) == 2 and "[atlas-index]" in out
    assert all(" time_weight=" in line for line in out.splitlines())  # SearchResult's own field name
    code, out, _ = run(capsys, "search", db, "--mode", "children", "--root", "rex", "--json", "-k", "3")
    hits = json.loads(out)
    assert [h["id"] for h in hits] == ["rex-choc", "rex-vet", "rex-fetch"]  # newest first: time weights
    code, out, _ = run(capsys, "search", db, "Lisbon", "--metric", "hyperbolic", "--at", DEMO_NOW.isoformat())
    assert code == 0 and len(out.splitlines()) == 5
    assert db.read_bytes() == before  # searching does not write
    fails(capsys, "search", db, "x", "--mode", "sideways", code=2)
    fails(capsys, "search", db, "x", "-k", "0", code=2)
    fails(capsys, "search", db, "x", "--metric", "manhattan", code=2)
    assert "needs --root" in fails(capsys, "search", db, "x", "--mode", "subtree")
    assert "a query is needed" in fails(capsys, "search", db)
    assert "unknown memory id" in fails(capsys, "search", db, "x", "--mode", "cone", "--root", "ghost")


def test_stats(demo_dir, capsys):
    code, out, _ = run(capsys, "stats", demo_dir / "events.db", "--json")
    stats = json.loads(out)
    assert code == 0 and stats["count"] == len(EVENTS) and stats["decay"] == {"type": "half_life", "hours": 1440}
    code, out, _ = run(capsys, "stats", demo_dir / "events.db")
    assert code == 0 and any(line.split() == ["count", str(len(EVENTS))] for line in out.splitlines())


def test_export_and_import(demo_dir, capsys, tmp_path):
    db = demo_dir / "events.db"
    mem = Memory.load(db)
    assert run(capsys, "export", db, tmp_path / "m.json", "--indent", "1")[0] == 0
    assert run(capsys, "import", tmp_path / "m.json", tmp_path / "m.db")[0] == 0
    back = Memory.load(tmp_path / "m.db")
    assert [r.to_dict() for r in back] == [r.to_dict() for r in mem] and (back.points == mem.points).all()
    assert "exists; pass --force" in fails(capsys, "import", tmp_path / "m.json", tmp_path / "m.db")
    assert run(capsys, "import", tmp_path / "m.json", tmp_path / "m.db", "--force")[0] == 0
    assert run(capsys, "export", db, tmp_path / "t.csv")[0] == 0
    with open(tmp_path / "t.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == mem.ids and json.loads(rows[3]["meta"]) == {"kind": "event", "urgent": True}
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "animals", "id": "a", "t": "2025-01-01T00:00:00+00:00"}\n'
                     '{"text": "dogs", "parent": "a", "meta": {"k": 1}}\n\n"just a string"\n')
    assert run(capsys, "import", items, tmp_path / "items.db", "--dim", "32", "--half-life", "24")[0] == 0
    new = Memory.load(tmp_path / "items.db")
    assert len(new) == 3 and new.dim == 32 and new.parent(new.ids[1]) == "a" and new.decay.hours == 24
    items.write_text('{"text": "dogs", "parent": "ghost"}\n')
    assert "unknown parent id 'ghost'" in fails(capsys, "import", items, tmp_path / "bad.db")
    items.write_text('{"text": "a"}\n\n{not json\n')
    assert "line 3 is not JSON" in fails(capsys, "import", items, tmp_path / "bad.db")
    assert not (tmp_path / "bad.db").exists()


def test_user_mistakes_are_one_line(capsys, tmp_path):
    assert "no such memory file" in fails(capsys, "tree", tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    assert "is a folder" in fails(capsys, "stats", tmp_path)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00not a database" * 100)
    assert "bad memory file" in fails(capsys, "search", junk, "x")
    fails(capsys, "frobnicate", code=2)
    fails(capsys, code=2)


def test_console_entry_point_runs_without_traceback(tmp_path):
    """A real process: one line on stderr, exit status 1, no traceback."""
    out = subprocess.run([sys.executable, "-m", "hypermem.cli", "stats", str(tmp_path / "missing.db")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"hypermem stats: error: no such memory file: {tmp_path}/missing.db"]


def test_import_copies_a_memory_json_of_any_embedder_and_names_lines(capsys, tmp_path):
    import numpy as np

    from hypermem import CallableEmbedder

    emb = CallableEmbedder(lambda texts: np.stack([np.arange(1.0, 9.0) + len(t) for t in texts]), 8)
    mem = Memory(embedder=emb)
    a = mem.add("animals")
    mem.add("dogs", parent=a)
    mem.to_json(tmp_path / "m.json")
    assert run(capsys, "import", tmp_path / "m.json", tmp_path / "copy.db")[0] == 0   # no embedder needed
    copy = Memory.load(tmp_path / "copy.db", embedder=emb)
    assert copy.ids == mem.ids and copy.parent(copy.ids[1]) == a
    assert "it is not the hashing embedder: pass --embedder minilm or PATH" in fails(
        capsys, "search", tmp_path / "copy.db", "dogs", "--embedder", "hashing")
    items = tmp_path / "items.jsonl"
    items.write_text('{"text": "a", "id": "a"}\n\n{"text": "b", "parent": "ghost"}\n')
    assert "unknown parent id 'ghost' (line 3;" in fails(capsys, "import", items, tmp_path / "bad.db")
    items.write_text('["a", {"text": "b", "parent": "ghost"}]')
    assert "(item #1;" in fails(capsys, "import", items, tmp_path / "bad.db")
