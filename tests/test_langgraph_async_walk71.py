"""LangGraph store under asyncio (walk 71): a sync read inside the loop while an ``aput`` awaits
its embeddings never deadlocks; reads do not wait for a write's embeddings; writes apply in the
order of their calls; a write cancelled before it is applied never lands."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import PutOp  # noqa: E402

from hypermem.integrations.langgraph import HypermemStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _vec(texts):
    return [[float(len(t) % 7 + 1), 1.0, 0.5, float(i)] for i, t in enumerate(texts)]


def test_sync_get_inside_the_loop_while_an_aput_embeds_does_not_deadlock():
    # a subprocess: before the fix the loop thread and the worker waited for each other forever
    script = textwrap.dedent("""
        import asyncio
        from hypermem.integrations.langgraph import HypermemStore
        async def aembed(texts):
            await asyncio.sleep(0.3)
            return [[float(len(t) % 7 + 1), 1.0, 0.5, float(i)] for i, t in enumerate(texts)]
        async def main():
            store = HypermemStore(index={"embed": aembed, "dims": 4})
            task = asyncio.create_task(store.aput(("u",), "k1", {"text": "a fact"}))
            await asyncio.sleep(0.05)
            print("get", store.get(("u",), "k1"), flush=True)
            try:
                store.delete(("u",), "k1")   # would wait for the aput, which needs this loop
            except RuntimeError as exc:
                print("delete refused:", "use the async methods" in str(exc), flush=True)
            await task
            print("after", (await store.aget(("u",), "k1")).value, flush=True)
        asyncio.run(main())
    """)
    try:
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a sync get inside the event loop during an aput deadlocked")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["get None", "delete refused: True", "after {'text': 'a fact'}"]


def _gated_store():
    """A store whose sync embedding function blocks on ``gate`` for texts with 'slow'."""
    gate = threading.Event()

    def embed(texts):
        if any("slow" in t for t in texts):
            assert gate.wait(60), "the test never opened the gate"
        return _vec(texts)

    return HypermemStore(index={"embed": embed, "dims": 4}), gate


def test_a_read_does_not_wait_for_a_write_being_embedded():
    store, gate = _gated_store()
    store.put(("u",), "seed", {"text": "seed fact"})

    async def main():
        write = asyncio.create_task(store.abatch([PutOp(("u", "n"), f"k{i}", {"text": f"slow {i}"}) for i in range(50)]))
        await asyncio.sleep(0.1)
        try:   # before the fix the search waited for the lock, held through the gated embedding
            hits = await asyncio.wait_for(store.asearch(("u",), query="seed", limit=3), 30)
            got = await asyncio.wait_for(store.aget(("u",), "seed"), 30)
        finally:
            gate.set()
        await write
        return hits, got

    hits, got = asyncio.run(main())
    assert [h.key for h in hits] == ["seed"] and got.value == {"text": "seed fact"}
    assert len(store.search(("u", "n"), limit=100)) == 50


def test_the_later_call_wins_whichever_embeds_first():
    store, gate = _gated_store()

    async def main():
        first = asyncio.create_task(store.aput(("u",), "k", {"text": "slow first"}))
        await asyncio.sleep(0.1)
        second = asyncio.create_task(store.aput(("u",), "k", {"text": "second"}))
        await asyncio.sleep(0.2)   # the second is embedded; it waits for the first
        gate.set()
        await asyncio.gather(first, second)

    asyncio.run(main())
    assert store.get(("u",), "k").value == {"text": "second"}


def test_a_write_cancelled_while_embedding_never_lands_sync_embeddings():
    store, gate = _gated_store()

    async def main():
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(store.aput(("u",), "k1", {"text": "slow cancelled"}), 0.2)
        gate.set()
        await store.aput(("u",), "k2", {"text": "later"})   # applied after the cancelled one finished
        return await store.aget(("u",), "k1"), await store.aget(("u",), "k2")

    k1, k2 = asyncio.run(main())
    assert k1 is None and k2 is not None


def test_a_write_cancelled_while_awaiting_async_embeddings_never_lands():
    seen = []

    async def aembed(texts):
        try:
            await asyncio.sleep(0.5 if any("cancelled" in t for t in texts) else 0)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return _vec(texts)

    async def main():
        store = HypermemStore(index={"embed": aembed, "dims": 4})
        await store.aput(("u",), "k0", {"text": "hello"})
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(store.aput(("u",), "k1", {"text": "cancelled put"}), 0.1)
        await store.aput(("u",), "k2", {"text": "later"})   # waits for the cancelled write's turn
        await asyncio.sleep(0.8)   # past the cancelled embedding's own end: still nothing lands
        return await store.aget(("u",), "k1"), await store.aget(("u",), "k0")

    k1, k0 = asyncio.run(main())
    assert k1 is None and k0 is not None and seen == ["cancelled"]
