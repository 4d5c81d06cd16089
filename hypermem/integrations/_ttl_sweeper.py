"""The TTL sweeper of :class:`~hypermem.integrations.langgraph.HypermemStore`: a daemon thread
that calls the store's ``sweep_ttl`` every ``sweep_interval_minutes``, as LangGraph's SQLite
and PostgreSQL stores do (``start_ttl_sweeper`` returns a ``concurrent.futures.Future`` that
is done when the loop ends; ``stop_ttl_sweeper(timeout)`` says whether it ended).

A sweep that fails is logged and the next one runs at the next interval; the loop ends when
it is stopped, or when the store's storage is closed (``closed()``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_MINUTES", "TTLSweeper", "check_interval"]

logger = logging.getLogger(__name__)

DEFAULT_MINUTES = 5.0
"""The interval of ``start_ttl_sweeper()`` without one given or configured (LangGraph's stores')."""


def check_interval(minutes: Any) -> float | None:
    """``sweep_interval_minutes`` as a float (``None``: none), or a ``ValueError`` naming it."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or not 0 < minutes < float("inf"):
        raise ValueError(f"sweep_interval_minutes must be a positive number of minutes, got {minutes!r:.60}")
    return float(minutes)


class TTLSweeper:
    """Calls ``sweep()`` every interval in a daemon thread until stopped or ``closed()``."""

    def __init__(self, sweep: Callable[[], int], closed: Callable[[], bool]):
        self._sweep, self._closed = sweep, closed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._future: concurrent.futures.Future[None] | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, minutes: float) -> concurrent.futures.Future[None]:
        """Start the loop (a sweep every ``minutes``); the running loop's future if one runs."""
        with self._lock:
            if self.running and self._future is not None:
                return self._future
            self._stop.clear()
            future: concurrent.futures.Future[None] = concurrent.futures.Future()
            future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
            self._future = future
            self._thread = threading.Thread(target=self._loop, args=(minutes * 60.0, future), daemon=True,
                                            name="hypermem-ttl-sweeper")
            self._thread.start()
            return future

    def _loop(self, seconds: float, future: concurrent.futures.Future[None]) -> None:
        while not self._stop.wait(seconds) and not self._closed():
            try:
                n = self._sweep()
                if n:
                    logger.info("TTL sweep removed %d expired items", n)
            except Exception:   # the next sweep may succeed (a busy write lock); the thread must not die
                if self._closed():
                    break
                logger.exception("TTL sweep failed")
        if not future.done():
            future.set_result(None)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the loop; whether it ended within ``timeout`` seconds (``True`` when none ran)."""
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                self._thread = None
                return True
            self._stop.set()
        if thread is threading.current_thread():   # stopped from a sweep: the loop ends after it
            return False
        thread.join(timeout)
        with self._lock:
            if not thread.is_alive() and self._thread is thread:
                self._thread = None
            return not thread.is_alive()
