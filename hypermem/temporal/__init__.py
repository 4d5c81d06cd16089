"""Temporal policies and time conversion (layer 2)."""

from .bounds import uses_access_counts, weight_upper_bound
from .clock import from_seconds, to_seconds, to_utc, utcnow
from .policies import (
    MIN_WEIGHT,
    CustomPolicyError,
    DecayPolicy,
    Ebbinghaus,
    HalfLife,
    NoDecay,
    PolicySpecError,
    Product,
    ValidityWindow,
    fresh_weights,
    generative_agents_recency,
    policy_from_spec,
    policy_spec,
    policy_weights,
)

__all__ = [
    "MIN_WEIGHT",
    "CustomPolicyError",
    "DecayPolicy",
    "Ebbinghaus",
    "HalfLife",
    "NoDecay",
    "PolicySpecError",
    "Product",
    "ValidityWindow",
    "fresh_weights",
    "generative_agents_recency",
    "policy_from_spec",
    "policy_spec",
    "policy_weights",
    "weight_upper_bound",
    "uses_access_counts",
    "utcnow",
    "to_utc",
    "to_seconds",
    "from_seconds",
]
