"""Whether a tensor is being mapped by :func:`torch.func.vmap`.

Under ``vmap`` a tensor has no single value to read on the host (``bool(t)``, ``t.item()``
raise), and ops with an ``out=`` argument (the chunked top-k search) have no batching rule.
The layers and losses of :mod:`hypermem.nn` ask :func:`is_vmapped` to take another route
there: a top-k read scores every slot densely (:meth:`HyperbolicMemory._select
<hypermem.nn.HyperbolicMemory.select>`), :func:`~hypermem.nn.memory_info_nce` leaves its
host range check of ``targets`` to ``cross_entropy``.
"""

from __future__ import annotations

import torch

# torch.func has no public test for "this tensor is batched by vmap" (torch 2.x); functorch's
# own helpers are private, so they are used here and nowhere else.
_functorch = torch._C._functorch


def is_vmapped(t: torch.Tensor) -> bool:
    """True when ``t`` is batched by :func:`torch.func.vmap`, at any level of functorch's
    wrappers (``vmap(grad(f))`` wraps the batched tensor in a gradient-tracking one).  A
    plain tensor costs one call into C++.  False under ``torch.compile``, which traces
    ``vmap`` itself (and cannot trace these helpers)."""
    if torch.compiler.is_compiling():
        return False
    while _functorch.is_functorch_wrapped_tensor(t):
        if _functorch.is_batchedtensor(t):
            return True
        t = _functorch.get_unwrapped(t)
    return False
