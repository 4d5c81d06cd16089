"""Writing the slots of :class:`~hypermem.nn.HyperbolicMemory` (no gradient): append, update, remove.

A mixin of :class:`~hypermem.nn.HyperbolicMemory`; every write checks all its inputs
before it changes anything (all or nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..geometry import poincare as P
from ..temporal.clock import to_seconds, to_utc
from .indices import as_indices
from .param_rows import as_optimizers, check_holds, swap_rows
from .slot_ids import SlotIds, generate_ids

TIME_BUFFERS = ("timestamps", "access_counts", "valid_from", "valid_until")
"""float64 buffers (POSIX seconds, counts) that keep float64 whatever the module's dtype."""

SLOT_TABLES = ("keys", "values", "depth", "importance", *TIME_BUFFERS)
"""Every per-slot tensor of the layer (row ``j`` is slot ``j``; ``None`` where the layer has none)."""

LOADED_CHECKS = {"values": "finite", "depth": "finite", "importance": "positive", "timestamps": "finite",
                 "access_counts": "finite", "log_temperature": "finite"}
"""What the constructor requires of each tensor a ``state_dict`` may replace (``valid_from`` /
``valid_until`` may be infinite: an open window; the keys are checked by every read)."""


def check_slot_values(name: str, t: torch.Tensor, rule: str = "finite") -> None:
    """``ValueError`` unless every entry of ``t`` is finite (``rule="positive"``: and above 0):
    the rule of the constructor, ``append``, ``update`` and ``load_state_dict``."""
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} has non-finite values (NaN or infinity)")
    if rule == "positive" and not bool((t > 0).all()):
        raise ValueError(f"{name} must be positive")


