"""Walk 75b: ``hypermem mcp --embedder module:Class`` takes an embedder written in Python, as
``hypermem search`` and ``import`` do, with the same loader, checks and messages."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("mcp")

from hypermem import Memory  # noqa: E402
from hypermem.cli import main  # noqa: E402
from hypermem.cli.inputs import named_embedder  # noqa: E402
from hypermem.integrations import mcp_server  # noqa: E402

EMB_MODULE = '''
import numpy as np

class BagEmb:
    """Counts of each word's first letter, a 16-slot bag: enough to find a text again."""
    dim = 16
    def embed(self, texts):
        rows = [[sum(w[0] and ord(w[0]) % 16 == j for w in t.split()) for j in range(16)] for t in texts]
        return np.asarray(rows, dtype=float) + 0.01

class WideEmb(BagEmb):
    dim = 32
    def embed(self, texts):
        return np.tile(super().embed(texts), 2)

class NeedsArgs:
    def __init__(self, size):
        self.dim = size

class NoEmbed:
    dim = 4
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``walk75b_bagemb.py`` in the current folder (not on sys.path: the loader puts the folder there)."""
    (tmp_path / "walk75b_bagemb.py").write_text(EMB_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "walk75b_bagemb", raising=False)
    return tmp_path


def test_a_new_store_is_served_with_the_named_class(user_module):
    emb = mcp_server.choose_embedder(str(user_module / "new.db"), "walk75b_bagemb:BagEmb")
    assert type(emb).__name__ == "BagEmb" and emb.dim == 16
    with mcp_server.open_store(str(user_module / "new.db"), emb) as mem:
        mem.add("dogs are loyal", id="d")
        mem.add("cats purr", id="c")
        assert mem.search("dogs are loyal", k=1)[0].id == "d"


def test_a_store_made_with_a_class_asks_for_it_and_takes_it(user_module):
    sys.path.insert(0, str(user_module))
    from walk75b_bagemb import BagEmb

    target = str(user_module / "agent.db")
    with Memory.open(target, embedder=BagEmb()) as mem:
        mem.add("dogs are loyal", id="d")
    with pytest.raises(ValueError, match="pass --embedder module:BagEmb"):
        mcp_server.choose_embedder(target)
    emb = mcp_server.choose_embedder(target, "walk75b_bagemb:BagEmb")
    with mcp_server.open_store(target, emb) as mem:
        assert mem.search("dogs are loyal", k=1)[0].id == "d"
    with pytest.raises(ValueError, match="a store keeps the embedder it was made with"):
        mcp_server.choose_embedder(target, "walk75b_bagemb:WideEmb")   # another dimension: refused, naming both


@pytest.mark.parametrize("name, words", [
    ("walk75b_bagemb:Nope", "has no class 'Nope'"),
    ("walk75b_nosuchmodule:Emb", "cannot import 'walk75b_nosuchmodule'"),
    ("walk75b_bagemb:NeedsArgs", "NeedsArgs() failed"),
    ("walk75b_bagemb:NoEmbed", "has no dim attribute and embed(texts) method"),
])
def test_a_bad_class_gets_the_command_lines_own_message(user_module, name, words):
    with pytest.raises(Exception) as cli:
        named_embedder(name)
    with pytest.raises(ValueError) as served:
        mcp_server.choose_embedder(str(user_module / "new.db"), name)
    assert words in str(served.value)
    assert str(served.value) == str(cli.value)


def test_hypermem_mcp_takes_module_colon_class(user_module, monkeypatch, capsys):
    served = []
    monkeypatch.setattr(mcp_server, "serve", lambda memory, **kw: served.append(memory.embedder.embed(["dogs"])))
    assert main(["mcp", "--store", "agent.db", "--embedder", "walk75b_bagemb:BagEmb"]) == 0
    assert len(served) == 1 and np.asarray(served[0]).shape == (1, 16)
    assert main(["mcp", "--store", "other.db", "--embedder", "walk75b_bagemb:Nope"]) == 1
    assert "has no class 'Nope'" in capsys.readouterr().err
    assert not (user_module / "other.db").exists()   # refused before the store is made
