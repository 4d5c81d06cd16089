"""Review of walk 75: copy.copy under the store's lock."""

from __future__ import annotations

import copy
import threading

from hypermem import Memory

WAIT = 0.3   # seconds a thread is given to do what it must not do (no duration is asserted)


def _in_thread(fn) -> tuple[threading.Thread, threading.Event, list]:
    done, out = threading.Event(), []

    def run():
        try:
            out.append(fn())
        except BaseException as exc:  # handed to the test
            out.append(exc)
        done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, done, out


# ---------------------------------------------------------------------------- 1. copy.copy and the lock
def test_copy_waits_for_a_write_that_holds_the_lock():
    """A copy started while a writer holds ``mem.state.lock`` waits for the write: it copies the
    store after it (the write's record included), never halfway."""
    mem = Memory()
    mem.add_many([{"text": f"note {i}", "id": f"n{i}"} for i in range(3)])
    with mem.state.lock:   # a writer in the middle of its write
        t, done, out = _in_thread(lambda: copy.copy(mem))
        assert not done.wait(WAIT), "copy.copy went ahead while a write held the store's lock"
        mem.add("late", id="late")
    t.join(30)
    (c,) = out
    assert isinstance(c, Memory)
    assert len(c) == 4 and c.state.n == len(c.state.ids) == 4
    assert c.get("late").text == "late"
    c.add("only in the copy", id="own")
    assert "own" not in mem.state.ids and len(mem) == 4
