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
