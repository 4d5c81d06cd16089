"""A durable SQLite store's -wal stays small on disk: checkpoints every ``WAL_PAGES`` pages and
cut back to ``WAL_KEEP_BYTES`` after one (SQLite's defaults leave ~16 MiB beside a tiny store)."""
import os
import warnings

from hypermem import Memory
from hypermem.embed import HashingEmbedder
from hypermem.store.backends.sqlite import WAL_KEEP_BYTES


def test_many_small_commits_keep_the_wal_near_its_limit(tmp_path):
    path = tmp_path / "agent.db"
    sizes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the hint to use add_many: one commit a call is the point here
        with Memory.open(path, embedder=HashingEmbedder(dim=32)) as mem:
            for i in range(600):
                mem.add(f"note {i} about topic {i % 7}")
                mem.search(f"topic {i % 7}", k=3)  # a touch: one more small write transaction
                if i % 50 == 49:
                    sizes.append(os.path.getsize(f"{path}-wal"))
    assert max(sizes) <= WAL_KEEP_BYTES + 64 * 1024, sizes  # one transaction's pages past the checkpoint


def test_a_bulk_write_leaves_no_large_wal_after_the_next_commit(tmp_path):
    path = tmp_path / "bulk.db"
    with Memory.open(path, embedder=HashingEmbedder(dim=32)) as mem:
        mem.add_many([{"text": f"bulk note {i}"} for i in range(40000)])
        big = os.path.getsize(f"{path}-wal")
        mem.add("one more")
        after = os.path.getsize(f"{path}-wal")
    assert big > 2 * WAL_KEEP_BYTES and after <= WAL_KEEP_BYTES, (big, after)
