"""When a layer's ``sparse_grad=True`` gathers give sparse gradients, and when they cannot.

:class:`~hypermem.nn.HyperbolicMemory` (and :class:`~hypermem.nn.HyperbolicRAG`, whose default
is ``sparse_grad=True``) gathers the rows a top-``k`` read touches with
``F.embedding(rows, table, sparse=True)``, so the table's gradient is a sparse tensor of
``batch x k`` rows, whatever the number of slots.

``torch.nn.parallel.DistributedDataParallel`` cannot reduce such a gradient here: its reducer
expects a sparse gradient only for the parameters of ``nn.Embedding`` / ``nn.EmbeddingBag``
modules built with ``sparse=True`` (``_build_params_for_reducer``, per *module*, for every
parameter of that module), and reads any other parameter's gradient as a dense bucket view
(``NotImplementedError: Cannot access storage of SparseTensorImpl``, whatever the world size).
The memory cannot be such a module: its ``log_temperature`` (and a learned curvature) get
dense gradients, and so do its keys in a full read (``k=None``); making the keys an embedding
submodule would rename them in every ``state_dict`` and optimizer.  So while
``torch.distributed`` is initialised (``init_process_group``, which DDP needs), the gathers
are dense (``index_select``: a ``(N, d)`` gradient, zero outside the rows read, which DDP
all-reduces like any other); :func:`sparse_rows_allowed` says which, and the first dense
fallback of a process warns once.  Train those tables with a dense optimizer then
(:class:`geoopt.optim.RiemannianAdam`; :meth:`HyperbolicRAG.optimizers` does so by itself).
"""

from __future__ import annotations

import warnings

import torch
import torch.distributed as dist

_HAS_DIST = dist.is_available()
_warned = False

DENSE_UNDER_DDP = ("sparse_grad=True: torch.distributed is initialised, so {owner} gathers its rows densely "
                   "(dense gradients of the whole table): DistributedDataParallel accepts sparse gradients "
                   "only from nn.Embedding(sparse=True) modules. Train these parameters with a dense "
                   "optimizer (geoopt.optim.RiemannianAdam), not SparseRiemannianAdam (see docs/nn.md, "
                   "'Distributed training')")
"""The one warning a process gets when a ``sparse_grad=True`` layer gathers densely."""


def sparse_rows_allowed() -> bool:
    """``True`` unless ``torch.distributed`` is initialised (then a gather of rows with
    ``sparse_grad=True`` is dense; see the module docstring).  Two Python calls, no tensor
    work; under ``torch.compile`` Dynamo folds it to a constant."""
    return not (_HAS_DIST and dist.is_initialized())


def sparse_gather_ok(owner: str) -> bool:
    """:func:`sparse_rows_allowed`, warning once per process (:data:`DENSE_UNDER_DDP`, naming
    ``owner``) the first time it is ``False`` outside ``torch.compile``."""
    if sparse_rows_allowed():
        return True
    global _warned
    if not _warned and not torch.compiler.is_compiling():
        _warned = True
        warnings.warn(DENSE_UNDER_DDP.format(owner=owner), UserWarning, stacklevel=3)
    return False
