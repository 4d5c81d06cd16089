"""TorchScript: the layers that cannot be scripted say so, naming ``torch.compile``.

``torch.jit.script(module)`` first calls ``module.__prepare_scriptable__()`` on the module and
on every submodule.  :class:`~hypermem.nn.HyperbolicMemory`, :class:`~hypermem.nn.BallEncoder`,
:class:`~hypermem.nn.HyperbolicRAG` and :class:`~hypermem.nn.LatentRetrievalReader` run Python
that TorchScript does not compile (geoopt manifolds, lambdas of the host checks, the chunked
search, callables as attributes), so there it raises ``TypeError`` naming the layer and
``torch.compile`` (the memory and the encoder compile to one graph, ``fullgraph=True``), instead
of an internal error of the scripting compiler.  A model that holds one of them is refused the same way.
"""

from __future__ import annotations


class NotScriptable:
    """A mixin of ``nn.Module`` subclasses that TorchScript cannot compile (see the module docstring)."""

    def __prepare_scriptable__(self):
        name = type(self).__name__
        raise TypeError(f"{name} cannot be compiled by torch.jit.script (TorchScript): its forward runs Python "
                        "that TorchScript does not support. Use torch.compile(model) instead, or keep it eager")
