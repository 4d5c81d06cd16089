r"""Where a memory goes in the ball: direction from its embedding, depth from its level.

A memory at hierarchy level ``l`` (roots are level 0) sits at hyperbolic radius
``base_depth + l * depth_step``.  A root's direction is its unit embedding ``e``; a
child's direction is pulled toward its parent's direction ``u_p``:

``u = normalize((1 - a) e + a u_p)``, ``a = inherit``.

With ``cone_constrained`` the child must also lie in its parent's entailment cone
(Ganea et al. 2018): when ``u`` leaves it, the pull ``a`` is raised by bisection to the
smallest value that puts the child inside (``a = 1`` puts it on the parent's ray, which is
always inside, since the child is deeper).
"""

from __future__ import annotations

import torch

from ..geometry import poincare as P
from ..retrieval.cones import cone_angle, half_aperture

CONE_MARGIN = 1e-7
"""Children are placed at least this many radians inside their parent's cone, so that
membership survives rounding (stored in float32 too)."""
_BISECT_STEPS = 40


def unit(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Rows scaled to unit norm (zero rows stay zero); written to ``out`` when given."""
    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return torch.div(x, n.clamp_min_(1e-300 if x.dtype == torch.float64 else 1e-30), out=out)


def mix(e: torch.Tensor, up: torch.Tensor, a: torch.Tensor | float) -> torch.Tensor:
    """``normalize((1 - a) e + a up)``; falls back to ``up`` where the mix vanishes."""
    if isinstance(a, float):
        v = torch.add(e * (1.0 - a), up, alpha=a)  # one temporary, updated in place
    else:
        a = torch.as_tensor(a, dtype=e.dtype, device=e.device)
        if a.dim() == 1:
            a = a.unsqueeze(1)
        v = (1.0 - a) * e + a * up
    n = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
    vanished = n <= 1e-12
    v.div_(n.clamp_min_(1e-300))
    if bool(vanished.any()):
        v = torch.where(vanished, up, v)
    return v


def child_directions(e: torch.Tensor, parent_dir: torch.Tensor, parent_depth: torch.Tensor,
                     child_depth: torch.Tensor, inherit: float, cone_constrained: bool, cone_k: float,
                     c: float) -> torch.Tensor:
    """Directions ``(n, d)`` of children with unit embeddings ``e`` under parents with unit
    directions ``parent_dir`` at radii ``parent_depth``; the children sit at ``child_depth``."""
    u = mix(e, parent_dir, inherit)
    if not cone_constrained:
        return u
    x = P.point_at(parent_dir, parent_depth, c)
    psi = half_aperture(x, c, cone_k)

    def inside(xs, us, ds, ps):
        return cone_angle(xs, P.point_at(us, ds, c), c) <= ps - CONE_MARGIN

    bad = ~inside(x, u, child_depth, psi)
    if not bool(bad.any()):
        return u
    eb, pb, xb, db, psb = e[bad], parent_dir[bad], x[bad], child_depth[bad], psi[bad]
    lo = torch.full((eb.shape[0],), float(inherit), dtype=e.dtype, device=e.device)
    hi = torch.ones_like(lo)
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        ok = inside(xb, mix(eb, pb, mid), db, psb)
        hi = torch.where(ok, mid, hi)
        lo = torch.where(ok, lo, mid)
    u = u.clone()
    u[bad] = mix(eb, pb, hi)
    return u
