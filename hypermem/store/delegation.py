"""How :class:`~hypermem.store.Memory` hands a method to a collaborator (searcher, views)."""

from __future__ import annotations

import functools
import inspect

__all__ = ["calls"]


def calls(collaborator: str, cls: type, name: str):
    """A ``Memory`` method that calls ``self.<collaborator>.<name>`` (the signature and the
    docstring are ``cls.<name>``'s); for a property of ``cls``, a read-only property."""
    target = getattr(cls, name)
    if isinstance(target, property):
        return property(lambda self: getattr(getattr(self, collaborator), name), doc=target.__doc__)

    signature = inspect.signature(target)

    @functools.wraps(target)
    def method(self, *args, **kwargs):
        try:
            return getattr(getattr(self, collaborator), name)(*args, **kwargs)
        except TypeError:
            try:  # a wrong argument is named as Memory's, not as the collaborator's
                signature.bind(self, *args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"Memory.{name}(): {exc}") from None
            raise

    return method
