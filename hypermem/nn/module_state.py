"""How :class:`~hypermem.nn.HyperbolicMemory` moves, casts and loads (a mixin of the layer).

* ``.to()`` / ``.cuda()`` / ``.float()`` / ``.to("meta")`` / ``.to_empty()`` reach every
  tensor through ``nn.Module._apply``.  The time buffers (:data:`~hypermem.nn.slot_writes.TIME_BUFFERS`,
  POSIX seconds: float32 would round today's timestamps to 128 s) keep float64 under a
  dtype cast and follow every other change (device, ``to_empty``).  A cast of the layer to
  ``bfloat16`` / ``float16`` is refused before anything changes (``TypeError``), as the
  constructor refuses those dtypes: their 8- and 11-bit mantissas put every key deeper than
  about 5 on the ball's boundary.  Run a model in half precision with ``torch.autocast``
  (the memory computes distances in its own dtype), or cast the other submodules only.
* A narrowing cast (``.float()`` of a float64 layer) keeps every key a point of the ball in
  the new dtype: keys deeper than its margin (float32 holds radii up to ``1 - 1e-3`` of the
  ball's, hyperbolic radius ~7.6 at ``c = 1``; float64 up to ~23.7) would round onto the
  boundary, so they are projected onto the margin, as the constructor projects its keys,
  with a ``UserWarning`` naming the dtype and how many keys moved.  Loading a float64
  checkpoint into a float32 layer does the same (torch casts it on copy); with
  ``assign=True`` the layer takes the checkpoint's dtype and nothing moves.
* ``load_state_dict`` refuses, before anything is loaded, a tensor the constructor would
  refuse (:data:`~hypermem.nn.slot_writes.LOADED_CHECKS`), a curvature the ball refuses, and
  keys outside the ball (``ValueError`` naming the key row).
* After ``to_empty`` (a conversion torch cannot make in place) or ``load_state_dict(...,
  assign=True)`` the keys come back as a plain ``nn.Parameter``; they are wrapped again as
  a ``geoopt.ManifoldParameter`` on the layer's manifold, so Riemannian optimizers keep
  them in the ball.  Until a ``load_state_dict`` fills a ``to_empty``'d layer, a read that
  finds a key NaN / inf or outside the ball says the memory may be uninitialised (not that an
  optimizer step diverged).
* The slot ids travel in the ``state_dict`` as its ``_extra_state`` (torch's
  ``get_extra_state`` / ``set_extra_state``): the UTF-8 bytes of a JSON list in a ``uint8``
  tensor, so the dict stays all tensors (``torch.load(weights_only=True)``, safetensors).  A
  state dict saved before they did loads with the layer's own ids; ids that are not one
  distinct string per loaded key are refused before anything is loaded.
* A subclass extends the extra state: its ``get_extra_state`` returns a dict holding the
  base's ids tensor under :data:`SLOT_IDS_KEY` next to its own entries, and its
  ``set_extra_state`` calls ``super().set_extra_state(state)``; a state dict of the base
  format (the ids tensor alone) loads into it with its own entries kept.  ``state_dict()``
  refuses (``TypeError``) an extra state that leaves the ids out.
* A checkpoint of another slot count (a memory grown by ``append`` / shrunk by ``remove``)
  loads into a layer built at any size: the slot count is data, not architecture.  When every
  per-slot tensor of the layer (``slot_tables``: :data:`~hypermem.nn.slot_writes.SLOT_TABLES`
  and a subclass's own) is in the
  ``state_dict`` with the loaded keys' row count (and the layer's other dimensions), and the
  ids (``_extra_state``) are there, each is resized in place first (:meth:`ModuleState._take_slot_count`:
  the same Parameter objects, so an optimizer built after the load, as Lightning builds its
  optimizers after restoring the model, holds them and loads its state of that shape); torch
  then copies the values.  Otherwise torch's ``size mismatch`` error stands, with the table
  that held the count back named (:mod:`~hypermem.nn.load_hints`).
* A checkpoint with an optional table the layer lacks (timestamps, values, ...), or without one
  it has, or of another dimension: torch's error, with the cause and the fix added
  (:mod:`~hypermem.nn.load_hints`); ``strict=False`` returns torch's key lists.
* :meth:`ModuleState.invalidate` drops the cached key geometry (see
  :meth:`HyperbolicMemory.key_geometry`) after writes that autograd does not see.
"""

