"""Walk 70 (LangGraph agent): ``Memory.get`` while another thread removes.  A remove compacts the
rows under the store's lock; a read that looked up a row and then read the columns without it
could return the next memory's record (two LangGraph stores over one memory saw wrong items)."""

import threading

from hypermem import HashingEmbedder, Memory


def test_get_reads_its_row_and_columns_at_one_moment(monkeypatch):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    for i in range(10):
        mem.add(f"note {i}", id=f"k{i}")
    table = mem.state.records
    read_rows = table.at_rows
    looked_up, removed = threading.Event(), threading.Event()
    got = {}

    def reading_slowly(rows, copies=True):
        if threading.current_thread().name == "reader":
            looked_up.set()
            removed.wait(0.5)   # without the lock the remove runs here and shifts the rows
        return read_rows(rows, copies)

    monkeypatch.setattr(table, "at_rows", reading_slowly)

    def read():
        got["k3"] = mem.get("k3")

    def remove():
        looked_up.wait(5)
        mem.remove("k0")
        removed.set()

    threads = [threading.Thread(target=read, name="reader"), threading.Thread(target=remove)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert (got["k3"].id, got["k3"].text) == ("k3", "note 3")
    assert "k0" not in mem and mem.get("k4").text == "note 4" and len(mem) == 9
