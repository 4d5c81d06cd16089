"""How :class:`~hypermem.store.Memory` hands a method to a collaborator (searcher, views)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["calls"]

P = ParamSpec("P")
R = TypeVar("R")


def calls(collaborator: str, target: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R]:
    """A ``Memory`` method that calls ``self.<collaborator>.<name>``, ``name`` being ``target``'s (a
    collaborator's function, e.g. ``Searcher.search``).  The signature, the docstring and, for a type
    checker, the parameter and return types are ``target``'s; a wrong argument is named as
    ``Memory.<name>()``'s."""
    name = target.__name__
    signature = inspect.signature(target)

    @functools.wraps(target)
    def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return getattr(getattr(self, collaborator), name)(*args, **kwargs)
        except TypeError:
            try:  # a wrong argument is named as Memory's, not as the collaborator's
                signature.bind(self, *args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"Memory.{name}(): {exc}") from None
            raise

    return method
