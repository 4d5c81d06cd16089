"""Fixtures shared by the test modules: devices, one thread, a fake clock, the shipped mammals."""

import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from installed_wheel import bare_venv, venv, wheel  # noqa: E402,F401  (session fixtures: the installed wheel)
from pg_fixture import pg_server, pg_url  # noqa: E402,F401  (one PostgreSQL server for the whole run)

# The property suites draw the same examples on every run, so CI is reproducible: a failure seen
# once is seen again. `HYPOTHESIS_PROFILE=explore ./scripts/test.sh` draws fresh examples.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

from hypermem.data.wordnet import load_mammals  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))  # experiments/ and benchmarks/ are not installed: import them from the checkout

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return torch.device(request.param)


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="CUDA is not available on this machine")
        for item in items:
            if "cuda" in item.keywords or "[cuda" in item.nodeid:
                item.add_marker(skip)


@pytest.fixture
def one_thread():
    """Small tensors: one torch thread avoids thread-pool overhead on a busy machine.

    Opt in per module with ``pytestmark = pytest.mark.usefixtures("one_thread")``.
    """
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
"""The start of :func:`clock` in a test module that defines no ``T0`` of its own."""


class FakeClock:
    """A clock that only moves when told to (tests never sleep): ``clock()`` is ``clock.now``;
    set ``clock.now`` or move it with ``clock.tick(minutes=5)`` (``timedelta`` arguments)."""

    def __init__(self, start: datetime = T0):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, **kwargs) -> datetime:
        self.now += timedelta(**kwargs)
        return self.now


@pytest.fixture
def clock(request):
    """A :class:`FakeClock` at the test module's ``T0`` (:data:`T0` when the module has none)."""
    return FakeClock(getattr(request.module, "T0", T0))


@pytest.fixture(scope="session")
def make_clock():
    """``make_clock(start)``: a new :class:`FakeClock` (for module-scoped fixtures, or a second
    clock in one test)."""
    return FakeClock


@pytest.fixture(scope="session")
def mammals():
    """The shipped mammal.n.01 hierarchy (:func:`hypermem.data.wordnet.load_mammals`: 1,180
    synsets, 6,540 closure pairs), loaded once; a test that changes it takes its own copy."""
    return load_mammals()
