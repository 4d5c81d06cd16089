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


def test_no_python_block_of_the_guides_is_indented():
    """A block copied from the raw .md file runs: an indented fence (a block inside a list item)
    is an IndentationError when pasted into a script."""
    indented = [(p.name, code.splitlines()[0]) for p in sorted((ROOT / "docs").glob("*.md"))
                for indent, code in _blocks(p.read_text(encoding="utf-8")) if indent]
    assert indented == []


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


def test_every_name_of_the_api_table_imports_from_the_module_it_gives():
    """A reader copies `from <module> import <name>` from the API table: `BandedDirectionIndex`
    was listed under `hypermem.index` but lived only in `hypermem.index.bands`."""
    import importlib

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## API", 1)[1].split("\n## ", 1)[0]
    checked = 0
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`hypermem."):
            continue
        module = re.match(r"`([\w.]+)`", cells[1]).group(1)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError:
            continue  # `hypermem.Memory`, `hypermem.embed.HierarchyEncoder`: a name, not a module
        for name in re.findall(r"`([A-Za-z_]\w*)`", cells[2]):
            assert hasattr(mod, name), f"README's API table: {name} is not importable from {module}"
            checked += 1
    assert checked >= 20


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lstrip("#").strip().lower()).replace(" ", "-")


def test_every_link_into_results_names_one_of_its_sections():
    results = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    anchors = {_slug(line) for line in results.splitlines() if line.startswith("#")}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        links = re.findall(r"RESULTS\.md#([^)\s]+)\)", doc.read_text(encoding="utf-8"))
        missing = sorted(set(links) - anchors)
        assert not missing, f"{doc.name} links to no section of benchmarks/RESULTS.md: {missing}"
