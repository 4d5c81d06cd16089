"""Async-only LangChain ``Embeddings`` (LangGraph's ``index={"embed": async_fn}``, an
``EmbeddingsLambda`` holding only an async function) called from the adapters' sync code.

A hypermem embedder is synchronous (``embed(texts)``), so the coroutine is run to completion
where the call stands:

* in a worker thread of the store's async API (``HypermemStore.abatch``, hence ``aput``,
  ``asearch``, ...: :data:`CALLER_LOOP` names the caller's event loop), on that loop
  (``asyncio.run_coroutine_threadsafe``): the loop is free, it awaits the worker, and the
  function's clients (an HTTP session) live there;
* in a thread without an event loop (plain sync code), with ``asyncio.run``;
* inside a running event loop (the sync API called from async code) it cannot be waited for
  without blocking that loop: a ``RuntimeError`` names the async methods to use instead.

An async call that is cancelled (``asyncio.wait_for`` timing out) :meth:`Cancel.cancel` s its
:data:`CANCEL`: the embedding coroutine it awaits on the loop is cancelled too, and the worker
reads the flag before it applies anything.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

__all__ = ["CALLER_LOOP", "CANCEL", "Cancel", "async_only", "check_no_loop", "run_async"]

CALLER_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("hypermem_caller_loop", default=None)
"""The event loop of the async call (``abatch``) that the current worker thread runs for."""


class Cancel:
    """The cancellation of an async call that a worker thread runs: a flag the worker reads, and
    the embedding coroutines it awaits on the caller's loop, cancelled with it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self._futures: set[concurrent.futures.Future] = set()

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            futures = list(self._futures)
        for f in futures:
            f.cancel()

    def result(self, fut: concurrent.futures.Future) -> Any:
        """``fut.result()``, the future cancelled when the call is (then ``CancelledError``)."""
        with self._lock:
            if self.cancelled:
                fut.cancel()
            self._futures.add(fut)
        try:
            return fut.result()
        finally:
            with self._lock:
                self._futures.discard(fut)


CANCEL: ContextVar[Cancel | None] = ContextVar("hypermem_cancel", default=None)
"""The :class:`Cancel` of the async call that the current worker thread runs for."""


def async_only(embeddings: Any) -> bool:
    """Whether ``embeddings`` has an async path only (an ``EmbeddingsLambda`` of an async function:
    its ``embed_documents`` raises)."""
    return callable(getattr(embeddings, "afunc", None)) and getattr(embeddings, "func", None) is None


def check_no_loop(fix: str) -> None:
    """A ``RuntimeError`` (ending with ``fix``) when this thread runs an event loop, where
    async-only embeddings cannot be awaited from sync code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"the embeddings are an async function only (no sync embed_documents), and this sync call "
                       f"runs inside an event loop, which hypermem cannot block to await them: {fix}")


def run_async(make: Callable[[], Awaitable[Any]], fix: str) -> Any:
    """The result of the coroutine ``make()`` run to completion from sync code (module
    docstring); ``fix`` ends the error raised inside a running event loop."""
    check_no_loop(fix)
    loop = CALLER_LOOP.get()
    if loop is not None and loop.is_running():
        fut = asyncio.run_coroutine_threadsafe(make(), loop)  # type: ignore[arg-type]
        cancel = CANCEL.get()
        return fut.result() if cancel is None else cancel.result(fut)
    return asyncio.run(make())  # type: ignore[arg-type]
