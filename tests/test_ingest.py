"""Fast ingest (issue 34, point 4): new rows go into PostgreSQL with one binary COPY inside the
call's transaction and into SQLite with one prepared statement per batch; a client killed
during the COPY leaves nothing of its batch; an HNSW index over the directions serves
``ann=True`` and never the exact scan."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import psycopg
import pytest
from storage_parity import T0

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends.durable import STREAM_PART

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _items(n):
    out = [{"text": "root é ü 🙂", "id": "r", "t": T0, "meta": {"nested": {"a": [1, 2.5, None, "x"]}, "s": "'q\"\\"}}]
    for i in range(1, n):
        out.append({"text": f"note {i} about topic {i % 7}", "id": f"n{i}", "parent": "r" if i % 3 else None,
                    "t": T0 + timedelta(minutes=i), "meta": {} if i % 2 else {"i": i},
                    "valid_until": T0 + timedelta(days=i) if i % 5 == 0 else None})
    return out


def test_copy_writes_every_field_and_its_stamp(pg_url):
    ref = Memory(embedder=HashingEmbedder(dim=32))
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    items = _items(300)
    ref.add_many(items)
    mem.add_many(items)
    again = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    assert again.ids == ref.ids
    for i in ref.ids:
        assert again.get(i).to_dict() == ref.get(i).to_dict()
    assert float((again.points - ref.points).abs().max()) == 0.0
    con = psycopg.connect(pg_url)
    stamps = con.execute("SELECT DISTINCT changed_at FROM hypermem_memories").fetchall()
    version = con.execute("SELECT value FROM hypermem_state WHERE key = 'version'").fetchone()[0]
    assert stamps == [(version,)]  # one transaction, its version on every row
    con.close()


def test_a_streamed_batch_equals_the_in_process_store(pg_url):
    """A batch of more than two parts goes in as parts of one COPY, embedded and placed a
    part at a time: same ids, records and points as one in-process add_many, one version."""
    n = 2 * STREAM_PART + 300
    items = _items(n)
    for i in range(STREAM_PART - 5, n, 7):  # children whose parents sit in an earlier part
        items[i]["parent"] = f"n{i - STREAM_PART // 2}"
    items[10]["embedding"] = [1.0] + [0.0] * 31
    items[STREAM_PART + 1]["point"] = [0.1] + [0.0] * 31
    ref = Memory(embedder=HashingEmbedder(dim=32))
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    before = mem.storage.current_version()
    assert mem.add_many(items) == ref.add_many(items)
    assert mem.storage.current_version() == before + 1
    again = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    assert again.ids == ref.ids
    assert all(again.get(i).to_dict() == ref.get(i).to_dict() for i in ref.ids)
    assert float((again.points - ref.points).abs().max()) == 0.0
    assert float((mem.points - ref.points).abs().max()) == 0.0


def test_a_streamed_batch_failing_in_a_later_part_stores_nothing(pg_url):
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    mem.add("kept", id="kept")
    items = [{"text": f"note {i}", "id": f"s{i}"} for i in range(2 * STREAM_PART + 10)]
    items[-1]["id"] = "s3"  # a duplicate, seen only when the last part is inserted
    with pytest.raises(ValueError, match="duplicate id 's3'"):
        mem.add_many(items)
    assert mem.ids == ["kept"] and len(Memory.open(pg_url, embedder=HashingEmbedder(dim=32))) == 1
    assert len(mem.add_many(items[:-1])) == len(items) - 1  # and the store takes the batch afterwards


def test_sqlite_batch_is_one_transaction(tmp_path):
    mem = Memory.open(tmp_path / "m.db", embedder=HashingEmbedder(dim=32))
    before = mem.storage.current_version()
    mem.add_many(_items(500))
    assert mem.storage.current_version() == before + 1
    assert Memory.open(tmp_path / "m.db").ids == mem.ids


_CHILD = """
import sys
sys.path.insert(0, {root!r})
from hypermem import HashingEmbedder, Memory
mem = Memory.open({url!r}, embedder=HashingEmbedder(dim=16))
for b in range(1000):
    mem.add_many([{{"text": f"batch {{b}} item {{j}}", "id": f"{{b}}-{{j}}"}} for j in range({size})])
    print(b, flush=True)
"""


def _copying(url) -> bool:
    with psycopg.connect(url, autocommit=True) as con:
        return con.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE "
                           "'COPY hypermem_memories%'").fetchone()[0] > 0


@pytest.mark.parametrize("size", [4000, 2 * STREAM_PART + 100])  # one COPY after placing; streamed parts
def test_sigkill_during_copy_is_all_or_nothing(pg_url, size):
    Memory.open(pg_url, embedder=HashingEmbedder(dim=16)).close()
    code = _CHILD.format(root=ROOT, url=pg_url, size=size)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    acked = [proc.stdout.readline().strip()]  # one batch committed
    assert acked[0] == "0"
    deadline = time.time() + 60
    while not _copying(pg_url):  # the next batch's COPY is running
        assert time.time() < deadline and proc.poll() is None, "no COPY seen"
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate()
    acked += rest.split()
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=16))
    batches: dict[int, int] = {}
    for i in mem.ids:
        b = int(i.split("-")[0])
        batches[b] = batches.get(b, 0) + 1
    assert set(batches.values()) == {size}  # no part of a batch
    assert sorted(batches) == list(range(len(batches)))
    assert len(batches) in (len(acked), len(acked) + 1)  # nothing that returned is lost
    mem.add("written after the kill", id="after")  # the dead client's lock is gone
    assert "after" in Memory.open(pg_url, embedder=HashingEmbedder(dim=16))


def test_hnsw_on_directions_serves_ann_and_never_the_exact_scan(pg_url):
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32))
    mem.add_many([{"text": f"word{i % 40} and word{i % 13} note {i}"} for i in range(1500)])
    exact = {j: [r.id for r in mem.search(f"word{j} and word{j % 13}", k=10, touch=False)] for j in range(15)}
    with pytest.raises(ValueError, match="on must be one of"):
        mem.storage.build_ann_index(on="embedding")
    mem.storage.build_ann_index(on="dirv", maintenance_work_mem="64MB", workers=0)
    con = mem.storage.con
    names = [r[0] for r in con.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'hypermem_memories_%'"
                                       " AND indexdef LIKE '%hnsw%'")]
    con.rollback()
    assert names == ["hypermem_memories_dirv"]
    hits = 0
    for j, truth in exact.items():
        q = f"word{j} and word{j % 13}"
        assert [r.id for r in mem.search_server(q, k=10)] == truth  # the exact scan ignores the index
        hits += len(set(truth) & {r.id for r in mem.search_server(q, k=10, ann=True, ef_search=40)})
    assert hits / (10 * len(exact)) >= 0.9
    plan = "\n".join(r[0] for r in con.execute("EXPLAIN SELECT id FROM hypermem_memories ORDER BY "
                                                "(dirv <#> (SELECT dirv FROM hypermem_memories LIMIT 1)) + 0, seq"))
    con.rollback()
    assert "hypermem_memories_dirv" not in plan
