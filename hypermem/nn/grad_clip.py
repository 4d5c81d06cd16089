r"""Gradient-norm clipping that also takes sparse gradients.

``torch.nn.utils.clip_grad_norm_`` fails on a sparse gradient (``NotImplementedError: Could
not run 'aten::linalg_vector_norm' with arguments from the 'SparseCPU' backend``), which the
keys (and learned values) of a ``sparse_grad=True`` :class:`~hypermem.nn.HyperbolicMemory`
get, and so :class:`~hypermem.nn.HyperbolicRAG` with its defaults.  :func:`clip_grad_norm_`
coalesces each sparse gradient (a row read twice is one row, so its norm is the norm of the
summed row) and clips the dense gradients and the sparse ones' stored values together:

.. math::

    \lVert g \rVert_p = \big\lVert (\lVert g_1 \rVert_p, \dots, \lVert g_m \rVert_p) \big\rVert_p,
    \qquad g_i \leftarrow g_i \cdot \min\Big(1, \frac{\text{max\_norm}}{\lVert g \rVert_p + 10^{-6}}\Big),

the total norm and the scaling of ``torch.nn.utils.clip_grad_norm_`` (the rows a sparse
gradient does not store are zero and count for nothing).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["clip_grad_norm_"]


def clip_grad_norm_(parameters: torch.Tensor | Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for parameters with dense or sparse gradients.

    Parameters
    ----------
    parameters: a tensor or an iterable of tensors whose ``.grad`` is clipped in place (a
        sparse ``.grad`` is replaced by its coalesced form first).
    max_norm: the largest total norm of the gradients.
    norm_type: ``p`` of the norms (``float("inf")`` for the largest entry).
    error_if_nonfinite: raise ``RuntimeError`` when the total norm is NaN or inf.
    foreach: as torch's for the total norm (``None``: the fast path where the device has one).

    Returns the total norm of the gradients before clipping, as torch's does.
    """
    params = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
    grads = []
    for p in params:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            p.grad = p.grad.coalesce()
            grads.append(p.grad.values())  # a view: scaling it scales the sparse gradient
        else:
            grads.append(p.grad)
    total = torch.nn.utils.get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    coef = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)  # no host sync, as torch's
    for g in grads:
        g.mul_(coef.to(g.device))
    return total
