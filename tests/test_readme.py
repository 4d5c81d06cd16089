"""The README's code pastes as is: no fenced block is indented (an indented block copied from the
raw file is an IndentationError), and the durable-storage block runs on its own (issue 33, item 6)."""

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _blocks(text: str) -> list[tuple[str, str]]:
    """``(indent, code)`` of every fenced python block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^([ \t]*)```python\n(.*?)^\1```", text, re.M | re.S)]


def test_no_python_block_of_the_readme_is_indented():
    blocks = _blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    assert [code.splitlines()[0] for indent, code in blocks if indent] == []


def test_the_memory_open_block_runs_as_pasted(tmp_path):
    (code,) = [c for _, c in _blocks((ROOT / "README.md").read_text(encoding="utf-8")) if "Memory.open(" in c]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        scope: dict = {}
        exec(compile(code, "README.md", "exec"), scope)
        assert [r.text for r in scope["reader"]] == ["the user prefers tea"]
        scope["reader"].close()
    finally:
        os.chdir(cwd)
