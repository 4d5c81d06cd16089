"""Walk 70 on the LangGraph adapter: async-only embedding functions (``index={"embed":
async_fn}``), the TTL sweeper thread (``sweep_interval_minutes``, ``start_ttl_sweeper`` /
``stop_ttl_sweeper``), ``search(limit=0)`` and a clock that returns no datetime."""

import asyncio
import hashlib
import time
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("langgraph")

from hypermem import Memory  # noqa: E402
from hypermem.integrations.langgraph import HypermemStore  # noqa: E402
from hypermem.store.backends.durable import StorageError  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _vec(t):
    return [b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]]


async def aembed(texts):
    return [_vec(t) for t in texts]


def test_async_embed_through_the_async_api():
    loops = []

    async def on_loop(texts):   # the caller's loop runs it (its clients live there)
        loops.append(asyncio.get_running_loop())
        return [_vec(t) for t in texts]

    async def main():
        s = HypermemStore(index={"embed": on_loop, "dims": 8, "fields": ["text"]})
        await s.aput(("u",), "a", {"text": "hello"})
        await s.aput(("u",), "b", {"text": "goodbye forever"})
        hits = await s.asearch(("u",), query="hello")
        return asyncio.get_running_loop(), [h.key for h in hits], hits[0].score

    loop, keys, score = asyncio.run(main())
    assert keys[0] == "a" and set(keys) == {"a", "b"} and score is not None
    assert loops and all(x is loop for x in loops)


def test_async_embed_dimension_probe_and_sync_api_outside_a_loop():
    s = HypermemStore(index={"embed": aembed})   # the probe runs the coroutine with asyncio.run
    assert s.memory.dim == 8
    s.put(("u",), "a", {"text": "hello"})
    assert [h.key for h in s.search(("u",), query="hello")] == ["a"]


def test_async_embed_inside_a_loop_asks_for_dims_and_the_async_api():
    async def main():
        with pytest.raises(RuntimeError, match=r"'dims': N"):
            HypermemStore(index={"embed": aembed})
        s = HypermemStore(index={"embed": aembed, "dims": 8})
        with pytest.raises(RuntimeError, match=r"async methods \(aput, asearch"):
            s.put(("u",), "a", {"text": "hello"})
        await s.aput(("u",), "a", {"text": "hello"})
        assert (await s.aget(("u",), "a")).value == {"text": "hello"}

    asyncio.run(main())


def test_sync_call_inside_the_loop_is_refused_while_an_async_put_holds_the_store():
    async def main():
        gate, started = asyncio.Event(), asyncio.Event()

        async def slow(texts):
            started.set()
            await gate.wait()
            return [_vec(t) for t in texts]

        s = HypermemStore(index={"embed": slow, "dims": 8})
        task = asyncio.create_task(s.aput(("u",), "a", {"text": "hello"}))
        await asyncio.wait_for(started.wait(), 30)   # the worker holds the store's lock, awaiting this loop
        with pytest.raises(RuntimeError, match="async methods"):   # at once: waiting for the lock would deadlock
            s.put(("u",), "b", {"text": "bye"})
        gate.set()
        await asyncio.wait_for(task, 30)
        assert (await s.aget(("u",), "a")).value == {"text": "hello"} and s.get(("u",), "b") is None

    asyncio.run(main())


def _wait(cond, seconds=10.0):
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)
    return cond()


def test_sweep_interval_starts_a_sweeper_that_removes_expired_items():
    now = [T0]
    s = HypermemStore(Memory(clock=lambda: now[0]), ttl={"default_ttl": 1, "sweep_interval_minutes": 0.002})
    s.put(("u",), "k", {"x": 1})
    s.put(("u",), "keep", {"x": 2}, ttl=None)
    fut = s.start_ttl_sweeper()            # already running: its future
    assert not fut.done() and s.start_ttl_sweeper() is fut
    now[0] = T0 + timedelta(minutes=2)
    assert _wait(lambda: "item:" + '[["u"], "k"]' not in s.memory)
    assert s.get(("u",), "keep").value == {"x": 2}
    assert s.stop_ttl_sweeper(timeout=10) and fut.result(timeout=10) is None
    assert s.stop_ttl_sweeper() is True    # none runs


def test_start_ttl_sweeper_explicit_and_close_stops_it():
    now = [T0]
    s = HypermemStore(Memory(clock=lambda: now[0]))
    assert s.start_ttl_sweeper().done()    # no TTLConfig and no interval: nothing to do (as LangGraph)
    s.put(("u",), "k", {"x": 1}, ttl=1)
    fut = s.start_ttl_sweeper(0.002)
    now[0] = T0 + timedelta(minutes=2)
    assert _wait(lambda: len(s.memory) == 0)
    s.close()
    assert fut.result(timeout=10) is None
    with pytest.raises(ValueError, match="sweep_interval_minutes"):
        HypermemStore(ttl={"sweep_interval_minutes": 0})


def test_read_only_store_starts_no_sweeper(tmp_path):
    p = str(tmp_path / "a.db")
    HypermemStore(Memory.open(p)).put(("u",), "k", {"x": 1})
    s = HypermemStore(Memory.open(p, read_only=True), ttl={"sweep_interval_minutes": 0.002})
    with pytest.raises(StorageError, match="read_only=True"):
        s.start_ttl_sweeper()
    s.close()


def test_search_limit_zero_is_an_empty_page():
    s = HypermemStore()
    s.put(("u",), "k", {"text": "hello"})
    assert s.search(("u",), limit=0) == [] and s.search(("u",), query="hello", limit=0) == []
    with pytest.raises(ValueError, match="limit >= 0"):
        s.search(("u",), limit=-1)


def test_a_clock_of_seconds_is_named():
    s = HypermemStore(clock=lambda: 1.7e9)
    with pytest.raises(TypeError, match="the memory's clock must return a datetime, got float"):
        s.put(("u",), "k", {"text": "hello"})
    with pytest.raises(TypeError, match=r"clock= must return a datetime"):
        Memory(clock=lambda: 1.7e9).add("hello")
