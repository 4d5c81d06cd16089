"""Handing freed heap back to the kernel after a bulk insert (``hypermem.store.heap``)."""

import ctypes
import ctypes.util
import platform

import pytest

from hypermem.store import heap

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


@glibc
def test_trim_returns_the_free_pages_between_live_allocations():
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size, count = 64 * 1024, 1600  # 100 MB of chunks below the mmap threshold: on the heap
    chunks = []
    for _ in range(count):
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)  # touched: resident
        chunks.append(p)
    for p in chunks[:-1:2] + chunks[1:-1:2]:  # free all but the last: the heap's top stays in use
        libc.free(p)
    before = _rss()
    assert heap.trim_heap() is True
    after = _rss()
    libc.free(chunks[-1])
    assert before - after > 0.5 * size * (count - 1), (before, after)


def test_small_batches_are_not_trimmed(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "trim_heap", lambda: calls.append(1) or True)
    heap.trim_after(heap.TRIM_ROWS - 1)
    assert calls == []
    heap.trim_after(heap.TRIM_ROWS)
    assert calls == [1]


def test_a_large_add_many_trims_once(monkeypatch):
    from hypermem import Memory
    from hypermem.store import memory as memory_module
    calls = []
    monkeypatch.setattr(memory_module, "trim_after", lambda rows: calls.append(rows))
    m = Memory()
    m.add_many({"text": f"note {i}"} for i in range(50))
    assert calls == [50]