class SlotWrites:
    """``append``, ``update`` and ``remove`` of :class:`~hypermem.nn.HyperbolicMemory`, and
    the checks of per-slot data they share with its constructor."""

    def _slot_tensor(self, name, value, n, matrix=False, positive=False):
        if value is None:
            return None
        K = self.keys
        t = torch.as_tensor(value).detach().to(device=K.device, dtype=K.dtype).clone()
        if matrix and (t.dim() != 2 or t.shape[0] != n):
            raise ValueError(f"{name} must have shape ({n}, value_dim), got {tuple(t.shape)}")
        if not matrix and t.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
        check_slot_values(name, t, "positive" if positive else "finite")
        return t

    def _time_tensor(self, name, value, n):
        if value is None:
            return None
        t = torch.as_tensor(value, dtype=torch.float64).detach().to(self.keys.device).clone()
        if t.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), got {tuple(t.shape)}")
        if name in ("timestamps", "access_counts"):
            check_slot_values(name, t)
        return t

    @property
    def ids(self) -> SlotIds:
        """The slot names, one distinct string per slot (a list, :class:`~hypermem.nn.slot_ids.SlotIds`)."""
        return self._slot_ids

    @ids.setter
    def ids(self, value) -> None:
        self._slot_ids = SlotIds(value)  # a new id -> row map (index_of)

    def index_of(self, ids: str | Sequence[str]) -> torch.Tensor:
        """Slot indices of ``ids`` (``KeyError`` naming an unknown id); ``O(1)`` an id (a cached map)."""
        pos = self.ids.rows()
        try:
            out = [pos[i] for i in ([ids] if isinstance(ids, str) else ids)]
        except KeyError as e:
            raise KeyError(f"unknown slot id {e.args[0]!r}") from None
        return torch.tensor(out, dtype=torch.long, device=self.keys.device)

    @staticmethod
    def _check_ids(ids, n, taken=(), start=0):
        """``n`` distinct ids not in ``taken``; ``None``: generated (:func:`~hypermem.nn.slot_ids.generate_ids`)."""
        if ids is None:
            return generate_ids(n, taken, start)
        ids = [str(i) for i in ids]
        if len(ids) != n:
            raise ValueError(f"got {len(ids)} ids for {n} slots")
        if len(set(ids)) != n or any(i in taken for i in ids):
            raise ValueError("slot ids must be distinct")
        return ids

    # ------------------------------------------------------------------ writing (no gradient)
    def _trained_rows(self, optimizer) -> list:
        """The optimizers of ``append`` / ``remove`` (:func:`~hypermem.nn.param_rows.as_optimizers`),
        each checked to hold the keys or the values, before anything changes."""
        opts = as_optimizers(optimizer)
        params = [p for p in (self.keys, self.values) if isinstance(p, nn.Parameter)]
        check_holds(opts, params)
        return opts

    def _resize(self, keep: torch.Tensor | None, add: dict[str, torch.Tensor | None] | None, n_add: int,
                optimizers=()) -> None:
        """Rebuild every per-slot tensor: keep the rows ``keep`` and append the rows ``add``.  The
        keys and trainable values stay the same Parameter objects (:mod:`~hypermem.nn.param_rows`)."""
        def new_rows(name, old):
            parts = [old if keep is None else old[keep]]
            if n_add:
                extra = None if add is None else add.get(name)
                if extra is None:
                    extra = _default_rows(name, old, n_add)
                parts.append(extra.to(old.device, old.dtype))
            return torch.cat(parts, 0)

        # outside inference_mode: a write under it must not leave inference tensors, which a later
        # in-place write (update) outside it could not change (swap_rows does the same for the keys)
        with torch.no_grad(), torch.inference_mode(False):
            swap_rows(self.keys, new_rows("keys", self.keys.data), keep, n_add, optimizers)
            if self.values is not None:
                V = new_rows("values", self.values.data)
                if isinstance(self.values, nn.Parameter):
                    swap_rows(self.values, V, keep, n_add, optimizers)
                else:
                    self.values = V
            for name in SLOT_TABLES[2:]:
                old = getattr(self, name)
                if old is not None:
                    setattr(self, name, new_rows(name, old))
        self._key_cache = None

    def append(self, keys, values=None, *, ids: Sequence[str] | None = None, depth=None, timestamps=None,
               access_counts=None, valid_from=None, valid_until=None, importance=None,
               optimizer=None) -> list[str]:
        """Add slots (no gradient); returns their ids.  All or nothing.

        ``keys`` and trainable ``values`` stay the same Parameter objects, grown in place, so
        the optimizer already built keeps training them (:mod:`~hypermem.nn.param_rows`).
        ``optimizer`` (one or a list): resize its state of the keys / values too (Adam's
        moments, momentum: zeros for the new rows, the step count kept); an optimizer with
        such state that is not passed fails loudly at its next ``step()`` (a shape error).
        A stateless one (``SGD`` without momentum) needs nothing.  Example::

            opt = geoopt.optim.RiemannianAdam(memory.parameters(), lr=1e-2)
            memory.append(new_keys, new_values, optimizer=opt)   # then train on as before

        Optional per-slot tensors the memory has but that are not given get defaults (depth:
        the keys' distance to the origin; timestamps: now; counts 0; open windows;
        importance 1).  ``ids=None`` names the new slots ``str(N)``, ``str(N + 1)``, ... (``N``
        the slot count before the write), skipping ids in use: deterministic, but a removed
        slot's id may be given again (:func:`~hypermem.nn.slot_ids.generate_ids`).
        """
        opts = self._trained_rows(optimizer)
        K = torch.as_tensor(keys).detach()
        if K.dim() != 2 or K.shape[1] != self.dim:
            raise ValueError(f"keys must have shape (m, {self.dim}), got {tuple(K.shape)}")
        m = K.shape[0]
        K = self._rows("keys", K, m, self.dim)
        add: dict[str, torch.Tensor | None] = {"keys": K}
        if self.values is None:
            if values is not None:
                raise ValueError("this memory stores no values; pass values=None")
        else:
            if values is None:
                raise ValueError(f"values of shape ({m}, {self.values.shape[1]}) are needed")
            add["values"] = self._rows("values", values, m, self.values.shape[1])
        for name, value in (("depth", depth), ("importance", importance)):
            if value is not None:
                if getattr(self, name) is None:
                    raise ValueError(f"this memory has no {name}; build it with {name}=...")
                add[name] = self._slot_tensor(name, value, m, positive=name == "importance")
        for name, value in zip(TIME_BUFFERS, (timestamps, access_counts, valid_from, valid_until)):
            if value is not None:
                if getattr(self, name) is None:
                    raise ValueError(f"this memory has no {name}; build it with {name}=...")
                add[name] = self._time_tensor(name, value, m)
        if self.depth is not None and "depth" not in add:
            add["depth"] = P.distance_to_origin(K, self.curvature)
        if self.timestamps is not None and "timestamps" not in add:
            add["timestamps"] = torch.full((m,), to_seconds(to_utc(self.clock())), dtype=torch.float64)
        new_ids = self._check_ids(ids, m, taken=self.ids.rows(), start=len(self))
        self._resize(None, add, m, opts)
        self.ids.extend(new_ids)
        if self.records is not None:
            self.records.extend([None] * m)
        return new_ids

    def update(self, slots, keys=None, values=None, *, depth=None, timestamps=None, importance=None) -> None:
        """Overwrite slots in place (no gradient).  All or nothing.  ``slots``: strings are ids,
        ints / integer tensors are row indices (see :meth:`remove`)."""
        idx = self._slots(slots)
        m = int(idx.numel())
        with torch.no_grad():
            new: list[tuple[torch.Tensor, torch.Tensor]] = []
            if keys is not None:
                new.append((self.keys, self._rows("keys", keys, m, self.dim)))
            if values is not None:
                if self.values is None:
                    raise ValueError("this memory stores no values")
                new.append((self.values, self._rows("values", values, m, self.values.shape[1])))
            for name, value in (("depth", depth), ("importance", importance)):
                if value is not None:
                    if getattr(self, name) is None:
                        raise ValueError(f"this memory has no {name}")
                    new.append((getattr(self, name), self._slot_tensor(name, value, m, positive=name == "importance")))
            if timestamps is not None:
                if self.timestamps is None:
                    raise ValueError("this memory has no timestamps")
                new.append((self.timestamps, self._time_tensor("timestamps", timestamps, m)))
            for table, rows in new:
                table[idx] = rows
        self._key_cache = None

    def _rows(self, name: str, value, m: int, width: int) -> torch.Tensor:
        """``(m, width)`` finite rows of ``value`` in the keys' dtype (one row may be given
        as ``(width,)`` when ``m == 1``); keys must lie inside the ball."""
        t = torch.as_tensor(value).detach()
        if m == 1 and t.shape == (width,):
            t = t.unsqueeze(0)
        if t.shape != (m, width):
            raise ValueError(f"{name} must have shape ({m}, {width}) for {m} slot(s), got {tuple(t.shape)}")
        if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
            raise TypeError(f"{name} must hold real numbers, got {t.dtype}")
        t = t.to(self.keys.device, self.keys.dtype)
        check_slot_values(name, t)
        if name == "keys":
            self.ball.check_inside(t, name="keys")
            with torch.no_grad():  # onto the dtype's margin, like every point (numerics.md)
                t = self.ball.projx(t)
        return t

    def remove(self, slots, *, optimizer=None) -> list[str]:
        """Remove slots; returns the removed ids.  All or nothing.

        ``slots`` (as for :meth:`update`): a string or a list / tuple of strings are slot
        **ids**; an int, a list of ints or an integer tensor are row **indices**.  With ids
        that look like numbers the type decides: for ``ids=["3", "2", "1", "0"]``,
        ``remove(["0"])`` removes the slot named ``"0"`` (row 3), ``remove([0])`` row 0 (named
        ``"3"``).

        Like :meth:`append`, the keys and values stay the same Parameter objects (shrunk in
        place); ``optimizer`` (one or a list): drop the removed rows of its state too
        (``memory.remove(["a", "b"], optimizer=opt)``); without it an optimizer with state of
        the old shape fails loudly at its next ``step()``."""
        opts = self._trained_rows(optimizer)
        idx = self._slots(slots)
        keep = torch.ones(len(self), dtype=torch.bool, device=self.keys.device)
        keep[idx] = False
        if not bool(keep.any()):
            raise ValueError("cannot remove every slot (a memory needs at least one)")
        gone = [self.ids[i] for i in idx.tolist()]
        kept = keep.nonzero().squeeze(1)
        self._resize(kept, None, 0, opts)
        kl = kept.tolist()
        self.ids = [self.ids[i] for i in kl]
        if self.records is not None:
            self.records = [self.records[i] for i in kl]
        return gone

    def _slots(self, slots) -> torch.Tensor:
        if isinstance(slots, str) or (isinstance(slots, (list, tuple)) and slots and isinstance(slots[0], str)):
            idx = self.index_of(slots)
        else:
            idx = as_indices("slots", slots, self.keys.device).reshape(-1)
            if bool((idx < 0).any()) or bool((idx >= len(self)).any()):
                raise IndexError(f"slot indices must be in [0, {len(self) - 1}]")
        if idx.numel() != int(torch.unique(idx).numel()):
            raise ValueError("slots are repeated")
        return idx



def _default_rows(name: str, old: torch.Tensor, m: int) -> torch.Tensor:
    if name == "access_counts":
        return torch.zeros(m, dtype=old.dtype)
    if name == "valid_from":
        return torch.full((m,), -math.inf, dtype=old.dtype)
    if name == "valid_until":
        return torch.full((m,), math.inf, dtype=old.dtype)
    if name == "importance":
        return torch.ones(m, dtype=old.dtype)
    raise ValueError(f"{name} of the new slots must be given")
