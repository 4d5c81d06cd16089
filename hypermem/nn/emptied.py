"""Whether an nn layer was allocated by ``to_empty()`` and not initialised since (a mixin).

``module.to("meta")`` then ``module.to_empty(device=...)`` gives tensors whose values are
whatever the allocator left: NaN / inf, huge numbers, or plausible small ones that a forward
turns into silent garbage.  A layer with this mixin (:class:`~hypermem.nn.BallEncoder`)
remembers, when ``_apply`` moves its tensors off the meta device (only ``to_empty`` does),
each parameter object and its version counter.  A parameter counts as initialised once it is

* loaded: ``load_state_dict`` (every parameter at once);
* written in place under ``torch.no_grad()`` (``reset_parameters()``, ``nn.init.*_``,
  ``weight.copy_(w)``): its version counter moved;
* replaced: ``layer.linear.weight = nn.Parameter(w)`` (another object).

Until every one is, :meth:`TracksEmpty.refuse_if_empty` (called first by the layer's forward)
raises ``ValueError`` naming the parameters left and what to call.  Writes through ``.data``
(``weight.data.normal_()``) are not seen: ``.data`` has its own version counter.  The check is
one attribute test per forward once nothing is left; while something is, a walk over the
layer's parameters (no tensor work).  Under ``torch.func.functional_call`` the parameters
given stand in for the layer's own, so the forward runs; the layer's own are still refused.
"""

from __future__ import annotations

import torch

EMPTIED_HINT = ("it was allocated by .to_empty(), which keeps no values, and no load_state_dict() has filled it "
                "since; load its checkpoint (load_state_dict), or call reset_parameters(), or set the weights first")
"""The end of the error a read gives for a layer that may be uninitialised."""


class TracksEmpty:
    """``_emptied``: set by ``to_empty()`` off the meta device, true while a parameter still
    holds its values (see the module docstring)."""

    _empty_params: dict[str, tuple[torch.Tensor, int]] | None = None
    """Name -> (parameter, version) of what ``to_empty()`` allocated and nothing wrote since."""

    def _any_meta(self) -> bool:
        return any(t.is_meta for t in (*self.parameters(), *self.buffers()))

    def _apply(self, fn, recurse=True):
        was_meta = self._any_meta()
        out = super()._apply(fn, recurse)
        if was_meta and not self._any_meta():
            self._empty_params = {n: (p, p._version) for n, p in self.named_parameters()}
        return out

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._empty_params = None

    @property
    def _emptied(self) -> bool:
        """Whether some parameter still holds what ``to_empty()`` allocated."""
        return bool(self.uninitialised())

    def uninitialised(self) -> list[str]:
        """The names of the parameters that still hold what ``to_empty()`` allocated (not
        loaded, written in place or replaced since); ``[]`` for a layer built normally."""
        state = self._empty_params
        if state is None:
            return []
        now = dict(self.named_parameters())
        left = []
        for name, (p, version) in list(state.items()):
            if now.get(name) is not p:  # replaced (or a functional_call's stand-in: kept for after it)
                continue
            if p._version != version:  # written in place
                del state[name]
            else:
                left.append(name)
        if not state:
            self._empty_params = None
        return left

    def refuse_if_empty(self) -> None:
        """``ValueError`` while a parameter still holds what ``to_empty()`` allocated: the
        parameters that hold NaN / inf named first (as a diverged step would be), else those
        left uninitialised, and what to call.  Nothing once every parameter is initialised."""
        if self._empty_params is None:
            return
        left = self.uninitialised()
        if not left:
            return
        kind = type(self).__name__
        bad = [n for n, p in self.named_parameters() if not bool(torch.isfinite(p.detach()).all())]
        if bad:
            raise ValueError(f"{kind} weights hold NaN or inf ({', '.join(bad)}): it may be uninitialised: "
                             f"{EMPTIED_HINT}")
        raise ValueError(f"{kind} is uninitialised: its parameters {', '.join(left)} still hold what "
                         ".to_empty() allocated (memory with no values). Load its checkpoint with load_state_dict(), or call "
                         "reset_parameters() (the constructor's initialisation), or set those weights (assign "
                         "them, or write them in place under torch.no_grad(); writes through .data are not seen)")
