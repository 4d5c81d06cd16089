"""A :class:`~hypermem.store.Memory` bound to durable storage (write-through).

:meth:`Memory.open` returns an instance of a subclass made here: the store keeps its
tensors in the process (search is the in-process exact search, unchanged), and every
mutating call writes the rows it changed to the storage in **one transaction** before
it returns:

* ``add`` / ``add_many`` (:meth:`Memory._insert`): the new rows;
* ``update``: the memory's row, and with new text its subtree's rows (their directions
  are re-placed);
* ``link``: the moved subtree's rows; ``remove``: the removed ids;
* the touches of ``search`` / ``search_batch``: ``access_count + n`` and
  ``last_accessed`` of the touched rows (increments, so two processes' touches add up).
  A touch does not wait for another process's write lock: while it is held, the counts stay
  pending in this process and the next write transaction that gets the lock writes them
  (:mod:`.touches`).

**Failure.**  If writing fails the transaction is rolled back and the in-process state
is rebuilt from the storage, so the call leaves no trace and raises
:class:`StorageError`; if even that read fails (a server gone), the rebuild happens at
the start of the next call, and ``len``, ``in``, ``ids``, iteration and navigation re-read
first (raising while the server is away: :mod:`.durable_reads`), never showing rows that
were not committed.  One connection a store: its threads take turns on it (``state.lock``,
``search_server`` too).

**Other processes.**  Each transaction carries a version counter and stamps the rows it
writes, touches or removes with it (:mod:`~hypermem.store.backends.changes`).  A call that
writes first takes the storage's write lock and, when another process committed since this
one last read, applies the rows that changed since (their number, not the store's size, is
the cost; a search's touches are written as increments without applying anything, which
the next call then does).  ``search``, ``search_batch``, ``get``, ``stats``, ``table``,
``select``, the whole-store reads (iteration, ``save``, ``to_json``, ``to_dataframe``,
``time_weights``, the columns: :mod:`.durable_reads`) and :meth:`refresh` check the counter (one
small query) and apply the changes the same way, so a reader sees every memory committed before
that call began; ``len``, ``in``, ``ids`` and the navigation answer as of the last.  Another process's touches
change only access counts: they do not invalidate this process's index or mirror.  (A file
of the old layout opened read-only, and the recovery after a failed write, re-read the
whole store.)  A ``read_only=True`` memory refuses every mutating call and records no
accesses.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from typing import Any

import torch

from ...temporal.clock import to_utc
from ..auto_parent import AUTO, resolve_auto
from ..checks import Batch, check_ids
from ..encoder_points import places_points
from ..heap import trim_after
from ..records import MemoryRecord
from .changes import apply_changes
from .durable_reads import install as install_reads
from .rows import encode, load_state, vector_from
from .storage_errors import ConnectionLost as ConnectionLost  # re-exported: postgres, server
from .storage_errors import StorageError, first_statement
from .touches import LockBusy, PendingTouches, flush_at_close, remember

__all__ = ["StorageError", "durable_class", "STREAM_PART"]

STREAM_PART = 2048
"""Items a part when a large ``add_many`` streams into PostgreSQL (:meth:`DurableStore._add_many`)."""


PUT_PART = 4096
"""Rows encoded and written at a time by one write (:meth:`DurableStore._put`)."""


class DurableStore:
    """Overrides of the mutating paths of ``Memory``; mixed in before the user's class."""

    _read_only = False
    _synced = -1
    _stale = False
    _touch_warned = False
    _pending: PendingTouches | None = None

    def __getstate__(self):
        """Refused: the rows live in the database (``copy.deepcopy`` and ``pickle`` call this)."""
        raise TypeError(f"a {type(self).__name__} is backed by a database connection and cannot be pickled "
                        "or copied: open the same store with Memory.open(...) where it is needed")

    # ------------------------------------------------------------------ bookkeeping
    def _bind(self, storage, read_only: bool) -> None:
        self._storage = storage
        storage.lock = self.state.lock  # the calls' lock is the one its close() takes (.handles)
        self._read_only = read_only
        self._pending = PendingTouches()
        self.one_by_one.commits = True  # each single add is its own transaction: the add_many hint says so
        self._load()

    def _load(self, in_transaction: bool = False) -> None:
        """Rebuild the in-process state from the storage (inside the caller's transaction
        when ``in_transaction``); stale again when it fails (:mod:`.durable_reads`)."""
        self._stale = False  # the rebuild's own reads of the state do not re-read
        try:
            version, self._seq, self._sib = load_state(self, self._storage, in_transaction)   # streamed (rows.py)
        except BaseException:
            self._stale = True
            raise
        if not places_points(self.embedder):  # the storage holds them: no second copy in RAM
            self.state.release_embeddings(self._stored_embeddings)
        trim_after(self.state.n)  # the rows read back to the OS (hypermem.store.heap)
        self._counter = 1 + max([*self._seq.values(), *self._sib.values()], default=-1)
        self._synced = version
        if self._pending:
            self._pending.reapply(self.state)
        self.searcher.invalidate()

    def _stored_embeddings(self, ids: list[str]) -> torch.Tensor:
        """The stored embeddings of ``ids`` (float64 ``(len(ids), dim)``), read from the storage."""
        st = self._storage
        if st is None or st.closed:
            raise StorageError("this memory's storage is closed: a bound store reads its embeddings from it "
                               "(open the store again)")
        blobs = st.embedding_blobs(ids)
        missing = [i for i in ids if i not in blobs]
        if missing:
            raise StorageError(f"memory {missing[0]!r} is not in the storage any more (another process removed "
                               "it): call refresh()")
        return torch.stack([vector_from(blobs[i], self.dim, "embedding", i) for i in ids])

    def _tick(self) -> int:
        self._counter += 1
        return self._counter - 1

    def _catch_up(self, in_transaction: bool = False) -> None:
        """Apply what other processes committed since version ``_synced``: the changed rows
        only (:mod:`.changes`), or a full rebuild for a store without change stamps or
        after a failed write (``_stale``)."""
        st = self._storage
        if self._stale or not st.incremental:
            self._load(in_transaction=in_transaction)
            return
        version, removed, rows, touched = st.changes_since(self._synced, in_transaction=in_transaction)
        # the counter went back (a backup restored into the store: the stamps past it say nothing
        # of this store), or the pruned removal log no longer reaches back to ours: re-read it
        if version < self._synced or removed is None:
            self._load(in_transaction=in_transaction)
            return
        if version != self._synced:
            apply_changes(self, removed, rows, touched, self._seq, self._sib)
            if self._pending:  # re-read counts lack this process's pending touches
                self._pending.reapply(self.state, [r["id"] for r in rows] + [t[0] for t in touched])
            self._counter = max(self._counter, 1 + max([int(r["seq"]) for r in rows] +
                                                       [int(r["sib"]) for r in rows], default=-1))
            self._synced = version

    def refresh(self) -> bool:
        """Read what other processes committed since this one last read (the rows that
        changed, applied to the in-process state).  Returns whether anything did."""
        with self.state.lock:
            st = self._storage
            if st is None or st.closed:
                raise StorageError("this memory's storage is closed")
            try:
                return first_statement(st, self._reread)
            except st.db_errors as exc:
                raise st.error(exc) from exc

    def _reread(self) -> bool:
        st = self._storage
        if self._stale or not st.incremental:
            changed = self._stale or st.current_version() != self._synced
            if changed:
                self._load()
            return changed
        before = self._synced   # the version and the changes past ours in one read (one round trip on PostgreSQL)
        self._catch_up()
        return self._synced != before

    @contextlib.contextmanager
    def _writing(self, what: str, wait: bool = True):
        """One write transaction: lock, catch up when another process wrote, write this
        process's pending touches, commit or undo.  ``wait=False`` (a touch): raise
        :class:`~.touches.LockBusy` at once when another process holds the write lock."""
        if self._read_only:
            raise StorageError(f"{what}: this memory was opened read_only=True")
        with self.state.lock:
            st = self._storage
            if st is None or st.closed:
                raise StorageError(f"{what}: this memory's storage is closed")
            catching = False
            try:
                # version() first, always: on PostgreSQL it takes the write lock (FOR UPDATE),
                # so no other writer commits between the re-read below and this commit.
                if first_statement(st, lambda: (st.begin(wait), st.version(wait))[1]) != self._synced or self._stale:
                    catching = True
                    self._catch_up(in_transaction=True)
            except BaseException as exc:  # Ctrl-C too: no transaction (write lock) is left open
                st.rollback()
                self._stale = self._stale or catching  # a catch-up cut short: re-read whole next time
                if not isinstance(exc, st.db_errors):
                    raise
                if not wait and st.busy(exc):
                    raise LockBusy(what) from exc
                raise st.error(exc) from exc
            v0 = self.state.version
            try:
                if self._pending:  # first: this call's own touches then set the later last_accessed
                    st.touch(self._pending.rows())
                yield st
                version = st.bump()
                st.commit()
                self.state.flushed()
            except BaseException as exc:  # KeyboardInterrupt, SystemExit too: undone, then raised unchanged
                st.rollback()
                if self.state.version != v0 or not isinstance(exc, Exception):  # an interrupt lands anywhere
                    self._undo()
                if not isinstance(exc, st.db_errors):
                    raise
                raise st.error(exc) from exc
            self._synced = version
            self._pending.clear()

    def _undo(self) -> None:
        """Rebuild the state from the storage after a failed write; stale (re-read at the next
        call) when that fails, or is itself interrupted."""
        self._stale = True
        with contextlib.suppress(Exception):
            self._load()

    def _add_many(self, items, single: bool = False) -> list[str]:
        """A large batch into a storage that streams new rows (PostgreSQL's ``COPY``): checked
        whole first, then embedded, placed and sent a part of ``STREAM_PART`` items at a
        time inside one transaction and one ``COPY``, so the server stores a part while
        this process prepares the next.  All or nothing as before: a failure rolls the
        transaction back and rebuilds the state from the storage."""
        items = list(items)
        if len(items) < 2 * STREAM_PART:
            return super()._add_many(items, single)
        stream = getattr(self._storage, "insert_stream", None)
        batch = Batch.check(items, self.dim, self.ball, single)
        ids: list[str] = []
        with self._writing("add") as storage:
            if AUTO in batch.parents and self.suggester.holds_tree():
                self.state.embedding_column()  # the vote reads every embedding: now, not from the storage mid-COPY
            self.state.reserve(len(items))  # room for all at once: no column re-allocated part by part
            with contextlib.nullcontext() if stream is None else stream() as put:
                self._stream_parts(batch, storage, put, ids)
            self._check_parents(storage, ids)
        return ids

    def _stream_parts(self, batch, storage, put, ids: list[str]) -> None:
        """The parts of :meth:`_add_many`, inside its transaction (``put``: the COPY, or None)."""
        for lo in range(0, len(batch.texts), STREAM_PART):
            part = batch.part(lo, lo + STREAM_PART)
            emb, owned = part.embed(self.embedder, self.dim)
            resolve_auto(self.suggester, part, emb)
            new = super()._insert(part, emb, owned)
            self._stamp(new)
            if put is None:  # SQLite: the part's rows through the one prepared statement
                self._put(storage, new, new=True)
            else:
                put(self._rows(storage, new))
                self.state.flushed(new)  # placed and encoded: nothing reads them again before the commit
            ids += new

    def _stamp(self, ids) -> None:
        """Insertion and sibling order of new memories."""
        for i in ids:
            self._seq[i] = self._sib[i] = self._tick()

    def _rows(self, st, ids) -> list[tuple]:
        """The storage rows of ``ids`` as they are now."""
        return encode(self, ids, self._seq, self._sib, st.vector_dtype, st.time_text, st.always_direction)

    def _put(self, st, ids, new: bool = False) -> None:
        """Write the rows of ``ids``, ``PUT_PART`` at a time: each part's row tuples (about 2 KB
        of bytes and strings a memory) are freed before the next is made, so a large batch
        does not leave the process's heap grown by its whole size."""
        write = st.insert if new else st.upsert
        for lo in range(0, len(ids), PUT_PART):
            part = ids[lo:lo + PUT_PART]
            write(self._rows(st, part))
            self.state.flushed(part)  # the transaction reads them back from the storage now

    # ------------------------------------------------------------------ mutations
    def _insert(self, batch, emb, owned: bool = False) -> list[str]:
        with self._writing("add") as st:
            ids = super()._insert(batch, emb, owned)
            self._stamp(ids)
            self._put(st, ids, new=True)
            self._check_parents(st, ids)
            return ids

    def _check_parents(self, st, ids) -> None:
        """Inside the write transaction, after the rows of ``ids`` were written: every parent
        they name is in the storage (a ``KeyError`` naming the first missing one otherwise,
        and the transaction is rolled back), so no row with an unknown parent is committed."""
        written = set(ids)
        parents = sorted({p for p in (self.state.records.parent(i) for i in ids) if p is not None} - written)
        if not parents:
            return
        stored = st.stored_ids(parents)   # ids only: a bulk ingest reads no embedding back
        missing = [p for p in parents if p not in stored]
        if missing:
            raise KeyError(f"parent {missing[0]!r} is not in the storage (another process removed it, or a backup "
                           "was restored): nothing was written")

    def update(self, id: str, text: str | None = None, meta=None, t=None, **kwargs: Any) -> None:
        with self._writing("update") as st:
            super().update(id, text=text, meta=meta, t=t, **kwargs)
            moved = text is not None or kwargs.get("embedding") is not None  # the subtree was re-placed
            self._put(st, [id, *self.descendants(id)] if moved else [id])

    def remove(self, id: str, cascade: bool = False) -> list[str]:
        return self.remove_many([id], cascade=cascade)

    def remove_many(self, ids, cascade: bool = False) -> list[str]:
        with self._writing("remove") as st:
            gone = super().remove_many(ids, cascade=cascade)
            st.delete(gone)
            for i in gone:
                self._seq.pop(i, None)
                self._sib.pop(i, None)
            return gone

    def link(self, child: str, parent: str | None) -> None:
        with self._writing("link") as st:
            before = self.state.records.parent(child) if child in self.state.records else None
            super().link(child, parent)
            if before != parent:
                self._sib[child] = self._tick()
                self._put(st, [child, *self.descendants(child)])
                self._check_parents(st, [child])

    def touch(self, ids) -> None:
        """Count one access now of each id (as ``search`` does), written through; while another
        process holds the write lock the counts stay pending here (:mod:`.touches`).  An id that
        another process removed since this one read it counts nothing (:meth:`_kept`)."""
        ids = check_ids(ids, "touch()")
        if self._read_only or not ids:
            return
        counts = Counter(ids)
        row, version = self.state.row, self.state.version
        unseen = [i for i in counts if i not in row]  # ids this process has not read: the catch-up may bring them
        applied = False  # counted in the process (a failed write leaves them counted, and pending)
        try:
            with self._writing("touch", wait=False) as st:  # catches up first: ids others added are known
                if self.state.version != version:  # the catch-up changed rows: drop the ids it removed
                    ids, counts = self._kept(ids, counts, unseen)
                if ids:
                    super().touch(ids)
                    applied = True
                    st.touch([(n, self.state.records.last_accessed(i), i) for i, n in counts.items()])
        except LockBusy:
            self._touch_pending(ids, counts, unseen=unseen)
        except StorageError as exc:  # best effort (disk full, ...): the counts stay pending here
            st = self._storage
            if st is None or st.closed:
                if applied:
                    self._undo()
                raise
            if not self._touch_warned:
                self._touch_warned = True
                warnings.warn(f"{st!r}: writing the access counts of a search failed ({exc}); they stay pending "
                              "in this process and the next write that succeeds stores them", RuntimeWarning,
                              stacklevel=3)
            self._touch_pending(ids, counts, applied, unseen)
        except BaseException:
            if applied:
                self._undo()
            raise

    def record_accesses(self, accesses) -> None:
        """Count ``n`` more accesses of each id, the last at ``when`` (``{id: (n, when)}``; a
        later ``last_accessed`` already stored stays), in one write transaction: how a copy
        (:func:`~hypermem.integrations._common.durable_copy`) keeps its source's access counts
        and last access times, where :meth:`touch` counts accesses now."""
        items = [(i, int(n), None if when is None else to_utc(when, "last_accessed"))
                 for i, (n, when) in accesses.items() if n]
        if not items:
            return
        applied = False
        try:
            with self._writing("record_accesses") as st:  # catches up first: ids others added are known
                self.state.rows_of([i for i, _, _ in items])  # KeyError naming an unknown id, before any is counted
                applied = True
                for i, n, when in items:
                    last = self.state.records.last_accessed(i)
                    self.state.set_access(i, int(self.state.access[self.state.row[i]]) + n,
                                          when if last is None or (when is not None and when > last) else last)
                st.touch([(n, self.state.records.last_accessed(i), i) for i, n, _ in items])
        except BaseException:
            if applied:
                self._undo()
            raise

    def _kept(self, ids: list[str], counts: Counter, unseen: list[str]) -> tuple[list[str], Counter]:
        """``ids`` and ``counts`` without the ids another process removed since the caller read
        them (known before the catch-up, gone after it): a search's hits stay as it saw them, and
        a memory removed meanwhile has no access to count.  An id in ``unseen`` (unknown before)
        that is still unknown stays, for ``Memory.touch``'s ``KeyError``."""
        row = self.state.row
        gone = {i for i in counts if i not in row}.difference(unseen)
        if not gone:
            return ids, counts
        return [i for i in ids if i not in gone], Counter({i: n for i, n in counts.items() if i not in gone})

    def _touch_pending(self, ids: list[str], counts: Counter, applied: bool = False, unseen=()) -> None:
        """Count the touch of ``ids`` in the process (unless ``applied`` already) and keep it
        pending (:mod:`.touches`); ``unseen``: the ids unknown when the touch began."""
        if not ids:
            return
        with self.state.lock:
            if not applied:
                if any(i not in self.state.row for i in counts):
                    self.refresh()  # a read: it waits for no writer
                    ids, counts = self._kept(ids, counts, list(unseen))
                    if not ids:
                        return
                super().touch(ids)  # KeyError for an id stored nowhere
            self._pending.add(counts, self.state.records.last_accessed(ids[0]))
            remember(self)

    def _flush_touches(self) -> None:
        """Write the touches still pending (a few short tries, then a warning)."""
        st = self._storage
        if self._pending and st is not None and not st.closed and not self._read_only:
            def once():
                with self._writing("touch", wait=False):
                    pass

            flush_at_close(once, self._pending, repr(st))

    def close(self) -> None:
        """Write the touches still pending (:meth:`_flush_touches`), then close.  Under the store's
        lock: a call another thread has in flight ends first, and that thread's next call raises
        :class:`StorageError` (closed); a close from inside a call of this thread (a callback) goes on."""
        st = self._storage
        with contextlib.nullcontext() if st is None else st.lock:  # after a fork, the storage's own (.handles)
            self._flush_touches()
            super().close()

    # ------------------------------------------------------------------ reads
    def search_server(self, query: Any, k: int = 5, **kwargs: Any):
        """Search run by the PostgreSQL server over the stored rows: exact with a certified
        early stop, or ``ann=True`` (HNSW, re-scored exactly); see
        :mod:`hypermem.store.backends.pg_search`."""
        search = getattr(self._storage, "search", None)
        if search is None:
            raise StorageError(f"{self._storage!r} has no server-side search (PostgreSQL has); use search()")
        with self.state.lock:  # the one connection: never inside another thread's write transaction
            return search(self, query, k, **kwargs)

    def get(self, id: str) -> MemoryRecord:
        self.refresh()
        return super().get(id)

    def stats(self, *args: Any, **kwargs: Any):
        self.refresh()
        return super().stats(*args, **kwargs)

    def table(self, *args: Any, **kwargs: Any):
        self.refresh()
        return super().table(*args, **kwargs)

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", storage={self._storage!r})"


install_reads(DurableStore)  # len, in, ids, navigation: re-read first after a failed write (.durable_reads)


_CLASSES: dict[type, type] = {}


def durable_class(cls: type) -> type:
    """The durable subclass of ``cls`` (one per class, made once)."""
    if issubclass(cls, DurableStore):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Durable{cls.__name__}", (DurableStore, cls), {"__module__": cls.__module__})
    return _CLASSES[cls]
