"""A memory file's decay policy on load: ``Memory.load(path, decay=...)`` must name the saved one.

``Memory.open`` refuses a ``decay=`` other than the policy a store was created with
(:mod:`hypermem.store.backends.stored_decay`); ``Memory.load`` and ``Memory.from_json`` do the
same with the policy a file was saved with (``policy_spec``), so that a wrong policy is never
taken silently: passing the saved built-in policy again is accepted, and a custom policy (the
file records only its class name) must be passed again, one of that class.  A loaded memory is
the caller's own copy: ``mem.decay = other`` then ranks it with another policy.
"""

from __future__ import annotations

from typing import Any

from ..temporal import CustomPolicyError, PolicySpecError, policy_from_spec, policy_spec

__all__ = ["check_saved_decay", "other_than_saved"]


def other_than_saved(spec: Any, decay: Any) -> str | None:
    """``None`` when ``decay`` is the policy ``spec`` records (``None``: no decay; a custom
    policy: one of the recorded class) or ``spec`` is unreadable, else the recorded policy in
    words (its ``repr``, or ``<a custom policy 'Name'>``).  ``Memory.open``'s rule too
    (:mod:`hypermem.store.backends.stored_decay`)."""
    try:
        was = repr(policy_from_spec(spec))
    except CustomPolicyError:
        was = f"<a custom policy {str(spec.get('type'))[:80]!r}>"
    except PolicySpecError:
        return None
    return None if policy_spec(decay) == (policy_spec(policy_from_spec(None)) if spec is None else spec) else was


def check_saved_decay(spec: Any, decay: Any, where: str) -> Any:
    """``decay`` (given to a load), or a ``ValueError`` when it is not the policy ``spec`` that the
    file at ``where`` was saved with (``None``: no decay).  An unreadable spec is left to the caller."""
    was = other_than_saved(spec, decay)
    if was is None:
        return decay
    raise ValueError(f"{where} was saved with decay={was}; cannot load it with decay={decay!r}: pass the saved "
                     f"policy (a built-in one needs no decay=), then set mem.decay = <the new policy> on the "
                     f"loaded memory to rank it with another, as Memory.open refuses another policy too")
