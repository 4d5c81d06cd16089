"""The store's :func:`~hypermem.caller_warning.warn_caller`: a warning at the user's line, not at one
of hypermem's frames.  It lives in :mod:`hypermem.caller_warning`, below every layer, so that the
layers under the store (:mod:`hypermem.data`) use it too; the store's modules import it from here."""

from __future__ import annotations

from ..caller_warning import warn_caller

__all__ = ["warn_caller"]
