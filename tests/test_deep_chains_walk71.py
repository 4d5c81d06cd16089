"""Walk 71, pathological tree shapes: deep parent chains (thousands of levels) stay linear in
memory and time where a tree is shown, placed, inspected or refused."""

from __future__ import annotations

import pytest

from hypermem import Memory
from hypermem.cli.main import main
from hypermem.embed import HashingEmbedder
from hypermem.store.views import TREE_INDENT_CAP, MemoryViews

pytestmark = pytest.mark.filterwarnings("ignore:levels \\d+ and deeper")


def chain(n: int, prefix: str = "n", parent: str | None = None) -> list[dict]:
    """An ``n``-deep parent chain, ``prefix0`` (under ``parent``) ... ``prefix{n-1}``."""
    return [{"text": f"node {i}", "id": f"{prefix}{i}", "parent": f"{prefix}{i - 1}" if i else parent}
            for i in range(n)]


@pytest.fixture(scope="module")
def deep():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many(chain(300))
    mem.add("a side note", id="side", parent="n2")
    return mem


# ---------------------------------------------------------------- 1. tree(): indentation capped
def test_tree_lines_are_bounded_past_the_indent_cap(deep):
    lines = deep.tree().split("\n")
    assert len(lines) == 301
    longest = max(len(line) for line in lines)
    assert longest <= 4 * TREE_INDENT_CAP + 60, longest   # not 4 characters a level: 1,200 at level 300
    at = {line.split("node ")[1].split()[0]: line for line in lines if "node " in line}
    assert "[level" not in at[str(TREE_INDENT_CAP)] and at[str(TREE_INDENT_CAP)].endswith(f"[n{TREE_INDENT_CAP} d=23.72]")
    assert f"└── [level {TREE_INDENT_CAP + 1}] node {TREE_INDENT_CAP + 1}  [n{TREE_INDENT_CAP + 1} " in at[str(TREE_INDENT_CAP + 1)]
    assert "└── [level 299] node 299  [n299 " in at["299"]
    indent = at[str(TREE_INDENT_CAP)].index("└──")   # past the cap, one fixed indent
    assert at["299"].index("└──") == at[str(TREE_INDENT_CAP + 1)].index("└──") == indent
    assert lines[-1] == "        └── a side note  [side d=2.50]"   # the sibling still under n2


def test_tree_shallow_levels_unchanged(deep):
    lines = deep.tree().split("\n")
    assert lines[:4] == ["node 0  [n0 d=1.00]", "└── node 1  [n1 d=1.50]",
                         "    └── node 2  [n2 d=2.00]", "        ├── node 3  [n3 d=2.50]"]
    assert lines[4] == "        │   └── node 4  [n4 d=3.00]"


def test_tree_lines_iterates_and_joins_to_tree(deep):
    it = deep.views.tree_lines()
    assert next(it) == "node 0  [n0 d=1.00]"   # a generator: the first line without the rest
    assert "\n".join(["node 0  [n0 d=1.00]", *it]) == deep.tree()
    assert list(deep.views.tree_lines(root="n298")) == deep.tree(root="n298").split("\n")
    with pytest.raises(KeyError):
        deep.views.tree_lines(root="nope")   # raised when called, not at the first line


def test_cli_tree_streams_lines_not_one_string(deep, tmp_path, capsys, monkeypatch):
    db = tmp_path / "deep.db"
    deep.save(db)
    want = deep.tree()

    def whole(*_a, **_k):
        raise AssertionError("hypermem tree built the whole text")
    monkeypatch.setattr(MemoryViews, "tree", whole)
    assert main(["tree", str(db)]) == 0
    assert capsys.readouterr().out == want + "\n"
    empty = tmp_path / "empty.db"
    Memory(embedder=HashingEmbedder(dim=16)).save(empty)
    assert main(["tree", str(empty)]) == 0
    assert capsys.readouterr().out == "(empty memory)\n"
