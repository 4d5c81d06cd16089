"""Slot indices given to the nn layers: integers only, never floats silently truncated."""

from __future__ import annotations

import torch

_INTEGER = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


def as_indices(name: str, value, device=None) -> torch.Tensor:
    """``value`` as a ``long`` tensor on ``device``; ``TypeError`` naming ``name`` for float,
    complex or boolean values (``1.7`` is not slot 1, and a mask is not a list of slots)."""
    t = value if isinstance(value, torch.Tensor) else torch.as_tensor(value)
    if t.dtype not in _INTEGER and not (t.numel() == 0 and t.dtype == torch.float32):
        raise TypeError(f"{name} must hold integer slot indices, got {t.dtype}"
                        + (" (a boolean mask? use mask.nonzero())" if t.dtype == torch.bool else ""))
    return t.to(device=device, dtype=torch.long)
