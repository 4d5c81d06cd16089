import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from installed_wheel import venv, wheel  # noqa: E402,F401  (session fixtures: the installed wheel)

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
