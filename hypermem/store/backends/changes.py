r"""Incremental refresh of a mirrored durable store: apply the rows other processes changed.

Every write transaction of a durable store takes the next value ``v`` of the storage's
version counter (under the write lock) and stamps what it writes with it:

* a row it inserts or rewrites (add, update, link, a re-placed subtree) gets
  ``changed_at = v``;
* a row a search touches gets ``touched_at = v`` (its ``access_count`` and
  ``last_accessed``: nothing a mirror's search structures depend on);
* the ids it removes go to the removal log, one entry ``(v, ids)`` per transaction.

A client that last read version ``s`` reads, in one snapshot, only
``changed_at > s`` (whole rows), ``touched_at > s`` (three fields) and the log past
``s`` (:meth:`SqliteStorage.changes_since`, :meth:`PostgresStorage.changes_since`: index
range scans), and :func:`apply_changes` applies them to its in-process state:

* removals drop their rows (one compaction of the columns);
* changed rows replace their record and columns in place or are appended (new rows
  have the largest ``seq``, so the row order stays the insertion order); their levels are
  recomputed from their parents and their directions re-derived (or read, when stored)
  generation by generation, parents first, as :func:`~.rows.restore` does for all rows;
* touches set the access count and time of their rows (``MemoryState.set_access``): the
  state's ``version`` is not bumped, so an index or a float32 mirror built over the
  directions stays valid, and a search after another process's touching search costs
  what it cost before (the read is ``O(rows changed)``, never ``O(store)``);
* the state is told what changed (``MemoryState.changed``): appended rows only (the float32
  mirror and a direction index extend), rewritten rows (the mirror patches them), or a
  compaction after removals (both rebuilt on next use).

The cost of a refresh is the number of rows that changed, never the size of the store.

**The removal log is pruned** (:func:`prune_removal_log`): when its oldest entry is more than
:data:`REMOVAL_LOG_VERSIONS` versions behind the writer, the entries of the older half are
deleted and the highest version deleted is kept as ``removed_floor`` in the state table.  A
client that last read a version below the floor cannot know what was removed meanwhile:
``changes_since`` answers ``None`` for the removals and the client re-reads the store whole
(as after a restored backup).  The log then holds at most the removals of the last
``REMOVAL_LOG_VERSIONS`` write transactions, however many memories a long-lived store removes.
The first floor takes the store to layout 3 (:mod:`.layouts`): a version that does not know
the floor can no longer open it.  A writer that does not stamp its rows (a layout-1 process
still open on an upgraded store) is caught by ``stamped`` (:func:`.layouts.behind`): the
client re-reads whole then too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ...temporal.clock import to_seconds
from .layouts import FLOOR_LAYOUT, STAMPS_LAYOUT, raise_floor, warn_upgraded
from .rows import COLUMNS, derived_directions, record_of, stored_time, vector_from

__all__ = ["REMOVAL_LOG_VERSIONS", "apply_changes", "collect_changes", "issue_changes", "prune_removal_log"]

REMOVAL_LOG_VERSIONS = 100_000
"""Write transactions (versions) of removals the log keeps at least (see the module docstring)."""


def prune_removal_log(con, prefix: str, mark: str, next_version: int, keep: int = REMOVAL_LOG_VERSIONS,
                      where: str = "the store") -> bool:
    """Inside the caller's write transaction: when the log's oldest entry is more than ``keep``
    versions behind ``next_version``, delete the entries at or below ``next_version - keep // 2``
    and record that version as ``removed_floor`` (the first floor takes the store to layout 3,
    :mod:`.layouts`; ``where`` names the store in that warning).  Two index lookups when nothing
    is pruned.  Returns whether it pruned."""
    oldest = con.execute(f"SELECT min(version) FROM {prefix}_removed").fetchone()[0]
    if oldest is None or next_version - int(oldest) <= keep:
        return False
    floor = next_version - max(1, keep // 2)
    con.execute(f"DELETE FROM {prefix}_removed WHERE version <= {mark}", (floor,))
    if raise_floor(con, prefix, mark, floor):  # the first floor: layout 3 (.layouts)
        warn_upgraded(where, STAMPS_LAYOUT, FLOOR_LAYOUT, "its removal log was pruned for the first time")
    return True


def issue_changes(con, version: int, prefix: str, mark: str) -> tuple:
    """Run the three queries of the changes committed after ``version`` (inside the caller's
    snapshot) and return their cursors unread, so that a PostgreSQL pipeline sends them in
    one round trip (:func:`collect_changes` reads them); ``prefix``: the tables' prefix
    (``hm``, ``hypermem``), ``mark``: the driver's parameter mark."""
    removed = con.execute(f"SELECT ids FROM {prefix}_removed WHERE version > {mark} ORDER BY version", (version,))
    rows = con.execute(f"SELECT {', '.join(COLUMNS)} FROM {prefix}_memories WHERE changed_at > {mark}", (version,))
    # touched rows that also changed are in ``rows`` already (apply_changes skips them); no
    # "changed_at <= version" here: a planner would AND it with an index range over every row;
    # "touched_at > 0" (implied, as version >= 0) lets PostgreSQL read its partial index
    touched = con.execute(f"SELECT id, access_count, last_accessed FROM {prefix}_memories "
                          f"WHERE touched_at > {mark} AND touched_at > 0", (version,))
    return removed, rows, touched


