"""Why a ``state_dict`` does not fit a :class:`~hypermem.nn.HyperbolicMemory`, said in torch's own
``load_state_dict`` error.

The optional per-slot tables (:data:`OPTIONAL_TABLES`: ``values``, ``depth``, ``importance`` and the
time buffers) exist only when the layer was built with them, so a checkpoint of a memory built with
timestamps is, for a layer built without, torch's ``Unexpected key(s) in state_dict: "timestamps"``
(and the reverse a missing key).  Whether that is an error is decided by ``strict`` after every
module has loaded, and no module's hook is told ``strict`` (torch passes ``True`` to each
``_load_from_state_dict``).  So the cause and the fix ride on the key itself: the entry torch
put in ``missing_keys`` / ``unexpected_keys`` is replaced by a :class:`HintedKey`, a ``str`` equal
to it (same hash, same ``repr``, so ``strict=False`` returns the keys torch would), whose
``format()`` (what torch's strict message uses) adds the explanation.

Shape mismatches are errors whatever ``strict`` says, so their hints (:func:`shape_hints`) are
appended to ``error_msgs`` after torch's ``size mismatch`` line.
"""

from __future__ import annotations

import torch

from .slot_writes import TIME_BUFFERS

OPTIONAL_TABLES = ("values", "depth", "importance", *TIME_BUFFERS)
"""The per-slot tables a layer has only when its constructor was given them."""


class HintedKey(str):
    """A key of torch's ``missing_keys`` / ``unexpected_keys``, equal to the plain key, whose
    ``format(key)`` (torch's message writes ``f'"{key}"'``) reads ``key": <hint> "key``."""

    hint = ""

    def __new__(cls, key: str, hint: str = ""):
        out = super().__new__(cls, key)
        out.hint = hint
        return out

    def __format__(self, spec: str) -> str:
        key = str.__str__(self)
        if spec or not self.hint:
            return format(key, spec)
        return f'{key}": {self.hint} "{key}'


def _unexpected_hint(name: str, state: torch.Tensor) -> str:
    what = ("values", f"values=torch.zeros(N, {state.shape[1]})") if name == "values" and state.dim() == 2 \
        else (name, f"{name}=torch.zeros(N{', dtype=torch.float64' if name in TIME_BUFFERS else ''})")
    return (f"this state was saved from a memory with {what[0]}, but this layer was built without them: "
            f"build it with {what[1]} (the loaded ones replace them) to load them, or load with strict=False "
            "to drop")


def _missing_hint(name: str) -> str:
    after = {"values": "reads then return log_0 of the keys", "depth": "the depth then comes from the keys",
             "importance": "every slot then weighs 1"}.get(name, "the time policy then does without them")
    return (f"this state was saved from a memory without {name}, but this layer has them: build it without "
            f"{name}= ({after}), or load with strict=False to keep this layer's own")


def hint_keys(state_dict, prefix: str, has, missing_keys: list, unexpected_keys: list) -> None:
    """Replace, in torch's lists, each optional table of this layer (``prefix``) that is missing
    from ``state_dict`` or there though the layer has none (``has(name)``) by a :class:`HintedKey`."""
    for name in OPTIONAL_TABLES:
        key, mine = prefix + name, has(name)
        if isinstance(state_dict.get(key), torch.Tensor) == mine:
            continue
        keys, hint = (missing_keys, _missing_hint(name)) if mine \
            else (unexpected_keys, _unexpected_hint(name, state_dict[key]))
        for i, k in enumerate(keys):
            if k == key and not isinstance(k, HintedKey):
                keys[i] = HintedKey(key, hint)


def shape_hints(state_dict, prefix: str, dim: int, value_dim: int | None, rows: int, blocker) -> list[str]:
    """What torch's ``size mismatch`` of the keys or values means: another dimension (fixed by the
    constructor), or a slot count that could not follow the checkpoint (``blocker(rows)``: why,
    or ``None``)."""
    out = []
    keys, values = state_dict.get(prefix + "keys"), state_dict.get(prefix + "values")
    if isinstance(keys, torch.Tensor) and keys.dim() == 2:
        if keys.shape[1] != dim:
            out.append(f"{prefix}keys: the checkpoint's keys are points of a {keys.shape[1]}-dimensional ball, this "
                       f"layer's of a {dim}-dimensional one; a memory's dimension is fixed by its constructor "
                       f"(unlike its slot count): build the layer with keys of dimension {keys.shape[1]}")
        elif keys.shape[0] != rows and (why := blocker(keys.shape[0])) is not None:
            out.append(f"{prefix}keys: the slot count follows a checkpoint ({keys.shape[0]} slots here, {rows} in "
                       f"the layer) only when every per-slot table of the layer is in it with that row count: {why}")
    if isinstance(values, torch.Tensor) and values.dim() == 2 and value_dim is not None and values.shape[1] != value_dim:
        out.append(f"{prefix}values: the checkpoint holds values of dimension {values.shape[1]}, this layer's {value_dim}: "
                   f"build the layer with values of dimension {values.shape[1]}")
    return out
