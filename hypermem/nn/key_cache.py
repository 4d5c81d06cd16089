r"""The cached key geometry of :class:`~hypermem.nn.HyperbolicMemory` (a mixin of the layer).

A top-``k`` read searches by the keys' unit directions ``k_j / ||k_j||`` and hyperbolic
radii ``rho_j = d(0, k_j) = (2/\sqrt c) \operatorname{artanh}(\sqrt c \|k_j\|)`` (Nickel &
Kiela 2017, eq. 1 with one point at the origin).  They are computed once per change of the
keys or of the curvature and kept with the curvature ``c`` as a Python float, so a read
with a learnable curvature reads ``c`` from the device once per change, not once (or
several times) per read.

What the cache is valid for (:meth:`KeyCache._key_stamp`) is read without a host sync:
the keys' version counter, storage, shape, dtype and device, and the curvature: its exact
float when it is fixed, the version counter and storage of ``isp_c`` when it is learnable
(every optimizer step, ``load_state_dict`` and write under ``torch.no_grad()`` bumps it).
"""

from __future__ import annotations

import torch

from ..geometry import poincare as P
from ..geometry.numerics import safe_norm
from .read_checks import host_check


def curvature_stamp(ball) -> float | tuple:
    """What identifies ``ball``'s curvature without reading it from the device: the exact
    float of a fixed curvature (a Python attribute), the version counter, storage and device
    of the learnable one's ``isp_c`` (``RuntimeError`` from ``data_ptr`` for a
    ``torch.func``-wrapped parameter: no cache)."""
    if not ball.learnable:
        return ball.curvature
    isp = ball.isp_c
    return (isp._version, isp.data_ptr(), isp.device)


class KeyCache:
    """``key_geometry`` (cached unit directions, radii and curvature), ``refresh_key_rows``
    and the keys' ball check."""

    def _key_stamp(self) -> tuple | None:
        """What the key cache is valid for: the keys' version, storage, shape, dtype and device
        and :func:`curvature_stamp`; ``None`` for keys without storage (``torch.func``
        transforms): no cache."""
        K = self.keys
        try:
            ptr = K.data_ptr()
            c = curvature_stamp(self.ball)
        except RuntimeError:  # a functorch-wrapped tensor (torch.func.grad / vmap of functional_call)
            return None
        return (K._version, ptr, tuple(K.shape), K.dtype, K.device, c)

    def key_geometry(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Unit directions ``(N, d)`` and hyperbolic radii ``(N,)`` of the keys, cached until
        the keys or the curvature change: optimizer steps and writes under ``torch.no_grad()``
        bump their version.  Writes through ``keys.data`` (or ``ball.isp_c.data``) do not
        (``.data`` has its own version counter): call :meth:`invalidate` after them.  Keys
        without storage (``torch.func.grad`` over ``functional_call``) are not cached.

        Under ``torch.compile`` they are computed from the keys on every call, without the
        cache: TorchDynamo cannot trace the stamp's ``data_ptr`` comparison (a graph break, and
        an error under ``fullgraph=True``), and the compiled graph recomputes them cheaply."""
        if torch.compiler.is_compiling():
            self._check_keys()
            with torch.no_grad():
                K = self.keys.detach()
                radius = P.distance_to_origin(K, self.ball.curvature_arg())
                return K / safe_norm(K, keepdim=True), radius.detach()
        dirs, radius, _ = self._key_geometry()
        return dirs, radius

    def _key_geometry(self) -> tuple[torch.Tensor, torch.Tensor, float]:
        """:meth:`key_geometry` and the curvature as a float (what the search takes)."""
        stamp = self._key_stamp()
        if stamp is None:
            self._check_keys()
            K, c = self.keys.detach(), self.ball.curvature
            return K / safe_norm(K, keepdim=True), P.distance_to_origin(K, c), c
        if self._key_cache is None or self._key_cache[0] != stamp:
            K = self.keys
            if self.ball.learnable:
                c = self._project_keys()
                stamp = (K._version, *stamp[1:])
            else:
                self._check_keys()
                c = self.ball.curvature
            with torch.no_grad():
                n = safe_norm(K, keepdim=True)
                radius = P.distance_to_origin(K, c)
                self._key_cache = (stamp, K / n, radius, c)
        return self._key_cache[1], self._key_cache[2], self._key_cache[3]

    @torch.no_grad()
    def _project_keys(self) -> float:
        """A learnable ``c`` moved the ball: project the keys onto it (in place, only where
        that changes them), check them (:meth:`_check_keys`'s ``ValueError``) and return ``c``,
        with one host sync for the three (one ``tolist`` of the flags)."""
        K, ball = self.keys, self.ball
        if K.device.type == "meta":  # shape-only tracing: no values to project, check or read
            return 1.0  # a stand-in: no distance on meta has values
        inside = ball.projx(K.detach())
        c = ball.c.detach()
        flags = torch.stack([(inside == K).all().to(torch.float64), P.is_inside(inside, c).all().to(torch.float64),
                             c.to(device=K.device, dtype=torch.float64)])
        same, ok, c_float = flags.tolist()
        if not same:  # also NaN keys (NaN != NaN), as torch.equal
            K.copy_(inside)
        if not ok:
            self._check_keys()  # raises, naming the key
        return c_float

    @torch.no_grad()
    def refresh_key_rows(self, rows: torch.Tensor) -> None:
        """Update :meth:`key_geometry`'s cache for ``rows`` only, after a step that moved just those
        keys (a sparse optimizer step); with no cache for these keys the next read recomputes.
        A cache built by a read under ``torch.inference_mode()`` (a validation loop) holds inference
        tensors, which torch forbids to change in place outside that mode: it is copied first (once)."""
        K, cache, stamp = self.keys, self._key_cache, self._key_stamp()
        if cache is None or stamp is None or cache[0][1:] != stamp[1:]:
            return
        c = cache[3]  # the curvature is part of the stamp: unchanged
        kr = K[rows]
        if not bool(P.is_inside(kr, c).all()):
            self._check_keys()  # raises, naming the key that left the ball
        dirs, radius = cache[1], cache[2]
        if dirs.is_inference() and not torch.is_inference_mode_enabled():
            dirs, radius = dirs.clone(), radius.clone()  # a normal tensor outside inference_mode
        dirs[rows] = kr / safe_norm(kr, keepdim=True)
        radius[rows] = P.distance_to_origin(kr, c)
        self._key_cache = ((K._version, *cache[0][1:]), dirs, radius, c)

    def _check_keys(self) -> None:
        """``ValueError`` (:meth:`_key_error`) when a key is NaN / inf or
        left the ball."""
        if torch.compiler.is_compiling():  # no host sync: an async assert on CPU (read_checks.host_check);
            if not self.ball.learnable:    # a learned c moved the ball: eager reads project the keys first
                host_check(P.is_inside(self.keys.detach(), self.curvature), str, "a key has left the Poincaré ball")
            return
        if self.keys.device.type == "meta":  # no values to check: shape-only tracing
            return
        with torch.no_grad():
            inside = P.is_inside(self.keys, self.curvature)
            if not bool(inside.all()):
                raise ValueError(self._key_error(int((~inside).nonzero()[0])))