def collect_changes(cursors: tuple, decode=lambda ids: ids):
    """``(removed ids, changed rows, touched (id, access_count, last_accessed))`` from the
    cursors of :func:`issue_changes`; ``decode``: a log entry to its ids."""
    removed, rows, touched = cursors
    return ([i for (ids,) in removed.fetchall() for i in decode(ids)], [dict(zip(COLUMNS, r)) for r in rows.fetchall()],
            touched.fetchall())


def _drop(state, gone: Sequence[str]) -> None:
    """Remove rows ``gone`` (ids present in ``state``) from the state."""
    keep = torch.ones(state.n, dtype=torch.bool)
    keep[[state.row[i] for i in gone]] = False
    for i in gone:
        parent = state.records.parent(i)
        kids = state.children.get(parent)
        if kids is not None and i in kids:
            kids.remove(i)
            if not kids:
                del state.children[parent]
        state.children.pop(i, None)
    state.keep_rows(keep)


def _levels(state, records: Mapping[str, Any]) -> dict[str, int]:
    """Level of every changed record: its parent's level + 1 (the parent changed too, or
    kept its row and level in ``state``)."""
    out: dict[str, int] = {}

    def level(i: str) -> int:
        chain = []
        while i not in out:
            p = records[i].parent_id
            if p is None:
                out[i] = 0
                break
            if p not in records:
                if p not in state.row:
                    raise ValueError(f"changed memory {i!r} has an unknown parent {p!r}")
                out[i] = state.levels[state.row[p]] + 1
                break
            if len(chain) > len(records):
                raise ValueError(f"the changed parents of memory {i!r} form a cycle")
            chain.append(i)
            i = p
        for j in reversed(chain):
            out[j] = out[records[j].parent_id] + 1
        return out[chain[0]] if chain else out[i]

    for i in records:
        level(i)
    return out


def _lend_embeddings(state, rows: Sequence[Mapping[str, Any]], emb: torch.Tensor) -> list[str]:
    """Where the state holds no embedding column (a bound store reads them from the storage),
    put the changed rows' embeddings, read in the refresh's snapshot, among its pending ones
    for the directions derived from them: read again from the storage, a row another process
    removed since that snapshot would be missing.  Returns the ids lent (taken back after)."""
    if state.embedding is not None:
        return []
    lent = [(j, r["id"]) for j, r in enumerate(rows) if r["id"] not in state.pending]
    state.pending.update((i, emb[j]) for j, i in lent)
    return [i for _, i in lent]


