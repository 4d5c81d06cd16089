"""Walk 75b: on a terminal (or in a notebook) fit_hierarchy_encoder shows one bar, its own; the
encode passes of its validations are quiet, while a user's own encode still shows its bar."""

from __future__ import annotations

import io
import sys

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.embed.progress import interactive, quiet_progress  # noqa: E402
from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder  # noqa: E402

torch.set_num_threads(1)


class Terminal(io.StringIO):
    """Standard error as a terminal: what a user's shell gives."""

    def isatty(self):
        return True


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def bars(monkeypatch):
    """Every tqdm bar made while the test runs that is shown (not ``disable``d), by description."""
    from tqdm.std import tqdm

    made: list[str] = []
    real = tqdm.__init__

    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        if not self.disable:
            made.append(str(self.desc))

    monkeypatch.setattr(tqdm, "__init__", init)
    return made


@pytest.fixture
def small_batches(monkeypatch):
    """Encoders of batches of 4, so every validation's encode takes several batches (a bar's worth)."""
    real = HierarchyEncoder.from_pretrained

    def from_pretrained(*args, **kwargs):
        enc = real(*args, **kwargs)
        enc.batch_size = 4
        return enc

    monkeypatch.setattr(HierarchyEncoder, "from_pretrained", from_pretrained)


def test_quiet_progress_hides_bars_inside_only(monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert interactive()
    with quiet_progress():
        assert not interactive()
        with quiet_progress():
            assert not interactive()
        assert not interactive()
    assert interactive()
    with pytest.raises(RuntimeError), quiet_progress():
        raise RuntimeError("inside")
    assert interactive()   # back after an error too


@pytest.mark.filterwarnings("ignore:fit_hierarchy_encoder. the validation holds")
def test_a_fit_on_a_terminal_shows_its_own_bar_and_no_validation_bars(tiny, bars, small_batches, monkeypatch):
    monkeypatch.setattr(sys, "stderr", Terminal())
    val = [("tabby", "cat"), ("rose", "flower"), ("oak", "tree")]
    train = [e for e in EDGES if e not in val]
    enc = fit_hierarchy_encoder(train, NAMES, base=str(tiny), epochs=2, max_minutes=5, batch_size=8, negatives=3,
                                hard_negatives=2, validation_edges=val, validate_every=2, frozen_layers=0)
    assert len(enc.config["history"]) >= 3   # several validations ran, each encoding > 4 texts
    assert bars == ["hierarchy encoder"]
    assert "val_f1" in sys.stderr.getvalue()   # the training bar reports the validations instead
    bars.clear()
    enc.encode([NAMES[e] for e in sorted(NAMES)])   # the user's own call: more than one batch
    assert bars == ["Batches"]


@pytest.mark.filterwarnings("ignore:fit_hierarchy_encoder. the validation holds")
def test_a_fit_in_a_budget_off_a_terminal_shows_nothing(tiny, bars, small_batches, monkeypatch):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    val = [("tabby", "cat"), ("rose", "flower"), ("oak", "tree")]
    train = [e for e in EDGES if e not in val]
    enc = fit_hierarchy_encoder(train, NAMES, base=str(tiny), max_minutes=5, max_steps=2, batch_size=8,
                                negatives=3, hard_negatives=2, validation_edges=val, frozen_layers=0)
    assert enc.config["steps"] == 2
    assert bars == []
    enc.encode([NAMES[e] for e in sorted(NAMES)])
    assert bars == []
