"""Whether an nn layer was allocated by ``to_empty()`` and not loaded since (a mixin).

``module.to("meta")`` then ``module.to_empty(device=...)`` gives tensors whose values are
whatever the allocator left (often NaN / inf or huge numbers).  A layer that checks its weights
for NaN / inf (:class:`~hypermem.nn.BallEncoder`) then names this likely cause, the hint that
:class:`~hypermem.nn.HyperbolicMemory` gives for its keys, instead of a diverged optimizer step.
The flag is set when ``_apply`` moves the layer's tensors off the meta device (only
``to_empty`` does) and cleared when ``load_state_dict`` fills the layer.
"""

from __future__ import annotations

EMPTIED_HINT = ("it was allocated by .to_empty(), which keeps no values, and no load_state_dict() has filled it "
                "since; load its checkpoint (load_state_dict) or initialise the weights first")
"""The end of the error a read gives for a layer that may be uninitialised."""


class TracksEmpty:
    """``_emptied``: set by ``to_empty()`` off the meta device, cleared by ``load_state_dict``."""

    _emptied = False

    def _any_meta(self) -> bool:
        return any(t.is_meta for t in (*self.parameters(), *self.buffers()))

    def _apply(self, fn, recurse=True):
        was_meta = self._any_meta()
        out = super()._apply(fn, recurse)
        if was_meta and not self._any_meta():
            self._emptied = True
        return out

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        self._emptied = False
