"""A training run that leaves its caller's torch state as it found it: :func:`private_rng`.

A fit seeds torch's random number generators (its ``seed``, then one seed per step) and may
set the number of CPU threads (``threads=``).  Both are process-wide: without care, an
application that seeded its own stream would draw different numbers after the fit, and run
on the fit's thread count.  :func:`private_rng` runs the fit inside
:func:`torch.random.fork_rng` (the CPU generator, and the generator of the accelerator the
fit uses), seeds only those generators (``torch.manual_seed`` would seed every CUDA device,
initialising them), and restores the thread count on the way out, error or not.  Inside, the
fit's draws are those of its seed alone: the same seed gives the same model whatever the
caller drew before.

The generators and the thread count belong to the process, not to a thread, so fits run one
at a time: :data:`FIT_LOCK` (re-entrant: a fit may run another inside it) is held for the
whole of :func:`private_rng`.  Two fits started at once in different threads (a web app
training per user, a background job in a notebook) run one after the other; each sees the
caller's generators and thread count on entry and leaves them so, error or not.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import torch

__all__ = ["FIT_LOCK", "private_rng"]

FIT_LOCK = threading.RLock()
"""Held by :func:`private_rng` for the whole fit: fits in one process run one after the other."""


def _accelerator(device) -> tuple[str | None, list[int]]:
    """``(device type, [index])`` of an accelerator ``device``; ``(None, [])`` for the CPU."""
    dev = torch.device(device if device is not None else "cpu")
    if dev.type in ("cpu", "meta"):
        return None, []
    if dev.index is not None:
        return dev.type, [dev.index]
    current = getattr(torch.get_device_module(dev.type), "current_device", None)
    return dev.type, [current() if current is not None else 0]   # torch.mps has no current_device: one device


@contextlib.contextmanager
def private_rng(device=None, threads: int | None = None) -> Iterator[Callable[[int], None]]:
    """Run a fit on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...; ``None``: the CPU)
    with ``threads`` CPU threads (``None`` or 0: as they are); yields ``seed(n)``, which seeds
    the CPU generator and that device's.  On exit the generators' states and the thread count
    are the caller's again.  A fit in another thread waits for this one to end (:data:`FIT_LOCK`)."""
    kind, devices = _accelerator(device)
    with FIT_LOCK, _threads_kept(), torch.random.fork_rng(devices=devices, device_type=kind):
        if threads:
            torch.set_num_threads(int(threads))
        mod = torch.get_device_module(kind) if kind else None

        def seed(n: int) -> None:
            torch.default_generator.manual_seed(int(n))
            for d in devices:
                gens = getattr(mod, "default_generators", None)
                if gens:
                    gens[d].manual_seed(int(n))
                else:   # one device of its kind (mps: torch.mps.manual_seed seeds its one generator)
                    mod.manual_seed(int(n))

        yield seed


@contextlib.contextmanager
def _threads_kept() -> Iterator[None]:
    """Restore torch's CPU thread count on the way out, error or not."""
    kept = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(kept)