from __future__ import annotations

import json
import math
import warnings

import geoopt
import torch
import torch.nn.functional as F

from ..geometry import poincare as P
from ..geometry.ball import check_loaded_curvature
from ..geometry.numerics import ball_margin
from .load_hints import hint_keys, shape_hints
from .param_rows import swap_rows
from .read_checks import key_error
from .scripting import NotScriptable
from .slot_writes import LOADED_CHECKS, TIME_BUFFERS, check_slot_values

LAYER_DTYPES = (torch.float32, torch.float64)
"""The dtypes of a memory's keys (its constructor and ``_apply`` refuse the others)."""


def loaded_keys_error(name: str, keys: torch.Tensor, c: float) -> str | None:
    """Why ``keys`` (a tensor of a ``state_dict``, named ``name``) are not points of the ball of
    curvature ``-c``: the first row that is NaN / inf or not strictly inside; ``None`` if all are."""
    k = keys.detach()
    ok = torch.isfinite(k).all(-1) & P.is_inside(k, c)
    if bool(ok.all()):
        return None
    row = int((~ok).nonzero()[0, 0])
    return (f"{name} row #{row} is not a point inside the Poincaré ball of curvature {c:g} (norm "
            f"{float(k[row].norm()):.6g}, radius {c ** -0.5:.6g}): this checkpoint's keys left the ball "
            "(an optimizer that ignores the geometry, or a wrong curvature); it was not loaded")


def narrowed_keys(keys: torch.Tensor, was: torch.dtype, dtype: torch.dtype, c: float, what: str
                  ) -> torch.Tensor:
    """``keys`` (inside the ball of curvature ``-c`` in their dtype ``was``) in the narrower
    ``dtype``, projected onto its margin (:func:`~hypermem.geometry.poincare.project`); a
    ``UserWarning`` naming ``what`` (the cast or the load), the dtype and how many keys moved,
    when some did."""
    K = keys.detach().to(dtype)
    out = P.project(K, c)
    moved = int((out != K).any(-1).sum())
    if moved:
        m = ball_margin(dtype)
        warnings.warn(f"{what}: {moved} of {K.shape[0]} keys lay deeper than {dtype} holds and were moved onto "
                      f"its margin (norm {1 - m:g} / sqrt(c), hyperbolic radius "
                      f"{2 * math.atanh(1 - m) / math.sqrt(c):.3g}); keep the layer in {was} to keep "
                      "their depth", UserWarning, stacklevel=4)
    return out


SLOT_IDS_KEY = "slot_ids"
"""The key of the slot ids in a subclass's extra state: ``get_extra_state`` of a subclass that
keeps its own extra state returns ``{SLOT_IDS_KEY: super().get_extra_state(), ...its own}``."""


