r"""The optimizer steps of hierarchy training, and the one place that picks their speed tier.

Riemannian SGD on a loss ``L`` moves every row by (Nickel & Kiela, NeurIPS 2017, eqs. 4-5)

``theta <- proj(theta - lr (1 - c ||theta||^2)^2 / 4 grad L)``

(Euclidean baseline: ``theta <- theta - lr grad L``).  Three tiers compute the same steps:

* ``"autograd"`` — a forward, a backward and geoopt's optimizer step (any objective,
  Riemannian Adam, several processes): :func:`autograd_step`;
* ``"closed_form"`` — the softmax ranking loss's gradient written out, without autograd
  (:func:`~hypermem.hierarchy.fused_sgd.softmax_sgd_step`, torch, any device);
* ``"compiled"`` — the same closed-form steps compiled by numba, many batches per call
  (:func:`~hypermem.hierarchy.compiled_sgd.softmax_sgd_epoch`, CPU, the ``fast`` extra).

:func:`choose_tier` is where the choice is made (both the ``fit_*`` functions and the
Lightning module ask it); :func:`make_step_optimizer` builds the optimizer of a tier — for
the two closed-form tiers a :class:`ClosedFormSGD`, geoopt's ``RiemannianSGD`` whose
``step(batch=...)`` computes the update of a batch in closed form, so a loop that counts
optimizer steps (Lightning) counts the steps actually taken — and :func:`take_step` takes
one step on one batch in any tier.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import geoopt
import torch

from .compiled_sgd import compiled_epoch_available, softmax_sgd_epoch
from .fused_sgd import candidates, softmax_sgd_step
from .model import HierarchyEmbedding

OPTIMIZERS = ("rsgd", "radam")
TIERS = ("autograd", "closed_form", "compiled")


def check_optimizer(optimizer: str, lr: float) -> None:
    """Raise ``ValueError`` unless ``optimizer`` is ``"rsgd"`` / ``"radam"`` and ``lr`` a
    finite positive number."""
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    check_lr(lr)


def check_lr(lr: float, name: str = "lr") -> None:
    """Raise ``ValueError`` naming ``name`` unless the learning rate ``lr`` is a finite positive
    real number (``0 < lr < inf``; NaN is neither)."""
    if not (isinstance(lr, numbers.Real) and 0 < lr < math.inf):
        raise ValueError(f"{name} must be a finite positive number, got {lr!r}")


def make_optimizer(params, optimizer: str = "rsgd", lr: float = 1.0, sparse: bool = False
                   ) -> torch.optim.Optimizer:
    """geoopt's Riemannian SGD (``"rsgd"``) or Adam (``"radam"``), sparse variants when
    ``sparse``."""
    check_optimizer(optimizer, lr)
    if optimizer == "rsgd":
        cls = geoopt.optim.SparseRiemannianSGD if sparse else geoopt.optim.RiemannianSGD
    else:
        cls = geoopt.optim.SparseRiemannianAdam if sparse else geoopt.optim.RiemannianAdam
    return cls(params, lr=lr)


def choose_tier(objective, optimizer: str, weight: torch.Tensor, *, custom: bool = False,
                processes: int = 1) -> str:
    """The speed tier of a training run: ``"compiled"`` or ``"closed_form"`` for Riemannian
    SGD (``optimizer="rsgd"``) on an objective with a closed-form step, in one process,
    without a custom loss or step hook (``custom``) — compiled when numba can run on
    ``weight`` (:func:`~hypermem.hierarchy.compiled_sgd.compiled_epoch_available`) —
    ``"autograd"`` otherwise."""
    if custom or not objective.closed_form or optimizer != "rsgd" or processes > 1:
        return "autograd"
    return "compiled" if compiled_epoch_available(weight, objective.geometry) else "closed_form"


class ClosedFormSGD(geoopt.optim.RiemannianSGD):
    """geoopt's :class:`~geoopt.optim.RiemannianSGD` (no momentum) whose step on the summed
    softmax ranking loss of a batch is computed in closed form.

    ``step(batch=(anchors, cand, masked_out))`` takes one step on one batch (``cand``
    ``(B, 1 + k)`` with the positive first, ``masked_out`` the candidates to ignore, as
    :func:`~hypermem.hierarchy.fused_sgd.candidates` builds them) at the group's ``lr``
    and returns the summed loss, without autograd; :meth:`steps` takes many in one call.
    ``compiled`` runs them with numba (:func:`~hypermem.hierarchy.compiled_sgd.softmax_sgd_epoch`),
    otherwise with torch (:func:`~hypermem.hierarchy.fused_sgd.softmax_sgd_step`); the
    update is the one ``RiemannianSGD`` takes on that loss's gradient, to rounding.
    ``step()`` without a batch is ``RiemannianSGD``'s step on the gradients present.
    """

    def __init__(self, params, lr: float, geometry: str = "poincare", curvature: float = 1.0,
                 compiled: bool = False):
        super().__init__(params, lr=lr)
        self.geometry, self.curvature, self.compiled = geometry, float(curvature), bool(compiled)

    def _weight(self) -> torch.Tensor:
        (weight,) = self.param_groups[0]["params"]
        return weight.data

    def step(self, closure: Callable | None = None, *, batch: tuple | None = None):
        """One step on ``batch`` (``closure``, torch's protocol, is called first when given),
        or without ``batch`` the gradient step of ``RiemannianSGD``."""
        if batch is None:
            return super().step(closure)
        if closure is not None:
            closure()
        anchors, cand, masked_out = batch
        lr, weight = self.param_groups[0]["lr"], self._weight()
        with torch.no_grad():
            if self.compiled:
                loss = softmax_sgd_epoch(weight, anchors, cand, masked_out, lr, max(anchors.shape[0], 1),
                                         self.curvature, 1, self.geometry)
                return torch.tensor(loss, dtype=torch.float64)
            return softmax_sgd_step(weight, anchors, cand, masked_out, lr, self.geometry,
                                    self.curvature).to(torch.float64)

    @torch.no_grad()
    def steps(self, anchors: torch.Tensor, cand: torch.Tensor, masked_out: torch.Tensor, batch_size: int,
              workers: int = 1) -> float:
        """:meth:`step` batch after batch over all ``P`` pairs (``batch_size`` pairs a step),
        in one compiled call when ``compiled`` (``workers`` threads at once, Hogwild; no effect
        on the torch steps); returns the summed loss."""
        lr, weight = self.param_groups[0]["lr"], self._weight()
        if self.compiled:
            return softmax_sgd_epoch(weight, anchors, cand, masked_out, lr, batch_size, self.curvature, workers,
                                     self.geometry)
        total = torch.zeros((), dtype=torch.float64, device=weight.device)
        for b in range(0, anchors.shape[0], batch_size):
            total += softmax_sgd_step(weight, anchors[b:b + batch_size], cand[b:b + batch_size],
                                      masked_out[b:b + batch_size], lr, self.geometry, self.curvature
                                      ).to(torch.float64)
        return float(total)


def make_step_optimizer(tier: str, model: HierarchyEmbedding, optimizer: str, lr: float) -> torch.optim.Optimizer:
    """The optimizer of ``tier`` for ``model``'s table: :class:`ClosedFormSGD` for the
    closed-form tiers, geoopt's (:func:`make_optimizer`, sparse when the model is) for
    ``"autograd"``."""
    if tier not in TIERS:
        raise ValueError(f"tier must be one of {TIERS}, got {tier!r}")
    if tier == "autograd":
        return make_optimizer([model.weight], optimizer, lr, sparse=model.sparse)
    check_optimizer(optimizer, lr)
    curvature = model.ball.curvature if model.geometry == "poincare" else 1.0
    return ClosedFormSGD([model.weight], lr, model.geometry, curvature, compiled=tier == "compiled")


def _backward(loss: torch.Tensor) -> None:
    loss.backward()


def autograd_step(optimizer, loss_of: Callable[[], torch.Tensor], constrain: Callable[[], None] | None = None,
                  backward: Callable[[torch.Tensor], None] = _backward) -> torch.Tensor:
    """One step through autograd: ``optimizer.step(closure)`` whose closure computes
    ``loss_of()``, zeroes the gradients and runs ``backward(loss)`` (Lightning passes
    ``manual_backward``, which DDP synchronises); then ``constrain()``.  Returns the
    detached loss."""
    def closure():
        loss = loss_of()
        optimizer.zero_grad(set_to_none=True)
        backward(loss)
        return loss

    loss = optimizer.step(closure)
    if constrain is not None:
        constrain()
    return loss.detach()


def take_step(optimizer, tier: str, objective, model: HierarchyEmbedding, pairs: torch.Tensor, neg: torch.Tensor,
              valid: torch.Tensor, backward: Callable[[torch.Tensor], None] = _backward) -> torch.Tensor:
    """One optimizer step of ``objective`` on one batch (``pairs`` ``(B, 2)``, its negatives
    and their ``valid`` mask) in ``tier``, with the optimizer :func:`make_step_optimizer`
    built for it; returns the summed loss (float64 for the closed-form tiers)."""
    if tier == "autograd":
        return autograd_step(optimizer, lambda: objective.loss(model, pairs, neg, valid),
                             lambda: objective.constrain(model), backward)
    return optimizer.step(batch=(pairs[:, 0], *candidates(pairs, neg, valid)))
