"""The touches of a client without a mirror (:class:`~.server.ServerMemory`): written without
waiting for another client's write lock, else kept pending in the process (:mod:`.touches`)."""

from __future__ import annotations

from collections import Counter

from ...temporal.clock import to_utc
from ..caller_warning import warn_caller
from ..checks import check_ids
from . import server_writes as W
from .storage_errors import StorageError
from .touches import LockBusy, flush_at_close, remember

_M = "hypermem_memories"


def flush_pending(mem, st) -> bool:
    """Write ``mem``'s pending touches in the open write transaction; whether there were any."""
    pending = mem._pending
    if not pending:
        return False
    ns, ts, ids = zip(*pending.rows())
    st.con.execute(f"UPDATE {_M} m SET access_count = m.access_count + v.n, last_accessed = GREATEST("
                   f"m.last_accessed, v.t), touched_at = %s FROM unnest(%s::text[], %s::bigint[], "
                   f"%s::timestamptz[]) AS v(id, n, t) WHERE m.id = v.id",
                   (st.next_version, list(ids), list(ns), list(ts)))
    return True


def touch_results(mem, results) -> None:
    """Count the accesses of what a search returned; the returned records show them (one
    record object per id, as in process)."""
    if mem.read_only:
        return
    shared, counts = {}, Counter()
    for res in results:
        for r in res:
            r.record = shared.setdefault(r.id, r.record)
            counts[r.id] += 1
    if not counts:
        return
    now = to_utc(mem.clock())
    try:
        with mem._write("touch", wait=False) as (st, _):
            new = W.touch_counts(st, counts, now)
    except (LockBusy, StorageError) as exc:  # pending: the records show the stored counts as read plus the pending
        if not isinstance(exc, LockBusy):  # best effort (no UPDATE privilege, disk full, a timeout), as mirrored
            if mem._storage.closed:
                raise
            _warn_once(mem, exc)
        mem._pending.add(counts, now)
        remember(mem)
        new = {i: rec.access_count + mem._pending.count(i) for i, rec in shared.items()}
    for i, rec in shared.items():
        if i in new:
            rec.access_count, rec.last_accessed = new[i], now


def _warn_once(mem, exc: StorageError) -> None:
    """The warning (once a store) that a search's access counts could not be written and stay pending."""
    if getattr(mem, "_touch_warned", False):
        return
    mem._touch_warned = True
    warn_caller(f"{mem._storage!r}: writing the access counts of a search failed ({exc}); they stay pending in "
                  "this process and the next write that succeeds stores them (open read_only=True to record none)",
                RuntimeWarning)


def touch_ids(mem, ids) -> None:
    """:meth:`ServerMemory.touch`: one access now of each id (a repeated id counts each time)."""
    ids = check_ids(ids, "touch()")
    if mem.read_only or not ids:
        return
    counts = Counter(ids)

    def check(con) -> None:
        known = {r[0] for r in con.execute(f"SELECT id FROM {_M} WHERE id = ANY(%s)",
                                           ([i for i in counts if isinstance(i, str)],))}
        for i in ids:
            if i not in known:
                raise KeyError(f"unknown memory id {i!r}")

    now = to_utc(mem.clock())
    try:
        with mem._write("touch", wait=False) as (st, _):
            check(st.con)
            W.touch_counts(st, counts, now)
    except LockBusy:
        with mem._read() as con:  # a read waits for no writer
            check(con)
        mem._pending.add(counts, now)
        remember(mem)


def flush(mem) -> None:
    """Write the pending touches (a few short tries, then a warning)."""
    if mem._pending and not mem.read_only and not mem._storage.closed:
        def once():
            with mem._write("touch", wait=False):
                pass

        flush_at_close(once, mem._pending, repr(mem._storage))