def apply_changes(memory, removed: Sequence[str], rows: Sequence[Mapping[str, Any]],
                  touched: Sequence[tuple], seq: dict[str, int], sib: dict[str, int]) -> bool:
    """Apply another process's changes to ``memory``'s state (under its lock): ``removed``
    ids, changed ``rows`` (dicts keyed by :data:`~.rows.COLUMNS`) and ``touched``
    ``(id, access_count, last_accessed)``; ``seq`` / ``sib`` are the caller's maps of
    insertion and sibling numbers, kept in step.  Returns whether points, records or the
    hierarchy changed (then the state's version is bumped; touches alone do not bump it)."""
    state = memory.state
    dim, dev, dt = memory.dim, memory.device, memory.dtype
    f64 = {"dtype": torch.float64, "device": dev}
    with state.lock:
        gone = [i for i in dict.fromkeys(removed) if i in state.row]
        if gone:
            _drop(state, gone)
            for i in gone:
                seq.pop(i, None)
                sib.pop(i, None)
        rows = sorted(rows, key=lambda r: int(r["seq"]))
        records = {r["id"]: record_of(r) for r in rows}
        old_parent = {r["id"]: state.records.parent(r["id"]) for r in rows if r["id"] in state.row}
        new = [r for r in rows if r["id"] not in state.row]
        if new:
            state.reserve(len(new))
            for j, r in enumerate(new):
                state.row[r["id"]] = state.n + j
            state.ids.extend(r["id"] for r in new)
            state.levels.extend([0] * len(new))
            state.n += len(new)
        parents: set[str] = set()
        for r in rows:
            i = r["id"]
            known, was = i in old_parent, old_parent.get(i)
            rec = records[i]
            if known and was != rec.parent_id and was in state.children:
                kids = state.children[was]
                if i in kids:
                    kids.remove(i)
                if not kids:
                    del state.children[was]
            if rec.parent_id is not None and (not known or was != rec.parent_id):
                state.children.setdefault(rec.parent_id, []).append(i)
            if rec.parent_id is not None:
                parents.add(rec.parent_id)
            state.records[i] = rec
            seq[i], sib[i] = int(r["seq"]), int(r["sib"])
        if rows:
            idx = torch.tensor([state.row[r["id"]] for r in rows], dtype=torch.long)
            recs = [records[r["id"]] for r in rows]
            state.time[idx.to(dev)] = torch.tensor([to_seconds(x.t) for x in recs], **f64)
            state.access[idx.to(dev)] = torch.tensor([float(x.access_count) for x in recs], **f64)
            state.valid_from[idx.to(dev)] = torch.tensor([to_seconds(x.valid_from, -math.inf) for x in recs], **f64)
            state.valid_until[idx.to(dev)] = torch.tensor([to_seconds(x.valid_until, math.inf) for x in recs], **f64)
            state.depth[idx.to(dev)] = torch.tensor([float(r["depth"]) for r in rows], **f64).to(dt)
            emb = torch.stack([vector_from(r["embedding"], dim, "embedding", r["id"]) for r in rows])
            state.stored_embeddings(idx, emb)
            level = _levels(state, records)
            for r in rows:
                state.levels[state.row[r["id"]]] = level[r["id"]]
            by_row = {r["id"]: r for r in rows}
            lent = _lend_embeddings(state, rows, emb)
            try:
                for lv in sorted(set(level.values())):  # parents are placed before their children
                    gen = [i for i in by_row if level[i] == lv]
                    derive = [state.row[i] for i in gen if by_row[i]["direction"] is None]
                    if derive:
                        state.direction[derive] = derived_directions(memory, derive)
                    for i in gen:
                        if by_row[i]["direction"] is not None:
                            state.direction[state.row[i]] = vector_from(by_row[i]["direction"], dim, "direction",
                                                                        i).to(dev, dt)
            finally:
                for i in lent:
                    state.pending.pop(i, None)
            for p in parents & set(state.children):
                state.children[p].sort(key=lambda k: (sib.get(k, 0), state.row[k]))
        for i, count, last in touched:
            if i in state.row and i not in records:
                state.set_access(i, int(count), stored_time(last))
        if gone:  # compacted (the mirror kept in step), then the points of stored rows rewritten
            state.changed(rows=sorted({state.row[r["id"]] for r in rows} - {state.row[r["id"]] for r in new}),
                          compacted=True)
        elif len(new) < len(rows):  # points of stored rows rewritten: the mirror patches just those
            state.changed(rows=sorted({state.row[r["id"]] for r in rows} - {state.row[r["id"]] for r in new}))
        elif new:
            state.changed(appended=True)  # appended only: the mirror and a direction index just extend
        return bool(gone or rows)
