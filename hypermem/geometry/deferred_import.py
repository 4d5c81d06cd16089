"""Defer a third-party submodule until one of its names is first used.

``import geoopt`` runs ``from . import optim``, and ``geoopt.optim.rlinesearch`` imports
``scipy.optimize`` (about 0.45 s of CPU, most of ``import hypermem`` beyond ``import torch``).
A user of the store never needs geoopt's optimizers, so :func:`defer_submodule` registers
``geoopt.optim`` *unexecuted* before geoopt is imported: the module object is the real one
(its ``__spec__``, ``__path__`` and ``__file__`` are set, so ``import geoopt.optim.mixin`` finds
its submodules), and its code runs on the first access to a name it does not hold yet
(``geoopt.optim.RiemannianSGD``). Every reference to the module stays valid: it is the same
object before and after.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types

__all__ = ["defer_submodule", "is_deferred"]

_LOCK = threading.RLock()


class _Deferred(types.ModuleType):
    """A module whose code has not run yet; the first missing attribute runs it."""

    def __getattr__(self, name: str):
        with _LOCK:
            if type(self) is _Deferred:  # not run by another thread meanwhile
                self.__class__ = types.ModuleType
                try:
                    self.__spec__.loader.exec_module(self)
                except BaseException:
                    sys.modules.pop(self.__spec__.name, None)
                    raise
        return getattr(self, name)


def defer_submodule(package: str, name: str) -> bool:
    """Register ``package.name`` unexecuted, to run on first use; ``True`` when deferred.

    Nothing happens (``False``) when ``package`` is already imported (its ``__init__`` has
    imported the submodule already), when the submodule is registered already, or when either
    cannot be found: the ordinary import then runs as it would have.
    """
    full = f"{package}.{name}"
    with _LOCK:
        if package in sys.modules or full in sys.modules:
            return False
        parent = importlib.util.find_spec(package)
        if parent is None or not parent.submodule_search_locations:
            return False
        spec = None
        for folder in parent.submodule_search_locations:
            spec = importlib.machinery.PathFinder.find_spec(full, [folder])
            if spec is not None:
                break
        if spec is None or spec.loader is None:
            return False
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _Deferred
        sys.modules[full] = module
        return True


def is_deferred(module_name: str) -> bool:
    """Whether ``module_name`` is registered and its code has not run yet."""
    return type(sys.modules.get(module_name)) is _Deferred
