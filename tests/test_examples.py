"""The examples in examples/ run end to end and answer as their docstrings say."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_agent_memory_example(tmp_path):
    pytest.importorskip("langchain_core", reason="the langchain extra is not installed (pip install '.[langchain]')")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "agent_memory.py"), "--dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, env=env, check=True).stdout
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
    again = subprocess.run([sys.executable, str(ROOT / "examples" / "agent_memory.py"), "--dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 2 and "exists: the scripted day replays from an empty store" in again.stderr


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