def loaded_ids(name: str, state, rows: int, check) -> list[str]:
    """The slot ids of a loaded ``_extra_state`` (``name``): a 1-D ``uint8`` tensor of the UTF-8
    JSON of distinct strings, or a dict holding that tensor under :data:`SLOT_IDS_KEY` (a
    subclass's extra state), ``rows`` of them unless ``None`` (``check``: the layer's id
    check); ``ValueError`` naming what is wrong."""
    if isinstance(state, dict):
        if SLOT_IDS_KEY not in state:
            raise ValueError(f"{name} is a dict without the slot ids under {SLOT_IDS_KEY!r}: a subclass's "
                             f"get_extra_state must return {{{SLOT_IDS_KEY!r}: super().get_extra_state(), ...}} "
                             "and its set_extra_state call super().set_extra_state(state) (docs/nn.md, "
                             "'Subclassing')")
        name, state = f"{name}[{SLOT_IDS_KEY!r}]", state[SLOT_IDS_KEY]
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.dim() != 1 or state.is_meta:
        raise ValueError(f"{name} must hold the slot ids as a 1-D torch.uint8 tensor (UTF-8 JSON), got "
                         f"{type(state).__name__}{'' if not isinstance(state, torch.Tensor) else f' {state.dtype}'}")
    try:
        ids = json.loads(state.cpu().numpy().tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{name} is not the UTF-8 JSON of a list of slot ids: {e}") from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"{name} must be a JSON list of strings (one slot id per key)")
    try:
        return check(ids, len(ids) if rows is None else rows)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def refuse_meta(keys, device) -> None:
    """``ValueError`` for a memory built on the meta device (``device="meta"``, ``with
    torch.device("meta")``, meta keys): the constructor checks the keys' values and reads the
    curvature, which a meta tensor does not have."""
    dev = torch.device(device) if device is not None else torch.get_default_device()
    if dev.type == "meta" or (isinstance(keys, torch.Tensor) and keys.is_meta):
        raise ValueError("HyperbolicMemory cannot be built on the meta device: its constructor checks the keys' "
                         "values (finite, inside the ball). Build it on the CPU and move it: "
                         "HyperbolicMemory(keys, ...).to('meta'), then .to_empty(device=...) and "
                         "load_state_dict(...)")


class ModuleState(NotScriptable):
    """``_apply``, ``_load_from_state_dict`` and :meth:`invalidate` of the memory layer (and its
    refusal of ``torch.jit.script``, :mod:`~hypermem.nn.scripting`)."""

    _emptied = False
    """Set when ``to_empty()`` allocated the keys off the meta device (values undefined), cleared
    by ``load_state_dict``: a read's key error then names the likely cause."""

    def _key_error(self, bad: int) -> str:
        """Why key ``bad`` is not a point of the ball (:func:`~hypermem.nn.read_checks.key_error`)."""
        return key_error(self.keys, bad, self.ball, self._emptied)

    def invalidate(self) -> None:
        """Forget the cached key geometry (unit directions and radii, :meth:`key_geometry`), so
        the next read recomputes it and checks the keys again.

        Steps of torch / geoopt optimizers and writes under ``torch.no_grad()`` (``keys.copy_``,
        ``keys.mul_``) bump the keys' version counter, which the cache follows.  Writes through
        ``keys.data`` (``keys.data.copy_(K)``, ``keys.data.uniform_()``) do not: ``.data`` is a
        tensor with its own counter.  Call ``invalidate()`` after such a write, or the next
        top-``k`` read chooses its slots from the old keys."""
        self._key_cache = None

    def _register_state_hooks(self) -> None:
        """Called by the constructor: :meth:`_after_load` runs after every ``load_state_dict``."""
        self.register_load_state_dict_post_hook(ModuleState._after_load)

    @staticmethod
    def _after_load(module: ModuleState, incompatible_keys) -> None:
        """A load-state-dict post hook (it runs once the ball has loaded too): the keys wrapped
        again (``assign=True`` put a plain ``Parameter`` there), and the key cache dropped."""
        module._rewrap_keys()
        module._emptied = False
        module.invalidate()
        module.check_slot_rows()

    def _apply(self, fn, recurse=True):
        # refuse a cast to a dtype the layer cannot hold, before any tensor changes
        probe = fn(torch.zeros((), dtype=self.keys.dtype, device=self.keys.device))
        if isinstance(probe, torch.Tensor) and probe.is_floating_point() and probe.dtype not in LAYER_DTYPES:
            raise TypeError(f"HyperbolicMemory holds its keys in torch.float32 or torch.float64, not "
                            f"{probe.dtype}: in it every key deeper than about 5 lies on the ball's boundary. "
                            "Run the model under torch.autocast (the memory computes distances in its own "
                            "dtype), or cast the other submodules only")
        time = [t for n in TIME_BUFFERS if (t := self._buffers.get(n)) is not None]

        def keep_float64(t):
            out = fn(t)
            if out.dtype != t.dtype and any(t is x for x in time):
                out = t.to(out.device)  # timestamps and counts stay float64 whatever the cast
            return out

        was_meta, was = self.keys.is_meta, self.keys.dtype
        out = super()._apply(keep_float64, recurse)
        if was_meta and not self.keys.is_meta:  # only to_empty() leaves the meta device
            self._emptied = True
        K = self.keys
        if not K.is_meta and torch.finfo(K.dtype).eps > torch.finfo(was).eps:  # a narrowing cast
            with torch.no_grad():
                what = f"HyperbolicMemory cast to {K.dtype}"
                K.copy_(narrowed_keys(K, was, K.dtype, self.ball.curvature, what))
        self._rewrap_keys()
        self._key_cache = None
        return out

    def _rewrap_keys(self) -> None:
        """The keys as a ``ManifoldParameter`` of the layer's manifold (a learned curvature's
        manifold shares the ball's ``isp_c``: pointed at the new one when the ball's parameter
        was replaced)."""
        if self.ball.learnable and self.keys_manifold.isp_c is not self.ball.isp_c:
            self.keys_manifold.isp_c = self.ball.isp_c  # a FollowingBall: share the new parameter
        K = self.keys
        if isinstance(K, geoopt.ManifoldParameter) and K.manifold is self.keys_manifold:
            return
        new = geoopt.ManifoldParameter(K.detach(), manifold=self.keys_manifold, requires_grad=K.requires_grad)
        new.grad = K.grad
        self.keys = new

    def get_extra_state(self) -> torch.Tensor:
        """The slot ids for the ``state_dict``: the UTF-8 bytes of a JSON list, ``uint8``.  A
        subclass with extra state of its own returns ``{SLOT_IDS_KEY: super().get_extra_state(),
        ...}`` (:data:`SLOT_IDS_KEY`; :meth:`set_extra_state` takes both forms)."""
        return torch.frombuffer(bytearray(json.dumps(self.ids).encode()), dtype=torch.uint8).clone()

    def set_extra_state(self, state) -> None:
        """The slot ids from a ``state_dict`` (:meth:`get_extra_state`: the ids tensor, or a dict
        holding it under :data:`SLOT_IDS_KEY`), checked against the keys."""
        ids = loaded_ids("state_dict['_extra_state']", state, None, self._check_ids)
        if len(ids) == len(self):  # else the keys did not load either: torch reports their size mismatch
            self.ids = ids

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """Refuse, before anything is loaded, a tensor the constructor would refuse
        (:data:`LOADED_CHECKS`: NaN values, a NaN ``log_temperature``, ...; keys outside the
        ball of the loaded curvature): ``ValueError`` naming the key.  The ball's ``isp_c``
        too, here as well as by the ball, so a bad one leaves this layer unchanged (the ball
        loads after it).  Keys of a wider dtype than the layer's (float64 into float32) are
        projected onto the margin of the layer's dtype (:func:`narrowed_keys`, with a
        warning), unless ``assign=True``.  Then torch's load, with the cause and the fix of a
        missing / unexpected optional table or a size mismatch added to torch's error
        (:mod:`~hypermem.nn.load_hints`)."""
        for name, rule in LOADED_CHECKS.items():
            t = state_dict.get(prefix + name)
            if isinstance(t, torch.Tensor) and not t.is_meta:
                check_slot_values(f"state_dict[{prefix + name!r}]", t.detach(), rule)
        check_loaded_curvature(state_dict, prefix + "ball.isp_c")
        keys = state_dict.get(prefix + "keys")
        if isinstance(keys, torch.Tensor) and not keys.is_meta and keys.dim() == 2 and keys.is_floating_point():
            isp = state_dict.get(prefix + "ball.isp_c")
            c = self.curvature if not isinstance(isp, torch.Tensor) or isp.numel() != 1 or isp.is_meta \
                else float(F.softplus(isp.detach().double().reshape(())))
            error = loaded_keys_error(f"state_dict[{prefix + 'keys'!r}]", keys, c)
            if error is not None:
                raise ValueError(error)
            mine = self.keys.dtype
            if (not local_metadata.get("assign_to_params_buffers", False) and not self.keys.is_meta
                    and mine.is_floating_point and torch.finfo(mine).eps > torch.finfo(keys.dtype).eps):
                what = f"state_dict[{prefix + 'keys'!r}] ({keys.dtype}) loaded into {mine} keys"
                state_dict[prefix + "keys"] = narrowed_keys(keys, keys.dtype, mine, c, what)
        rows = keys.shape[0] if isinstance(keys, torch.Tensor) and keys.dim() == 2 else len(self)
        extra = state_dict.get(prefix + "_extra_state")
        if extra is None:  # saved before the ids were: this layer keeps its own
            state_dict[prefix + "_extra_state"] = self.get_extra_state()
        else:
            loaded_ids(f"state_dict[{prefix + '_extra_state'!r}]", extra, rows, self._check_ids)
            if isinstance(extra, torch.Tensor) and type(self).get_extra_state is not ModuleState.get_extra_state:
                mine = self.get_extra_state()  # a subclass's: its own entries kept, the loaded ids
                if isinstance(mine, dict):
                    state_dict[prefix + "_extra_state"] = {**mine, SLOT_IDS_KEY: extra}
            self._take_slot_count(state_dict, prefix, rows)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
        hint_keys(state_dict, prefix, lambda name: getattr(self, name) is not None, missing_keys, unexpected_keys)
        value_dim = None if self.values is None else self.values.shape[1]
        blocker = (lambda n: self._slot_count_blocker(state_dict, prefix, n)) if extra is not None \
            else (lambda n: f"{prefix + '_extra_state'!r} (the slot ids) is not in the state_dict")
        error_msgs.extend(shape_hints(state_dict, prefix, self.dim, value_dim, len(self), blocker))

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """torch's, then a ``TypeError`` when a subclass's ``get_extra_state`` left the slot ids
        out (its checkpoint would not load: :data:`SLOT_IDS_KEY`)."""
        super()._save_to_state_dict(destination, prefix, keep_vars)
        extra = destination.get(prefix + "_extra_state")
        if not isinstance(extra, torch.Tensor) and not (isinstance(extra, dict) and SLOT_IDS_KEY in extra):
            raise TypeError(f"{type(self).__name__}.get_extra_state returned {type(extra).__name__} without the "
                            f"slot ids: return {{{SLOT_IDS_KEY!r}: super().get_extra_state(), ...}} and call "
                            "super().set_extra_state(state) in set_extra_state (docs/nn.md, 'Subclassing')")

    def _key_geometry(self):
        """The key cache (:class:`~hypermem.nn.key_cache.KeyCache`); when it was dropped (a write,
        a load, a first read) the per-slot tables are checked to have one row per slot first
        (:meth:`~hypermem.nn.slot_writes.SlotWrites.check_slot_rows`): one attribute test a read."""
        if self._key_cache is None:
            self.check_slot_rows()
        return super()._key_geometry()

    def _slot_count_blocker(self, state_dict, prefix: str, rows: int) -> str | None:
        """Why the layer cannot take the slot count ``rows`` of ``state_dict``: the first per-slot
        table of the layer missing from it or of another shape; ``None`` when none is."""
        for name, t in self.slot_table_map().items():
            s = state_dict.get(prefix + name)
            if not isinstance(s, torch.Tensor):
                return f"{prefix + name!r} is not in the state_dict"
            if tuple(s.shape) != (rows, *t.shape[1:]):
                return f"{prefix + name!r} has shape {tuple(s.shape)}, not {(rows, *t.shape[1:])}"
        return None

    def _take_slot_count(self, state_dict, prefix: str, rows: int) -> None:
        """Resize every per-slot tensor to ``rows`` slots (values undefined until torch copies the
        loaded ones), in place for the Parameters (:func:`~hypermem.nn.param_rows.swap_rows`),
        when the ``state_dict`` holds each of them with ``rows`` rows; else leave the layer as it
        is (torch names the size mismatch)."""
        if rows == len(self) or self._slot_count_blocker(state_dict, prefix, rows) is not None:
            return
        tables = self.slot_table_map()
        for name, t in self.undeclared_slot_tensors().items():
            s = state_dict.get(prefix + name)
            if isinstance(s, torch.Tensor) and tuple(s.shape) == (rows, *t.shape[1:]):
                raise ValueError(f"state_dict[{prefix + name!r}] has one row per loaded slot ({rows}) and "
                                 f"{type(self).__name__}.{name} one per slot ({len(self)}), but {name!r} is not "
                                 f"in slot_tables, so it would not be resized with the keys: declare it, "
                                 f"slot_tables = HyperbolicMemory.slot_tables + ({name!r},); nothing was loaded")
        with torch.no_grad():
            for name, t in tables.items():
                new = t.new_empty((rows, *t.shape[1:]))
                if isinstance(t, torch.nn.Parameter):
                    t.grad = None  # a gradient of the old slots means nothing for the loaded ones
                    swap_rows(t, new, None, 0, [])
                else:
                    setattr(self, name, new)
        self.records = None  # the store records of the old slots (from_memory) no longer match
        self._key_cache = None

