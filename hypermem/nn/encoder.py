r"""A learnable map from Euclidean features into the Poincaré ball.

:class:`BallEncoder` is a linear layer followed by the exponential map at the origin
(Ganea, Bécigneul & Hofmann, "Hyperbolic Neural Networks", NeurIPS 2018, Lemma 2):

.. math::

    v = W x + b, \qquad \exp_0(v) = \tanh(\sqrt c\,\|v\|)\,\frac{v}{\sqrt c\,\|v\|},

whose hyperbolic distance from the origin is ``2 ||v||``.  Under ``torch.autocast`` the
linear map may run in bfloat16, but the map into the ball runs with autocast off in the
parameters' dtype, so the points come out in that dtype with their full depth.  Two other depth modes keep
hypermem's split of *direction* (semantics) from *depth* (generality):

* ``depth=<float>``: every output at that hyperbolic radius, direction ``v / ||v||``
  (what :meth:`hypermem.store.Memory.embed_query` does with ``base_depth``);
* ``depth="learned"``: the radius is ``softplus(w_r . x + b_r) + min_depth``, a learned
  function of the input (specific inputs can go deeper than general ones).

``init="identity"`` (square maps only) starts as the identity, so an untrained encoder
places inputs exactly like the store does.

**NaN is refused, not passed on.**  A NaN or inf anywhere in the input row or in the
weights would come out as a NaN "point" that every later distance turns into NaN.  With
``check_finite=True`` (the default) a forward whose output is not finite raises
``ValueError`` saying which: ``feature row #2 has NaN coordinates`` or ``BallEncoder weights
hold NaN or inf (linear.weight)`` (a diverged optimizer step).  The check reads one boolean
on the host per forward; under ``torch.compile`` it is an async assert on CPU and skipped on
other devices (:mod:`hypermem.nn.read_checks`); ``check_finite=False`` turns it off.

**The curvature keeps its dtype under a half cast.**  ``.bfloat16()`` / ``.half()`` /
``.to(torch.float16)`` cast the weights but leave the ball's ``isp_c`` in its float64 (or
float32): an 8-bit mantissa would round a fixed curvature (2.0 would reload as 1.9974) and
freeze a learned one (a step of ``1e-3`` is below bfloat16's spacing), also for a ball shared
with a :class:`~hypermem.nn.HyperbolicMemory`.  The points are computed in the input's dtype
as before (the map into the ball in float32 for half inputs).  Casts to float32 / float64
reach the curvature as torch casts any parameter.

**After ``to_empty()``** (``.to("meta")`` then ``.to_empty(device=...)``) the weights hold
whatever the allocator left, finite or not, so a forward refuses (``ValueError: BallEncoder is
uninitialised: its parameters linear.weight, linear.bias still hold what .to_empty() allocated
...``) until ``load_state_dict()``, :meth:`BallEncoder.reset_parameters`, or a write of each weight
(:mod:`hypermem.nn.emptied`; ``check_finite`` does not turn this off: it is one attribute test).

Example::

    >>> import torch
    >>> enc = BallEncoder(8, 4, depth=1.5)
    >>> x = enc(torch.randn(3, 8))
    >>> torch.allclose(enc.ball.distance_to_origin(x), torch.full((3,), 1.5), atol=1e-5)
    True
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..geometry import PoincareBall
from ..geometry import poincare as P
from ..geometry.numerics import HALF_DTYPES
from .curvature import ball_c, shared_or_new_ball
from .emptied import TracksEmpty
from .read_checks import host_check, nonfinite_kind
from .scripting import NotScriptable

DEPTH_MODES = ("expmap", "fixed", "learned")
HUGE = 1e6
"""The largest coordinate a linear output keeps before the map into the ball: a larger row is
scaled down to it (its squares would overflow float32 from ~1e19; expmap0 puts any row past
a few hundred on the margin, and the other modes use only its direction)."""


class BallEncoder(TracksEmpty, NotScriptable, nn.Module):
    """Linear map, then into the ball (see the module docstring).

    Parameters
    ----------
    in_features, out_features: sizes of the input features and of the ball.
    curvature: positive ``c``, or a :class:`~hypermem.geometry.PoincareBall` to share with
        other layers (e.g. a :class:`~hypermem.nn.HyperbolicMemory`'s ``ball``).
    learn_curvature: train ``c`` (see :mod:`hypermem.nn.curvature`); otherwise a buffer.
    depth: ``None`` (exponential map of ``W x + b``), a positive float (fixed radius) or
        ``"learned"`` (a learned radius per input).
    min_depth: smallest learned radius (``depth="learned"``).
    init_depth: the learned radius at initialisation, before the inputs move it.
    init: ``"default"`` (PyTorch's ``nn.Linear`` initialisation) or ``"identity"``.
    bias: whether the linear map has a bias.
    dtype, device: of the weights (``nn.Linear``'s; default: PyTorch's default dtype, the CPU).
    check_finite: refuse NaN / inf outputs, naming the input row or the weights (see the
        module docstring).
    """

    def __init__(self, in_features: int, out_features: int, curvature: float | PoincareBall = 1.0,
                 depth: float | str | None = None, min_depth: float = 0.05, init_depth: float = 1.0,
                 init: str = "default", bias: bool = True, dtype: torch.dtype | None = None,
                 device: str | torch.device | None = None, learn_curvature: bool = False,
                 check_finite: bool = True):
        super().__init__()
        self.check_finite = bool(check_finite)
        if isinstance(in_features, bool) or not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a positive integer, got {in_features!r}")
        if isinstance(out_features, bool) or not isinstance(out_features, int) or out_features < 2:
            raise ValueError(f"out_features must be an integer >= 2, got {out_features!r}")
        self.ball = shared_or_new_ball(curvature, learn_curvature)
        # the ball's curvature at construction, for reset_parameters (None: shared, not this layer's)
        self._own_curvature = None if isinstance(curvature, PoincareBall) else self.ball.curvature
        self.linear = nn.Linear(in_features, out_features, bias=bias, dtype=dtype, device=device)
        if init == "identity" and in_features != out_features:
            raise ValueError(f"init='identity' needs in_features == out_features, got {in_features} "
                             f"and {out_features}")
        if init not in ("default", "identity"):
            raise ValueError(f"init must be 'default' or 'identity', got {init!r}")
        self.init = init
        self.depth_head: nn.Linear | None = None
        self.fixed_depth: float | None = None
        if depth is None:
            self.mode = "expmap"
        elif depth == "learned":
            self.mode = "learned"
            if not (math.isfinite(min_depth) and min_depth >= 0):
                raise ValueError(f"min_depth must be >= 0, got {min_depth!r}")
            if not (math.isfinite(init_depth) and init_depth > min_depth):
                raise ValueError(f"init_depth must be > min_depth, got {init_depth!r}")
            self.min_depth = float(min_depth)
            self.depth_head = nn.Linear(in_features, 1, dtype=dtype, device=device)
            y = init_depth - min_depth
            self._depth_bias0 = y + math.log(-math.expm1(-y))  # softplus^-1(init_depth - min_depth)
        elif isinstance(depth, (int, float)) and not isinstance(depth, bool) and math.isfinite(depth) and depth > 0:
            self.mode = "fixed"
            self.fixed_depth = float(depth)
        else:
            raise ValueError(f"depth must be None, 'learned' or a positive number, got {depth!r}")
        self._init_weights()

    @torch.no_grad()
    def _init_weights(self) -> None:
        """What ``init`` and a learned depth set on top of ``nn.Linear``'s initialisation: the
        identity map (``init="identity"``); the depth head's zero weight and its bias
        ``softplus^-1(init_depth - min_depth)`` (every input at ``init_depth`` at first)."""
        if self.init == "identity":
            self.linear.weight.copy_(torch.eye(self.linear.in_features))
            if self.linear.bias is not None:
                self.linear.bias.zero_()
        if self.depth_head is not None:
            self.depth_head.weight.zero_()
            self.depth_head.bias.fill_(self._depth_bias0)

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """The constructor's initialisation again (``nn.Linear``'s, then ``init``, the depth
        head's, and the curvature this layer was built with unless its ball is shared): what
        torch's ``to_empty()`` flow calls before training from scratch
        (:mod:`hypermem.nn.emptied`)."""
        self.linear.reset_parameters()
        if self.depth_head is not None:
            self.depth_head.reset_parameters()
        self._init_weights()
        if self._own_curvature is not None:
            self.ball.isp_c.copy_(PoincareBall(self._own_curvature, self.ball.learnable).isp_c)

    @property
    def curvature(self) -> float:
        return self.ball.curvature

    def _apply(self, fn, recurse=True):
        # a cast to float16 / bfloat16 leaves the ball's isp_c (and its gradient) in its own dtype,
        # moving it to the new device only (see the module docstring)
        ball = [t for p in (*self.ball.parameters(), *self.ball.buffers()) for t in (p, p.grad) if t is not None]

        def keep_curvature(t):
            out = fn(t)
            if out.dtype in HALF_DTYPES and t.dtype not in HALF_DTYPES and any(t is b for b in ball):
                return t.to(out.device)
            return out

        return super()._apply(keep_curvature, recurse)

    def extra_repr(self) -> str:
        # what the constructor takes: depth=None (the exponential map), a number, or 'learned'
        if self.mode == "fixed":
            d = f"{self.fixed_depth:g}"
        else:
            d = "None" if self.mode == "expmap" else f"'learned', min_depth={self.min_depth:g}"
        learn = ", learn_curvature=True" if self.ball.learnable else ""
        return f"curvature={self.curvature:g}{learn}, depth={d}"

    def depth_of(self, x: torch.Tensor) -> torch.Tensor | None:
        """The radius chosen for each input ``(B,)`` (``None`` in expmap mode)."""
        if self.mode == "fixed":
            return torch.full(x.shape[:-1], self.fixed_depth, dtype=x.dtype, device=x.device)
        if self.mode == "learned":
            return F.softplus(self.depth_head(x)).squeeze(-1) + self.min_depth
        return None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Points ``(..., out_features)`` inside the ball for features ``(..., in_features)``."""
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"expected a tensor of features, got {type(x).__name__}")
        if x.shape[-1] != self.linear.in_features:
            raise ValueError(f"expected features of size {self.linear.in_features}, got shape {tuple(x.shape)}")
        self.refuse_if_empty()  # after .to_empty(), until loaded / initialised (one attribute test)
        w = self.linear.weight  # a method of torch.ao's dynamically quantized Linear (float32 in and out)
        dtype = w.dtype if isinstance(w, torch.Tensor) else torch.float32
        if x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
            raise ValueError(f"features are {x.dtype} but the BallEncoder's weights are {dtype}: pass "
                             f"x.to({dtype}), cast the encoder, or run it under torch.autocast")
        v = self.linear(x)
        depth = self.depth_of(x)
        # under autocast the linear map may run in bf16; the map into the ball runs in the
        # parameters' dtype (bf16's 8-bit mantissa puts every point deeper than ~5 on the margin)
        with torch.autocast(v.device.type, enabled=False):
            v = v.to(dtype) if v.is_floating_point() and v.dtype != dtype else v
            # a row whose squares would overflow (features of 1e20 in float32) is scaled down
            # first: expmap0 maps it to the margin either way, and only its direction is used
            # with a learned depth; without this its norm is inf and the point the origin
            v = v * (HUGE / v.detach().abs().amax(-1, keepdim=True)).clamp(max=1.0)
            if self.mode == "expmap":
                out = self.ball.expmap0(v)
            else:
                out = P.point_at(v, depth.to(v.dtype), ball_c(self.ball))
        if self.check_finite:
            ok = torch.isfinite(out.detach()).all(-1).reshape(-1)
            host_check(ok, lambda: self._nonfinite_message(x, ok), "BallEncoder output has NaN or inf")
        return out

    def _nonfinite_message(self, x: torch.Tensor, ok: torch.Tensor) -> str:
        """Why an output row is not finite: its input row, else the weights that are not."""
        rows = x.detach().reshape(-1, x.shape[-1])
        bad_in = ~torch.isfinite(rows).all(-1)
        if bool(bad_in.any()):
            i = int(bad_in.nonzero()[0, 0])
            return f"feature row #{i} has {nonfinite_kind(rows[i])} coordinates"
        bad = [n for n, p in self.named_parameters() if not bool(torch.isfinite(p.detach()).all())]
        if bad:
            return f"BallEncoder weights hold NaN or inf ({', '.join(bad)}): a diverged optimizer step?"
        i = int((~ok).nonzero()[0, 0])
        return f"BallEncoder output row #{i} is not finite (finite inputs and weights: an overflow)"
