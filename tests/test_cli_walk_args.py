"""`hypermem` arguments as a tester met them: a query after the options, a mistyped option's
suggestion under the subcommand's usage, Ctrl-C anywhere, warnings as one line, bounded and
pointless options, search rows fed back to import, a reranker folder as --embedder, --help
examples."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest
from test_cli_walk_outputs import run, saved_store

from hypermem import Memory
from hypermem.cli import main


@pytest.fixture
def store(tmp_path):
    return saved_store(tmp_path)


def test_a_query_after_the_options_and_a_suggestion_for_a_typo(store, capsys):
    code, out, _ = run(capsys, "search", store, "-k", "2", "dog")
    assert code == 0 and out.count("\n") == 2
    assert run(capsys, "search", store, "dog", "-k", "2")[1] == out
    code, _, err = run(capsys, "tree", store, "--rot", "rex")
    assert code == 2 and err.startswith("usage: hypermem tree") and "did you mean --root?" in err


def test_ctrl_c_anywhere_is_130_without_a_traceback(monkeypatch, capsys):
    cli_main = importlib.import_module("hypermem.cli.main")

    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(cli_main, "build_parser", interrupted)
    assert main(["--help"]) == 130 and "Traceback" not in capsys.readouterr().err


def test_the_parser_names_the_demos_without_importing_them():
    from hypermem.cli.parser import DEMO_NAMES
    from hypermem.demo import DEMOS

    assert DEMO_NAMES == tuple(sorted(DEMOS))
    got = subprocess.run([sys.executable, "-c", "import sys; from hypermem.cli import build_parser; build_parser(); "
                          "print('hypermem.demo' in sys.modules)"], capture_output=True, text=True, timeout=120)
    assert got.stdout.strip() == "False", got.stderr


def test_warnings_and_options_that_do_nothing_are_one_line(store, tmp_path, capsys):
    for bad in ("100000", "-5"):
        code, _, err = run(capsys, "export", store, tmp_path / "x.json", "--indent", bad)
        assert code == 2 and "0 to 16" in err
    code, _, err = run(capsys, "export", store, tmp_path / "x.csv", "--indent", "2")
    assert code == 0 and err.startswith("warning: --indent applies to JSON only") and err.count("\n") == 1
    code, _, err = run(capsys, "export", store, tmp_path / "x.json", "--at", "2025-01-01")
    assert code == 0 and err.startswith("warning: --at applies to CSV")
    code, _, err = run(capsys, "import", tmp_path / "x.json", tmp_path / "y.db", "--dim", "8")
    assert code == 0 and err.startswith("warning: --dim applies to JSON lines")

    got = subprocess.run([sys.executable, "-m", "hypermem.cli", "search", str(store), "--mode", "cone", "--root",
                          "rex"], capture_output=True, text=True, timeout=120)   # Python's warning format before
    assert got.returncode == 0 and got.stderr.startswith("warning: no memory lies inside the entailment cone")
    assert got.stderr.count("\n") == 1, got.stderr


def test_search_json_rows_import_back(store, tmp_path, capsys):
    code, out, _ = run(capsys, "search", store, "--mode", "subtree", "--root", "pets", "-k", "5", "--json")
    rows = json.loads(out)[::-1]   # children before their parent: put back in order
    assert rows[-1]["id"] == "pets"
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    code, _, err = run(capsys, "import", tmp_path / "rows.json", tmp_path / "back.db")
    assert code == 0 and err.startswith("warning: ignored access_count"), err
    back = Memory.load(tmp_path / "back.db")
    assert back.parent("rex") == "pets" and len(back) == 3


def test_a_reranker_folder_is_not_an_embedder(store, tmp_path, capsys):
    folder = tmp_path / "rr"
    folder.mkdir()
    (folder / "hypermem_reranker.json").write_text("{}")
    code, out, err = run(capsys, "search", store, "dog", "--embedder", folder)
    assert code == 1 and out == "" and err.count("\n") == 1 and "placement reranker's folder" in err


@pytest.mark.parametrize("command", ["demo", "inspect", "tree", "search", "stats", "export", "import",
                                     "fit-reranker", "mcp"])
def test_every_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    assert "example" in out and f"hypermem {command}" in out.split("example")[1]
    if command == "fit-reranker":
        assert "--seed SEED" in out and "default: 0" in out


def test_the_top_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "hypermem fit-reranker" in out and "hypermem train" in out
