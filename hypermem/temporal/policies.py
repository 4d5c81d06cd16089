r"""Temporal weighting policies, vectorised over stored timestamps.

A policy maps each memory's age (and optionally its access count or validity window)
to a weight in ``[MIN_WEIGHT, 1]``; the store adds ``time_coef * log(weight)`` to the
retrieval score, so a weight of 1 is neutral.  Every policy works on whole tensors:

``weight(now, times, access_counts, valid_from, valid_until) -> Tensor``

* ``now`` — POSIX seconds (float), an aware ``datetime``, or a 0-d float64 tensor of
  POSIX seconds (a deployed model's input: :func:`~hypermem.temporal.clock.seconds_scalar`;
  the built-in policies take it without reading it on the host);
* ``times`` — float64 tensor of POSIX seconds, shape ``(N,)``;
* ``access_counts`` — tensor ``(N,)``;
* ``valid_from`` / ``valid_until`` — float64 tensors of POSIX seconds, ``-inf`` / ``+inf``
  for an open bound.

Lists of datetimes (``None`` for open bounds) are accepted too and converted; a ``None``
creation time in a list, or a ``now`` that is not finite, is a ``ValueError``.

Forms from the literature:

* exponential half-life ``w = 0.5^(age / h)``; the ``0.995^hours`` recency of Generative
  Agents (Park et al., UIST 2023) is ``HalfLife(hours = ln 0.5 / ln 0.995 ~ 138.3)``;
* Ebbinghaus forgetting ``w = exp(-age / S)``, ``S = S_0 (1 + b * accesses)`` (MemoryBank,
  Zhong et al., AAAI 2024);
* validity windows (bi-temporal facts, as in Graphiti / Zep, Rasmussen et al. 2025).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

import torch

from ..geometry.numerics import MIN_WEIGHT
from .clock import HOUR, now_seconds, seconds_tensor

# MIN_WEIGHT (1e-6, hypermem.geometry.numerics): the smallest weight any built-in policy returns.


def _check_positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an int beyond float64
        v = math.inf
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def _now_seconds(now: datetime | float | torch.Tensor) -> float | torch.Tensor:
    n = now_seconds(now)  # one scalar check per call, none per row
    if not isinstance(n, torch.Tensor) and not math.isfinite(n):  # a tensor: checked by seconds_scalar
        raise ValueError(f"now must be a finite time, got {now!r}")
    return n


def _times(times: Any) -> torch.Tensor:
    t = seconds_tensor(times, math.nan)
    if not isinstance(times, torch.Tensor) and bool(t.isnan().any()):  # a list (the store passes tensors)
        raise ValueError("times: a creation time is None or NaN; every memory needs a time (None is only "
                         "for valid_from / valid_until)")
    return t


def _ages_hours(now, times) -> torch.Tensor:
    t = _times(times)
    return torch.sub(_now_seconds(now), t).div_(HOUR).clamp_min_(0.0)  # one (N,) buffer


@runtime_checkable
class DecayPolicy(Protocol):
    """Anything with a vectorised ``weight`` method (see the module docstring)."""

    def weight(self, now, times, access_counts, valid_from, valid_until) -> torch.Tensor:
        """Weights in ``[MIN_WEIGHT, 1]`` for each memory (:func:`policy_weights` floors
        nothing but clamps a custom policy's weights above 1, with a warning, and refuses a
        NaN or infinite one)."""
        ...


@dataclass(frozen=True)
class NoDecay:
    """Every memory weighs 1: time does not count."""

    def weight(self, now, times, access_counts, valid_from, valid_until) -> torch.Tensor:
        _now_seconds(now)  # the same check of now as every other policy
        return torch.ones_like(_times(times))

    def spec(self) -> dict:
        return {"type": "none"}


@dataclass(frozen=True)
class HalfLife:
    """``w = max(0.5^(age_hours / hours), MIN_WEIGHT)``; memories from the future weigh 1."""

    hours: float = 24 * 30

    def __post_init__(self) -> None:
        object.__setattr__(self, "hours", _check_positive("HalfLife.hours", self.hours))

    def weight(self, now, times, access_counts, valid_from, valid_until) -> torch.Tensor:
        age = _ages_hours(now, times)
        return age.div_(-self.hours).exp2_().clamp_min_(MIN_WEIGHT)  # in the ages' buffer

    def spec(self) -> dict:
        return {"type": "half_life", "hours": self.hours}


def generative_agents_recency() -> HalfLife:
    """The ``0.995 ** hours`` recency of Generative Agents (Park et al. 2023) as a half-life
    (``ln 0.5 / ln 0.995 ~ 138.3`` hours)."""
    return HalfLife(hours=math.log(0.5) / math.log(0.995))


@dataclass(frozen=True)
class Ebbinghaus:
    """``w = max(exp(-age_hours / S), MIN_WEIGHT)``, ``S = stability_hours * (1 + boost_per_access * accesses)``."""

    stability_hours: float = 24 * 7
    boost_per_access: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "stability_hours",
                           _check_positive("Ebbinghaus.stability_hours", self.stability_hours))
        b = self.boost_per_access
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b) or b < 0:
            raise ValueError(f"Ebbinghaus.boost_per_access must be a finite number >= 0, got {b!r}")
        object.__setattr__(self, "boost_per_access", float(b))

    def weight(self, now, times, access_counts, valid_from, valid_until) -> torch.Tensor:
        age = _ages_hours(now, times)
        acc = torch.as_tensor(access_counts, dtype=torch.float64, device=age.device)
        s = self.stability_hours * (1.0 + self.boost_per_access * acc)
        return torch.exp(-age / s).clamp_min(MIN_WEIGHT)

    def spec(self) -> dict:
        return {"type": "ebbinghaus", "stability_hours": self.stability_hours,
                "boost_per_access": self.boost_per_access}


@dataclass(frozen=True)
class ValidityWindow:
    """Weight 1 while ``valid_from <= now <= valid_until``, ``outside_weight`` otherwise.

    Missing bounds are open.  Combine with another policy through :class:`Product`.
    """

    outside_weight: float = MIN_WEIGHT

    def __post_init__(self) -> None:
        w = self.outside_weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or not 0 <= w <= 1:
            raise ValueError(f"ValidityWindow.outside_weight must be in [0, 1], got {w!r}")
        object.__setattr__(self, "outside_weight", float(w))

    def weight(self, now, times, access_counts, valid_from, valid_until) -> torch.Tensor:
        t = _times(times)
        lo = seconds_tensor(valid_from, -math.inf, device=t.device)
        hi = seconds_tensor(valid_until, math.inf, device=t.device)
        n = _now_seconds(now)
        lo = torch.nan_to_num(lo, nan=-math.inf)
        hi = torch.nan_to_num(hi, nan=math.inf)
        inside = (lo <= n) & (n <= hi)
        out = torch.full_like(t, max(self.outside_weight, MIN_WEIGHT))
        return torch.where(inside, torch.ones_like(t), out)

    def spec(self) -> dict:
        return {"type": "validity", "outside_weight": self.outside_weight}


class Product:
    """Elementwise product of several policies, e.g. ``Product(HalfLife(72), ValidityWindow())``."""

    def __init__(self, *policies: DecayPolicy) -> None:
        if not policies:
            raise ValueError("Product needs at least one policy")
        for p in policies:
            if not callable(getattr(p, "weight", None)):
                raise TypeError(f"Product takes decay policies, got {p!r}")
        self.policies = tuple(policies)

    def weight(self, now, times, access_counts, valid_from, valid_until) -> torch.Tensor:
        out = None
        for p in self.policies:
            w = torch.as_tensor(p.weight(now, times, access_counts, valid_from, valid_until),
                                dtype=torch.float64)
            out = w if out is None else out * w
        return out.clamp_min(MIN_WEIGHT)

    def spec(self) -> dict:
        return {"type": "product", "policies": [policy_spec(p) for p in self.policies]}

    def __eq__(self, other):
        return isinstance(other, Product) and self.policies == other.policies

    def __hash__(self):
        return hash(self.policies)

    def __repr__(self) -> str:
        return f"Product({', '.join(map(repr, self.policies))})"


def policy_weights(policy: DecayPolicy, now: datetime | float, times: torch.Tensor,
                   access_counts: torch.Tensor | None = None, valid_from: torch.Tensor | None = None,
                   valid_until: torch.Tensor | None = None) -> torch.Tensor:
    """``policy.weight(...)`` of ``N`` memories as a float64 tensor ``(N,)`` on the device of
    ``times``: the one place a weight vector is asked of a policy.

    Missing columns are filled in (no accesses, open validity bounds); a result of another
    shape (a custom policy's bug) raises ``ValueError``.  The weights are the policy's own
    (the built-in ones are floored at ``MIN_WEIGHT``); callers that multiply in an importance
    floor the product themselves.

    A weight lies in ``[MIN_WEIGHT, 1]`` (:class:`DecayPolicy`): the score's floor
    ``max(w, MIN_WEIGHT)`` bounds it from below, and the approximate search bounds a custom
    policy's time term by ``log 1 = 0``.  So a custom policy's weights above 1 are clamped to 1
    here, with a ``UserWarning`` naming the policy and its largest weight: the exact search and
    the index then rank alike (an index search only evaluates its candidates, so it could not
    refuse a weight it never sees).  A custom policy's non-finite weight (NaN, an infinity) is a
    ``ValueError`` naming the policy: a NaN would make its memory's score NaN, and would hide
    the weights above 1 from the check.  The built-in policies (their exact classes, and products
    of them) stay within 1 and are not checked; on an accelerator and under ``torch.compile`` /
    ``torch.export`` the clamp runs without the host-side check, warning or error (no device
    sync): weights above 1 are clamped all the same, a NaN stays NaN.
    """
    n, dev = times.shape[0], times.device
    if access_counts is None:
        access_counts = torch.zeros(n, dtype=torch.float64, device=dev)
    if valid_from is None:
        valid_from = torch.full((n,), -math.inf, dtype=torch.float64, device=dev)
    if valid_until is None:
        valid_until = torch.full((n,), math.inf, dtype=torch.float64, device=dev)
    now = now_seconds(now)
    w = torch.as_tensor(policy.weight(now, times, access_counts, valid_from, valid_until),
                        dtype=torch.float64, device=dev)
    if w.shape != (n,):
        raise ValueError(f"the decay policy returned shape {tuple(w.shape)}, expected ({n},)")
    custom = _custom_part(policy) if n else None
    if custom is not None:
        if dev.type != "cpu" or torch.compiler.is_compiling() or torch.compiler.is_exporting():
            return w.clamp_max(1.0)  # on an accelerator or traced: no host read of a value (no sync)
        low, top = (float(x) for x in torch.aminmax(w))  # one O(n) pass, custom policies only; NaN propagates
        if not (math.isfinite(low) and math.isfinite(top)):
            bad = (~torch.isfinite(w)).nonzero().flatten()
            first = int(bad[0])
            raise ValueError(f"{_named(policy, custom)} returned {bad.numel()} non-finite weight(s) of {n} (the "
                             f"first, at position {first}: {float(w[first])}): a weight is a finite number in [MIN_WEIGHT, 1] "
                             f"(1: neutral); a NaN or an infinity cannot be ranked, so fix the policy (a 0/0, "
                             f"a division by an age of 0)")
        if top > 1.0:
            warnings.warn(f"{_named(policy, custom)} returned weights above 1 (largest {top:.6g}): "
                          f"a weight lies in [MIN_WEIGHT, 1] (1: neutral), so they are taken as 1; scale the "
                          f"policy's weights into that range", UserWarning, stacklevel=2)
            return w.clamp_max(1.0)  # a copy: a custom policy may keep the tensor it returned
    return w


def _named(policy: DecayPolicy, custom: DecayPolicy) -> str:
    """How :func:`policy_weights`'s warning and error name the custom policy ``custom`` of ``policy``."""
    name = type(custom).__name__
    return f"the decay policy {name}" if custom is policy else f"a Product with the custom decay policy {name}"


BUILT_IN = (NoDecay, HalfLife, Ebbinghaus, ValidityWindow, Product)
"""The built-in policies.  Only these exact classes get built-in handling (a spec that
rebuilds them, fresh weights, the index's bounds): a subclass may override ``weight``, so
it is a custom policy like any other."""


def built_in(policy: DecayPolicy) -> bool:
    """Whether ``policy`` is an instance of one of the :data:`BUILT_IN` classes itself (not
    of a subclass)."""
    return type(policy) in BUILT_IN


def _custom_part(policy: DecayPolicy) -> DecayPolicy | None:
    """The first policy in ``policy`` (itself, or a factor of a ``Product``) that is not built
    in; None when its weights are at most 1 by construction."""
    if type(policy) is Product:
        return next((c for c in map(_custom_part, policy.policies) if c is not None), None)
    return None if built_in(policy) else policy


def fresh_weights(policy: DecayPolicy) -> bool:
    """Whether ``policy.weight`` returns a new tensor at every call, which its caller may
    overwrite: true of the built-in policies (their exact classes); a custom policy may
    return a tensor it keeps."""
    return built_in(policy)


def policy_spec(policy: DecayPolicy) -> dict:
    """A JSON-able description of a built-in policy; ``{"type": ClassName, "custom": True}``
    for others (which :func:`policy_from_spec` refuses to guess), a subclass of a built-in
    policy included: its ``weight`` may differ, so recording it as the built-in one would
    reload another ranking."""
    if built_in(policy):
        return policy.spec()
    return {"type": type(policy).__name__, "custom": True}


class PolicySpecError(ValueError):
    """A decay spec that is malformed: not an object, no ``type``, or a built-in policy with
    missing, unknown or invalid parameters (``{"type": "half_life", "hours": -1}``)."""


class CustomPolicyError(ValueError):
    """A decay spec of a policy that is not built in: it cannot be rebuilt from the file,
    the caller must pass the policy itself."""


_PARAMS = {"none": (), "half_life": ("hours",), "ebbinghaus": ("stability_hours", "boost_per_access"),
           "validity": ("outside_weight",), "product": ("policies",)}
MAX_PRODUCT_DEPTH = 8
"""Deepest nesting of ``product`` specs :func:`policy_from_spec` rebuilds."""


def policy_from_spec(spec: Mapping | None, _depth: int = 0) -> DecayPolicy:
    """Rebuild a built-in policy from :func:`policy_spec` (``None``: :class:`NoDecay`).

    Every key is checked: :class:`PolicySpecError` for a malformed spec (wrong shape,
    missing or unknown keys, a bad parameter such as ``hours: -1``, products nested deeper
    than :data:`MAX_PRODUCT_DEPTH`), :class:`CustomPolicyError` for a policy that is not
    built in; both are ``ValueError``.
    """
    if spec is None:
        return NoDecay()
    if not isinstance(spec, Mapping):
        raise PolicySpecError(f"a decay spec must be an object with a 'type', got {type(spec).__name__}")
    t = spec.get("type")
    if not isinstance(t, str):
        raise PolicySpecError(f"a decay spec needs a string 'type', got {type(t).__name__}")
    if t not in _PARAMS:
        raise CustomPolicyError(f"the decay policy {t[:80]!r} is not built in; pass decay=<the same policy> to "
                                f"restore it")
    names = _PARAMS[t]
    keys = set(spec) - {"type"}
    if keys != set(names):
        raise PolicySpecError(f"the {t!r} decay spec takes exactly the keys {sorted(names)}, got {sorted(map(str, keys))}")
    if t == "product":
        parts = spec["policies"]
        if not isinstance(parts, list) or not parts:
            raise PolicySpecError("the 'product' decay spec needs a non-empty list of policies")
        if _depth >= MAX_PRODUCT_DEPTH:
            raise PolicySpecError(f"'product' decay specs nested deeper than {MAX_PRODUCT_DEPTH} levels")
        return Product(*[policy_from_spec(p, _depth + 1) for p in parts])
    build = {"none": NoDecay, "half_life": HalfLife, "ebbinghaus": Ebbinghaus, "validity": ValidityWindow}[t]
    try:
        return build(**{k: spec[k] for k in names})
    except (TypeError, ValueError, OverflowError) as exc:
        raise PolicySpecError(f"bad {t!r} decay spec: {str(exc)[:200]}") from None
