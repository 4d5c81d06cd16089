"""The decay policy of a durable store is one of its stored settings: ``Memory.open`` refuses another.

A store records its decay policy when it is created (``hm_config`` / ``hypermem_config``:
``policy_spec(decay)``).  Every process that opens it, and the command line (``hypermem stats``,
``search``, ``mcp --store``), ranks with that policy, so a ``decay=`` that differs from it is a
``ValueError`` naming both policies, as ``time_coef=`` or ``curvature=`` are (SQLite and
PostgreSQL alike, :func:`hypermem.store.backends.opening.open_memory`).  Passing the stored policy
again is accepted, and a custom policy (not built in) must be passed again: its spec records only
its class name, so one of that class is accepted.  To change the policy, copy the store into a new
one (``docs/storage.md``, "Reopening a store, and changing a stored setting").
"""

from __future__ import annotations

from typing import Any

from ...temporal import CustomPolicyError, PolicySpecError, policy_from_spec, policy_spec

__all__ = ["check_stored_decay", "other_than_saved"]


def other_than_saved(spec: Any, decay: Any) -> str | None:
    """``None`` when ``decay`` is the policy ``spec`` records (``None``: no decay; a custom
    policy: one of the recorded class) or ``spec`` is unreadable, else the recorded policy in
    words (its ``repr``, or ``<a custom policy 'Name'>``).  The rule of :func:`check_stored_decay`."""
    try:
        was = repr(policy_from_spec(spec))
    except CustomPolicyError:
        was = f"<a custom policy {str(spec.get('type'))[:80]!r}>"
    except PolicySpecError:
        return None
    return None if policy_spec(decay) == (policy_spec(policy_from_spec(None)) if spec is None else spec) else was


def check_stored_decay(spec: Any, decay: Any, where: str) -> None:
    """Refuse ``decay`` (given to ``Memory.open``; ``None``: not given) when it is not the
    policy ``spec`` the store at ``where`` was created with.  An unreadable spec is left to
    :func:`~hypermem.store.validation.decay_from_spec` (the given policy stands in for it, as before)."""
    was = None if decay is None else other_than_saved(spec, decay)
    if was is None:
        return
    raise ValueError(f"{where} was created with decay={was}; cannot open it with decay={decay!r}: a store keeps "
                     f"its decay policy, so every process and the command line rank it alike. Open it without "
                     f"decay= (the stored {was}), or copy it into a new store with the new policy "
                     f"(docs/storage.md, \"Reopening a store, and changing a stored setting\")")
