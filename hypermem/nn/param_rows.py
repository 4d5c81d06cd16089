"""Growing and shrinking the rows of :class:`~hypermem.nn.HyperbolicMemory`'s parameters in place.

``append`` and ``remove`` change the number of slots ``N``.  They keep the ``keys`` (a
``geoopt.ManifoldParameter``, same manifold) and a trainable ``values`` as the *same
Parameter objects* and swap only their storage (``param.data = new``), so an optimizer built
before the write still holds them and keeps training the grown or shrunk memory, and a
``torch.compile``'d model recompiles for the new shape.

* An optimizer without per-parameter state (``torch.optim.SGD`` without momentum,
  ``geoopt.optim.RiemannianSGD`` without momentum) needs nothing more.
* An optimizer with state of the parameter's shape (Adam's moments, a momentum buffer,
  Adagrad's sum): pass it to the write (``memory.append(k, v, optimizer=opt)``, a list for
  several) and every state tensor of the parameter's old shape is resized with it: the kept
  rows keep their state, new rows start at zero (what a fresh optimizer starts them at),
  removed rows are dropped; scalars (Adam's step count) are kept.  Without it the next
  ``opt.step()`` raises torch's shape error (``RuntimeError: The size of tensor a (10) must
  match the size of tensor b (12) at non-singleton dimension 0``) before it moves anything:
  loud, never silent.
* A pending dense gradient (a ``backward()`` before the write) is resized the same way; a
  sparse one (``sparse_grad=True``) is dropped.
* A loss computed before the write cannot be backpropagated after it: the write changes the
  parameter in place, so that ``backward()`` raises torch's "modified by an inplace operation"
  (call ``backward()`` before writing, as a gradient step would).
* A write under ``torch.inference_mode()`` keeps the parameters normal tensors, trainable after.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def as_optimizers(optimizer) -> list[torch.optim.Optimizer]:
    """``optimizer`` (``None``, one optimizer, or an iterable of them) as a list; ``TypeError``
    naming anything that is not an optimizer (no ``state`` / ``param_groups``)."""
    if optimizer is None:
        return []
    opts = [optimizer] if hasattr(optimizer, "param_groups") else optimizer
    if not isinstance(opts, Iterable):
        raise TypeError(f"optimizer must be a torch optimizer or a list of them, got {type(optimizer).__name__}")
    opts = list(opts)
    for o in opts:
        if not (hasattr(o, "param_groups") and hasattr(o, "state")):
            raise TypeError(f"optimizer must be a torch optimizer or a list of them, got {type(o).__name__}")
    return opts


def check_holds(optimizers: list[torch.optim.Optimizer], params: list[torch.Tensor]) -> list[torch.optim.Optimizer]:
    """The optimizers of ``optimizers`` that hold some of ``params`` (the memory's trainable keys /
    values): those whose state must follow a write.  In a list, the others (a dense optimizer for
    the temperature beside a sparse one for the keys, as ``rag.optimizers()`` returns) are
    skipped; a ``ValueError`` when none holds them: the optimizer was surely not meant."""
    kept = [o for o in optimizers if any(id(p) in {id(q) for g in o.param_groups for q in g["params"]}
                                         for p in params)]
    if optimizers and not kept:
        names = ", ".join(type(o).__name__ for o in optimizers)
        raise ValueError(f"optimizer {names} holds neither the keys nor the values of this memory "
                         "(frozen, or built over other parameters): pass the optimizer that trains them")
    return kept


def resize_rows(t: torch.Tensor, keep: torch.Tensor | None, n_add: int) -> torch.Tensor:
    """Rows ``keep`` of ``t`` (all for ``None``), then ``n_add`` rows of zeros."""
    rows = t if keep is None else t[keep]
    if n_add:
        rows = torch.cat([rows, rows.new_zeros((n_add, *t.shape[1:]))], 0)
    return rows


@torch.no_grad()
def swap_rows(param: torch.Tensor, new: torch.Tensor, keep: torch.Tensor | None, n_add: int,
              optimizers: list[torch.optim.Optimizer]) -> None:
    """Give ``param`` the storage ``new`` (rows ``keep`` of the old one, then ``n_add`` new rows),
    keeping the object (its class, manifold, hooks, and its place in every optimizer); resize
    its dense gradient and, in ``optimizers``, every state tensor of its old shape."""
    with torch.inference_mode(False):   # a write under inference_mode: the parameter stays trainable
        if new.is_inference():
            new = new.clone()
        old = param.shape
        grad = param.grad
        param.grad = None
        # Through a tensor of another dtype: torch's set_data drops the parameter's cached gradient
        # accumulator only on a change of type or device, and a graph still alive from before the
        # write (the last loss) keeps the old one, with the old shape, for the next backward.
        param.data = new.new_empty(0, dtype=torch.float16 if new.dtype != torch.float16 else torch.float32)
        param.data = new
        # the parameter changed in place: a graph built before the write now raises torch's own
        # "modified by an inplace operation" at backward, instead of reading the new rows
        torch.autograd.graph.increment_version(param)
        if grad is not None and grad.layout == torch.strided:
            param.grad = resize_rows(grad, keep, n_add)
        for o in optimizers:
            state = o.state.get(param)
            for name, t in list((state or {}).items()):
                if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape == old:
                    state[name] = resize_rows(t, keep, n_add)
