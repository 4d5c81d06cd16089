"""The nn layers' options as config objects that a YAML file can build.

:class:`BallEncoderConfig` and :class:`HyperbolicMemoryConfig` hold every option of
:class:`~hypermem.nn.BallEncoder` and :class:`~hypermem.nn.HyperbolicMemory` that is not a
tensor, check them when created, and ``build()`` the layer.  A ``LightningModule`` takes
them as typed ``__init__`` arguments, so LightningCLI (jsonargparse) reads them from the
model's YAML in the usual ``class_path`` / ``init_args`` form::

    model:
      memory:
        class_path: hypermem.nn.HyperbolicMemoryConfig
        init_args: {slots: 512, dim: 16, value_dim: 32, metric: hyperbolic, learn_curvature: true}
      encoder:
        class_path: hypermem.nn.BallEncoderConfig
        init_args: {in_features: 384, out_features: 16, depth: learned}

and in the module: ``self.encoder = encoder.build()``,
``self.memory = memory.build(ball=self.encoder.ball)`` (one curvature for both).

A memory built from a config starts with ``slots`` keys in random directions (seeded) at
hyperbolic radius ``init_depth`` and values drawn from ``N(0, 1/value_dim)``; a memory
holding existing data comes from :meth:`HyperbolicMemory.from_memory` instead.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from ..geometry import poincare as P


def _positive_int(name: str, value, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def _shared_ball(config, ball):
    """``ValueError`` naming both when ``learn_curvature=True`` meets a shared ball whose
    curvature is fixed (the layer would silently keep it fixed); the ball otherwise."""
    if ball is not None and config.learn_curvature and not ball.learnable:
        raise ValueError(f"{type(config).__name__}(learn_curvature=True) cannot build(ball=...) with a ball whose "
                         "curvature is fixed: the shared ball decides. Build that ball with make_ball(c, "
                         "learnable=True) (e.g. the other layer's learn_curvature=True), or set "
                         "learn_curvature: false")
    return ball


def _positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


@dataclass
class BallEncoderConfig:
    """Options of :class:`~hypermem.nn.BallEncoder` (same names and meanings)."""

    in_features: int
    out_features: int
    curvature: float = 1.0
    learn_curvature: bool = False
    depth: float | str | None = None
    min_depth: float = 0.05
    init_depth: float = 1.0
    init: str = "default"
    bias: bool = True
    check_finite: bool = True

    def __post_init__(self) -> None:
        _positive_int("in_features", self.in_features)
        _positive_int("out_features", self.out_features, 2)
        _positive("curvature", self.curvature)

    def build(self, ball=None, dtype: torch.dtype | None = None, device=None):
        """The encoder; ``ball`` shares an existing ball (and its curvature) instead of ``curvature``;
        ``learn_curvature=True`` with a ball whose curvature is fixed is refused (``ValueError``)."""
        from .encoder import BallEncoder

        opts = asdict(self)
        curvature = opts.pop("curvature")
        if _shared_ball(self, ball) is not None:  # the shared ball decides whether the curvature is learned
            curvature, opts["learn_curvature"] = ball, False
        return BallEncoder(curvature=curvature, dtype=dtype, device=device, **opts)


@dataclass
class HyperbolicMemoryConfig:
    """Options of :class:`~hypermem.nn.HyperbolicMemory` plus how to initialise its slots.

    ``slots``, ``dim``: number and dimension of the keys; ``value_dim``: size of the values
    (``None``: no values, reads return ``log_0`` of the keys); ``init_depth``: hyperbolic
    radius of the initial keys; ``seed``: their random directions and values.  The other
    fields are the layer's arguments of the same name.
    """

    slots: int
    dim: int
    value_dim: int | None = None
    curvature: float = 1.0
    learn_curvature: bool = False
    metric: str = "hyperbolic"
    temperature: float = 1.0
    learn_temperature: bool = True
    learn_keys: bool = True
    learn_values: bool = True
    depth_bias: float = 0.0
    base_depth: float = 1.0
    sparse_grad: bool = False
    check_finite: bool = True
    init_depth: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        from .read_checks import METRICS

        _positive_int("slots", self.slots)
        _positive_int("dim", self.dim, 2)
        if self.value_dim is not None:
            _positive_int("value_dim", self.value_dim)
        for name in ("curvature", "temperature", "base_depth", "init_depth"):
            _positive(name, getattr(self, name))
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.learn_values and self.value_dim is None:
            raise ValueError("learn_values=True needs value_dim (or set learn_values: false)")

    def build(self, ball=None, dtype: torch.dtype | None = None, device=None):
        """The memory layer (``dtype`` default ``torch.get_default_dtype()``); ``ball`` shares
        an existing ball instead of ``curvature``/``learn_curvature`` (``learn_curvature=True``
        with a ball whose curvature is fixed is refused: ``ValueError``)."""
        from .hyperbolic_memory import HyperbolicMemory

        _shared_ball(self, ball)
        dtype = dtype or torch.get_default_dtype()
        g = torch.Generator().manual_seed(int(self.seed))
        c = self.curvature if ball is None else ball.curvature
        keys = P.point_at(torch.randn(self.slots, self.dim, generator=g, dtype=torch.float64),
                          torch.full((self.slots,), float(self.init_depth), dtype=torch.float64), c)
        values = None if self.value_dim is None else \
            torch.randn(self.slots, self.value_dim, generator=g, dtype=torch.float64) / math.sqrt(self.value_dim)
        return HyperbolicMemory(
            keys.to(dtype), None if values is None else values.to(dtype),
            curvature=self.curvature if ball is None else ball, learn_curvature=self.learn_curvature and ball is None,
            metric=self.metric, temperature=self.temperature, learn_temperature=self.learn_temperature,
            learn_keys=self.learn_keys, learn_values=self.learn_values, depth_bias=self.depth_bias,
            base_depth=self.base_depth, sparse_grad=self.sparse_grad, check_finite=self.check_finite,
            dtype=dtype, device=device)
