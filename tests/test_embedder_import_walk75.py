"""Walk 75: ``--embedder module:Class`` (:func:`hypermem.embed.choice.class_embedder`) reports a
module that does not import in one line, naming what failed (a SyntaxError, an error raised at
import, a missing dependency of the module rather than the module itself), and refuses a class
whose ``dim`` is not an integer, naming the embedder rather than the store file."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from hypermem import Memory
from hypermem.cli import main
from hypermem.embed.choice import class_embedder

MODULES = {
    "walk75i_synerr.py": "def f(:\n    pass\n",
    "walk75i_runerr.py": "raise RuntimeError('needs an API key')\n",
    "walk75i_depmiss.py": "import walk75i_not_installed_dependency\nclass E: pass\n",
    "walk75i_emb.py": (
        "import numpy as np\n"
        "class Emb:\n"
        "    dim = 8\n"
        "    def embed(self, texts):\n"
        "        return np.ones((len(texts), 8)) + np.arange(8)\n"
        "class FloatDim(Emb):\n"
        "    dim = 8.0\n"
        "class TinyDim(Emb):\n"
        "    dim = 1\n"
    ),
}


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    """The modules above in the current folder (the loader puts the folder on sys.path)."""
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name[:-3], raising=False)
    return tmp_path


CASES = [
    ("walk75i_synerr:X", "importing 'walk75i_synerr' failed (SyntaxError: invalid syntax (", "line 1))"),
    ("walk75i_runerr:X", "importing 'walk75i_runerr' failed (RuntimeError: needs an API key)", ""),
    ("walk75i_depmiss:E", "'walk75i_depmiss' needs 'walk75i_not_installed_dependency', which is not installed", ""),
    ("walk75i_emb:FloatDim", "a FloatDim's dim must be an integer >= 2, got 8.0", ""),
    ("walk75i_emb:TinyDim", "a TinyDim's dim must be an integer >= 2, got 1", ""),
]


@pytest.mark.parametrize("name, words, tail", CASES)
def test_the_loader_says_what_failed_in_one_line(user_modules, name, words, tail):
    with pytest.raises(ValueError) as err:
        class_embedder(name)
    msg = str(err.value)
    assert msg.startswith(f"--embedder {name}: ") and words in msg and msg.endswith(tail)
    assert "\n" not in msg and "PYTHONPATH" not in msg   # the module was found: the path is not to blame


def test_a_module_that_is_not_there_still_points_at_the_path(user_modules):
    for name in ("walk75i_nosuch:E", "walk75i_nosuchpkg.sub:E"):
        with pytest.raises(ValueError, match="cannot import .* must be on PYTHONPATH or in the current folder"):
            class_embedder(name)


@pytest.mark.parametrize("name, words, _tail", CASES)
def test_search_and_mcp_print_one_line(user_modules, capsys, name, words, _tail):
    sys.path.insert(0, str(user_modules))
    from walk75i_emb import Emb

    mem = Memory(embedder=Emb())
    mem.add_many([{"text": f"t{i}"} for i in range(3)])
    mem.save("s.hmem")
    capsys.readouterr()
    assert main(["search", "s.hmem", "hello", "--embedder", name]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hypermem search: error: --embedder") and words in err[0]
    assert "s.hmem" not in err[0]   # the embedder is at fault, not the file
    if not _has_mcp():
        return
    assert main(["mcp", "--store", "new.db", "--embedder", name]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0]
    assert not (user_modules / "new.db").exists()


def _has_mcp() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


def test_a_good_class_still_loads(user_modules):
    emb = class_embedder("walk75i_emb:Emb")
    assert emb.dim == 8 and np.asarray(emb.embed(["a"])).shape == (1, 8)
