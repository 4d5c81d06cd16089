"""The examples in examples/ run end to end and answer as their docstrings say."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_agent_memory_example(tmp_path, monkeypatch, capsys):
    """The script run as ``__main__`` (runpy, in this process: a fresh interpreter would import
    torch and LangChain again, ~9 CPU s a run), then its refusal of a folder that holds a store."""
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed (pip install '.[langchain]')")
    script = str(ROOT / "examples" / "agent_memory.py")
    monkeypatch.setattr(sys, "argv", [script, "--dir", str(tmp_path)])
    runpy.run_path(script, run_name="__main__")
    out = capsys.readouterr().out
    answers = dict(line.split(" -> ", 1) for line in out.splitlines())
    # recency: the recent observation of the keys beats the closer-worded old one
    assert answers["where are the keys?"] == "I spotted the car keys under the garden bench"
    assert answers["without recency: where are the keys?"] == "the keys are on the kitchen table"
    # structure: a room's subtree
    assert set(answers["what is in the kitchen?"].split(" | ")) == {"the keys are on the kitchen table",
                                                                   "the fridge is almost out of milk"}
    assert len(answers["what did I see in the study?"].split(" | ")) == 2
    assert all("desk" in a for a in answers["what did I see in the study?"].split(" | "))
    # restart from the file, then new observations
    assert answers["after restart: where are the keys?"] == answers["where are the keys?"]
    assert answers["later: where are the keys?"] == "the keys are back on the kitchen table"
    assert answers["memories"] == "12"  # house + 3 rooms + 8 observations
    assert (tmp_path / "agent_memory.db").exists()
    with pytest.raises(SystemExit) as again:
        runpy.run_path(script, run_name="__main__")
    assert again.value.code == 2
    assert "exists: the scripted day replays from an empty store" in capsys.readouterr().err


def test_the_framework_guide_snippets_run(tmp_path, monkeypatch):
    for mod in ("langchain_core", "llama_index.core", "langgraph.store.base"):
        pytest.importorskip(mod, reason=f"{mod} is not installed (the langchain, llama-index and langgraph extras)")
    import re

    guide = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")  # linked from the README
    blocks = re.findall(r"```python\n(.*?)```", guide, re.S)
    assert len(blocks) == 3  # one per adapter
    monkeypatch.chdir(tmp_path)
    printed: list[str] = []
    for code in blocks:
        exec(compile(code, "docs/frameworks.md", "exec"), {"print": lambda *a: printed.append(repr(a))})
    assert (tmp_path / "agent.db").exists()  # the LangChain snippet saved its memory
    assert "the keys are on the table" in printed[0] and "dogs are loyal" in printed[1]
    assert "likes spicy ramen" in printed[2]
