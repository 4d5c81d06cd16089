"""TorchScript: the layers that cannot be scripted say so, naming ``torch.compile``.

``torch.jit.script(module)`` first calls ``module.__prepare_scriptable__()`` on the module and
on every submodule.  :class:`~hypermem.nn.HyperbolicMemory`, :class:`~hypermem.nn.BallEncoder`,
:class:`~hypermem.nn.HyperbolicRAG` and :class:`~hypermem.nn.LatentRetrievalReader` run Python
that TorchScript does not compile (geoopt manifolds, lambdas of the host checks, the chunked
search, callables as attributes), so there it raises ``TypeError`` naming the layer and
``torch.compile`` (the memory and the encoder compile to one graph, ``fullgraph=True``), instead
of an internal error of the scripting compiler.  A model that holds one of them is refused the same way.

``torch.jit.trace`` of a read of the memory, ``HyperbolicRAG`` or ``LatentRetrievalReader`` is refused too (:func:`refuse_tracing`, a ``TypeError`` naming
``torch.export`` and ``torch.compile``): a trace would replay one call's top-``k`` choices.
"""

from __future__ import annotations

import torch


class NotScriptable:
    """A mixin of ``nn.Module`` subclasses that TorchScript cannot compile (see the module docstring)."""

    def __prepare_scriptable__(self):
        name = type(self).__name__
        raise TypeError(f"{name} cannot be compiled by torch.jit.script (TorchScript): its forward runs Python "
                        "that TorchScript does not support. Use torch.compile(model) instead, or keep it eager")


def refuse_tracing(layer: object) -> None:
    """Raise ``TypeError`` under ``torch.jit.trace``: a trace records one call's Python branches
    and host-side values (the top-``k`` search prunes by values read on the host, the clock is
    read in Python), so a traced read would replay them for every input, returning wrong slots
    without an error.  One C call per read (``torch._C._is_tracing``)."""
    if torch.jit.is_tracing():
        raise TypeError(f"{type(layer).__name__} cannot be traced by torch.jit.trace: a trace replays one call's "
                        "top-k choices and host-side checks for every input. Use torch.export.export(model, args) "
                        "or torch.compile(model) instead (both keep the read exact), or keep it eager")
