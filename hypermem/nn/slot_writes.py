"""Writing the slots of :class:`~hypermem.nn.HyperbolicMemory` (no gradient): append, update, remove.

A mixin of :class:`~hypermem.nn.HyperbolicMemory`; every write checks all its inputs
before it changes anything (all or nothing).

The per-slot tensors (row ``j`` is slot ``j``) are named by the class attribute
:attr:`SlotWrites.slot_tables`.  A subclass with per-slot tensors of its own (buffers or
parameters) extends it, ``slot_tables = HyperbolicMemory.slot_tables + ("priority",)``, and
``append`` / ``remove`` / a load of another slot count resize them with the keys; the new rows
of ``append`` come from its ``slot_rows={"priority": ...}`` or the subclass's
:meth:`SlotWrites.new_slot_rows`.  A table whose row count is not the slot count is refused by
name (:meth:`SlotWrites.check_slot_rows`) at the first read after a write or a load and after
every load; a tensor of the layer with one row per slot that is not declared gets a
``UserWarning`` when ``append`` / ``remove`` leave it behind (docs/nn.md, "Subclassing").
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence

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

    slot_tables: tuple[str, ...] = SLOT_TABLES
    """The per-slot tensors: :data:`SLOT_TABLES`, plus a subclass's own (extend it, keeping these)."""

    def slot_table_map(self) -> dict[str, torch.Tensor]:
        """``{name: tensor}`` of every per-slot table the layer has (:attr:`slot_tables`; those
        set to ``None`` left out); ``TypeError`` when a subclass's ``slot_tables`` drops one of
        :data:`SLOT_TABLES` or names something that is not a tensor."""
        names = type(self).slot_tables
        if missing := [n for n in SLOT_TABLES if n not in names]:
            raise TypeError(f"{type(self).__name__}.slot_tables leaves out {missing}: extend the base's, "
                            "slot_tables = HyperbolicMemory.slot_tables + ('mine',)")
        out = {}
        for name in names:
            t = getattr(self, name, _MISSING)
            if t is None:
                continue
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{type(self).__name__}.slot_tables names {name!r}, which is "
                                f"{'not an attribute' if t is _MISSING else type(t).__name__}, not a tensor")
            out[name] = t
        return out

    def check_slot_rows(self) -> None:
        """``ValueError`` naming a per-slot table (:attr:`slot_tables`) whose first dimension is
        not the slot count (the layer checks it at the first read after a write or a load)."""
        n = len(self)
        for name, t in self.slot_table_map().items():
            if t.dim() == 0 or t.shape[0] != n:
                raise ValueError(f"{type(self).__name__}.{name} has shape {tuple(t.shape)} but the memory has {n} "
                                 "slots: a per-slot table (slot_tables) needs one row per slot; it was changed "
                                 "outside append / remove / load_state_dict")

    def undeclared_slot_tensors(self) -> dict[str, torch.Tensor]:
        """The layer's own buffers and parameters (not its submodules') with one row per slot that
        :attr:`slot_tables` does not name: per-slot tables a subclass forgot to declare, most likely."""
        n, names = len(self), set(type(self).slot_tables)
        own = [*self.named_parameters(recurse=False), *self.named_buffers(recurse=False)]
        return {name: t for name, t in own if name not in names and t.dim() > 0 and t.shape[0] == n}

    def new_slot_rows(self, name: str, m: int) -> torch.Tensor:
        """The rows of a subclass's per-slot table ``name`` for ``m`` slots that ``append`` adds
        when its ``slot_rows`` does not give them.  Override it for a default; this one raises."""
        raise ValueError(f"the {m} new slot(s) need rows of {name!r}: append(..., slot_rows={{{name!r}: ...}}), "
                         f"or define {type(self).__name__}.new_slot_rows for a default")

    def _new_table_rows(self, slot_rows: Mapping[str, torch.Tensor] | None, m: int) -> dict[str, torch.Tensor]:
        """The new rows of a subclass's per-slot tables for ``append`` (checked, before any change)."""
        tables = {n: t for n, t in self.slot_table_map().items() if n not in SLOT_TABLES}
        given = dict(slot_rows or {})
        if unknown := sorted(set(given) - set(tables)):
            raise ValueError(f"slot_rows names {unknown}, not a per-slot table of this memory's own "
                             f"(slot_tables beyond the base's: {sorted(tables)})")
        out = {}
        for name, old in tables.items():
            rows = torch.as_tensor(given[name] if name in given else self.new_slot_rows(name, m)).detach()
            if tuple(rows.shape) != (m, *old.shape[1:]):
                raise ValueError(f"the new rows of {name!r} must have shape {(m, *old.shape[1:])}, "
                                 f"got {tuple(rows.shape)}")
            out[name] = rows.to(old.device, old.dtype)
        return out

    def _warn_undeclared(self, tensors: dict[str, torch.Tensor], what: str) -> None:
        """A ``UserWarning`` for each tensor of :meth:`undeclared_slot_tensors` that ``what`` left behind."""
        for name, t in tensors.items():
            warnings.warn(f"{type(self).__name__}.{name} has one row per slot ({t.shape[0]}) but is not in "
                          f"slot_tables, so {what} did not resize it (the memory has {len(self)} slots now): if "
                          f"it is per-slot, declare it, slot_tables = HyperbolicMemory.slot_tables + ({name!r},)",
                          UserWarning, stacklevel=3)

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
        those that hold the keys or the values (the others of a list skipped), checked before
        anything changes."""
        params = [p for p in (self.keys, self.values) if isinstance(p, nn.Parameter)]
        return check_holds(as_optimizers(optimizer), params)

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
            for name, old in self.slot_table_map().items():
                if name in ("keys", "values"):
                    continue
                if isinstance(old, nn.Parameter):  # a subclass's trained table: the same Parameter
                    swap_rows(old, new_rows(name, old.data), keep, n_add, optimizers)
                else:
                    setattr(self, name, new_rows(name, old))
        self._key_cache = None

    def append(self, keys, values=None, *, ids: Sequence[str] | None = None, depth=None, timestamps=None,
               access_counts=None, valid_from=None, valid_until=None, importance=None,
               optimizer=None, slot_rows: Mapping[str, torch.Tensor] | None = None) -> list[str]:
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
        ``slot_rows``: ``{name: (m, ...) rows}`` of a subclass's own per-slot tables
        (:attr:`slot_tables`; default :meth:`new_slot_rows`).
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
        add.update(self._new_table_rows(slot_rows, m))
        new_ids = self._check_ids(ids, m, taken=self.ids.rows(), start=len(self))
        left = self.undeclared_slot_tensors()
        self._resize(None, add, m, opts)
        self._warn_undeclared(left, "append")
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
        left = self.undeclared_slot_tensors()
        self._resize(kept, None, 0, opts)
        self._warn_undeclared(left, "remove")
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


_MISSING = object()


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
