r"""The SQL of the mirror-free PostgreSQL client (:mod:`.server`): the recursive queries its
navigation and its writes share, the streamed mean weight of ``stats``, and the writes,
each inside the caller's write transaction: they read only the rows a change needs, place new and moved
memories with the pure functions of :mod:`hypermem.store.placement` (as
:class:`~hypermem.store.placement.Placer` does in process), and write the changed rows.

* a new batch reads its stored parents' directions and depths and their levels (one
  recursive query up the ``parent_id`` index);
* a new text or a new parent re-places the subtree: its rows are read in breadth-first
  order (a recursive query), placed generation by generation from the parent of its root,
  and written back;
* a removal lists the subtree with the same recursive query and deletes it.

``seq`` (insertion order) and ``sib`` (order among siblings) of new rows and of a linked
child take the next value of ``max(seq, sib) + 1`` over the table, read under the write lock.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from typing import Any

import torch

from ...temporal import policy_weights
from ...temporal.clock import to_seconds, to_utc
from ..json_values import exact_numbers
from ..placement import child_directions, level_depths, point_placement, unit
from ..state import batch_ids
from .rows import COLUMNS, vector_bytes, vector_from

_M = "hypermem_memories"
_DESCENDANTS = (f"WITH RECURSIVE sub(id, g, path) AS (SELECT id, 0, ARRAY[]::bigint[] FROM {_M} WHERE id = %s "
                f"UNION ALL SELECT m.id, sub.g + 1, sub.path || ARRAY[m.sib, m.seq] FROM {_M} m JOIN sub ON "
                f"m.parent_id = sub.id) SELECT id, g FROM sub ORDER BY g, path")
_LEVELS = (f"WITH RECURSIVE up(start, pid) AS (SELECT id, parent_id FROM {_M} WHERE id = ANY(%s) UNION ALL "
           f"SELECT up.start, m.parent_id FROM up JOIN {_M} m ON m.id = up.pid) "
           f"SELECT start, count(pid) FROM up GROUP BY start")
_UP = (f"WITH RECURSIVE up(id, parent_id, n) AS (SELECT id, parent_id, 0 FROM {_M} WHERE id = %s UNION ALL "
       f"SELECT m.id, m.parent_id, up.n + 1 FROM {_M} m JOIN up ON m.id = up.parent_id) SELECT id FROM up ORDER BY n")
_HISTOGRAM = (f"WITH RECURSIVE lv(id, level, t) AS (SELECT id, 0, t FROM {_M} WHERE parent_id IS NULL UNION ALL "
              f"SELECT m.id, lv.level + 1, m.t FROM {_M} m JOIN lv ON m.parent_id = lv.id) "
              "SELECT level, count(*) FROM lv{where} GROUP BY level ORDER BY level")


def recorded_by(t_max, column: str = "t") -> tuple[str, tuple]:
    """``(" WHERE t <= %s", (t_max,))``: the rows recorded at ``t_max`` or before (the rule of
    :func:`hypermem.store.as_of.keep_at` at an explicit ``at_time``); ``("", ())`` for None."""
    return ("", ()) if t_max is None else (f" WHERE {column} <= %s", (t_max,))


def subtree(con, root: str) -> list[tuple[str, int]]:
    """``(id, generation)`` of ``root`` and its descendants, breadth first, children in order
    (the order of ``Memory.descendants``); empty when ``root`` is unknown."""
    return [(r[0], int(r[1])) for r in con.execute(_DESCENDANTS, (root,))]


def subtree_up(con, id: str) -> list[str]:
    """``id`` and its ancestors up to the root (empty when ``id`` is unknown)."""
    return [r[0] for r in con.execute(_UP, (id,))]


def level_histogram(con, t_max=None) -> dict[int, int]:
    """How many memories sit at each level of the hierarchy (a level counts every ancestor,
    also one recorded later); with ``t_max`` only those recorded at ``t_max`` or before."""
    where, params = recorded_by(t_max)
    return {int(r[0]): int(r[1]) for r in con.execute(_HISTOGRAM.format(where=where), params)}


def embedding_bytes(e: torch.Tensor, st) -> bytes:
    """A raw embedding as the storage keeps it (its ``vector_dtype``)."""
    return vector_bytes(e, st.vector_dtype)


def levels(con, ids: Sequence[str]) -> dict[str, int]:
    """Hierarchy level (number of ancestors) of each stored id."""
    return {r[0]: int(r[1]) for r in con.execute(_LEVELS, (list(ids),))} if ids else {}


def rows_of(con, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Full rows (dicts keyed by :data:`~.rows.COLUMNS`) of the stored ``ids``."""
    cur = con.execute(f"SELECT {', '.join(COLUMNS)} FROM {_M} WHERE id = ANY(%s)", (list(ids),))
    return {r[0]: dict(zip(COLUMNS, r)) for r in cur}


def next_counter(con) -> int:
    """The next insertion / sibling number: ``max(seq, sib) + 1`` (0 for an empty table)."""
    v = con.execute(f"SELECT greatest((SELECT max(seq) FROM {_M}), (SELECT max(sib) FROM {_M}))").fetchone()[0]
    return 0 if v is None else int(v) + 1


def _stored(mem, v: torch.Tensor) -> torch.Tensor:
    """``v`` as the store keeps it (rounded to the store's dtype), back in float64."""
    return v.to(mem.dtype).to(torch.float64)


def _new_ids(con, batch, dim: int) -> list[str]:
    """The batch's ids (fresh random ones for None), checked by :func:`~hypermem.store.state.batch_ids`
    against the stored ids the batch names: no id stored or twice in the batch, every
    parent stored or earlier in the batch."""
    asked = [i for i in batch.ids if i is not None] + [p for p in batch.parents if p is not None]
    stored = set()  # only the stored ids the batch names
    if asked:
        stored = {r[0] for r in con.execute(f"SELECT id FROM {_M} WHERE id = ANY(%s)", (asked,))}
    new, pos = batch_ids(batch.ids, batch.parents, stored)
    fresh = [j for j, i in enumerate(batch.ids) if i is None]
    if fresh:  # a random id that someone stored already (vanishingly rare): draw again
        taken = {r[0] for r in con.execute(f"SELECT id FROM {_M} WHERE id = ANY(%s)", ([new[j] for j in fresh],))}
        for j in fresh:
            while new[j] in taken or pos.get(new[j], j) != j:
                new[j] = uuid.uuid4().hex[:16]
            pos[new[j]] = j
    return new


def insert(mem, st, batch, emb: torch.Tensor) -> list[str]:
    """Store a checked ``add_many`` batch with embeddings ``emb`` (float64 ``(m, dim)``); the
    clock is read once, after the ids are checked (as in process)."""
    con = st.con
    ids = _new_ids(con, batch, mem.dim)
    now = to_utc(mem.clock())
    pos = {i: j for j, i in enumerate(ids)}
    outside = sorted({p for p in batch.parents if p is not None and p not in pos})
    parent_rows = rows_of(con, outside)
    parent_level = levels(con, outside)
    m = len(ids)
    lv, gen = [0] * m, [0] * m
    for j, par in enumerate(batch.parents):
        if par is None:
            continue
        if par in pos:
            lv[j], gen[j] = lv[pos[par]] + 1, gen[pos[par]] + 1
        else:
            lv[j] = parent_level[par] + 1
    e = unit(emb)
    dirs = e.clone()
    depths = level_depths(mem, lv)
    if batch.points:
        ex = sorted(batch.points)
        pts = torch.stack([batch.points[i] for i in ex])
        dirs[ex], depths[ex] = point_placement(pts, dirs[ex], mem.curvature)
    out_dir = {p: vector_from(r["direction"], mem.dim, "direction", p) for p, r in parent_rows.items()}
    out_dep = {p: float(r["depth"]) for p, r in parent_rows.items()}
    for g in range(max(gen, default=0) + 1):
        kids = [j for j in range(m) if gen[j] == g and batch.parents[j] is not None and j not in batch.points]
        if not kids:
            continue
        par = [batch.parents[j] for j in kids]
        pdir = torch.stack([dirs[pos[p]] if p in pos else out_dir[p] for p in par])
        pdep = torch.tensor([float(depths[pos[p]]) if p in pos else out_dep[p] for p in par], dtype=torch.float64)
        dirs[kids] = child_directions(e[kids], pdir, pdep, depths[kids], mem.inherit, mem.cone_constrained,
                                      mem.cone_k, mem.curvature)
    dirs, depths = _stored(mem, dirs), _stored(mem, depths).tolist()
    seq0 = next_counter(con)
    rows = []
    for j, id_ in enumerate(ids):
        t = now if batch.times[j] is None else batch.times[j]
        rows.append((id_, seq0 + j, seq0 + j, batch.texts[j], batch.parents[j], t, batch.valid_from[j],
                     batch.valid_until[j], 0, None, json.dumps(batch.metas[j], allow_nan=False), depths[j],
                     vector_bytes(emb[j], st.vector_dtype), vector_bytes(dirs[j])))
    st.insert(rows)
    return ids


def replace_subtree(mem, st, root: str, changes: dict[str, Any]) -> list[str]:
    """Re-place ``root``'s subtree after ``changes`` to its row (a new ``parent_id``,
    ``sib``, ``text``, ``embedding``) as ``Placer.replace_subtree`` does, and write it;
    returns the subtree's ids (breadth first)."""
    con = st.con
    order = subtree(con, root)
    rows = rows_of(con, [i for i, _ in order])
    rows[root].update(changes)
    parent = rows[root]["parent_id"]
    base_level, prev = 0, {}
    if parent is not None:
        prow = rows_of(con, [parent])[parent]
        base_level = levels(con, [parent])[parent] + 1
        prev[parent] = (vector_from(prow["direction"], mem.dim, "direction", parent), float(prow["depth"]))
    gens: list[list[str]] = []
    for i, g in order:
        if g == len(gens):
            gens.append([])
        gens[g].append(i)
    for g, frontier in enumerate(gens):
        emb = torch.stack([vector_from(rows[i]["embedding"], mem.dim, "embedding", i) for i in frontier])
        e = unit(emb)
        depth = level_depths(mem, [base_level + g] * len(frontier))
        dirs = e.clone()
        kid = [j for j, i in enumerate(frontier) if rows[i]["parent_id"] is not None]
        if kid:
            par = [rows[frontier[j]]["parent_id"] for j in kid]
            dirs[kid] = child_directions(e[kid], torch.stack([prev[p][0] for p in par]),
                                         torch.tensor([prev[p][1] for p in par], dtype=torch.float64), depth[kid],
                                         mem.inherit, mem.cone_constrained, mem.cone_k, mem.curvature)
        dirs, depth = _stored(mem, dirs), _stored(mem, depth)
        for j, i in enumerate(frontier):
            prev[i] = (dirs[j], float(depth[j]))
            rows[i]["direction"], rows[i]["depth"] = vector_bytes(dirs[j]), float(depth[j])
    st.upsert([tuple(rows[i][c] if c != "meta" else json.dumps(rows[i][c], allow_nan=False) for c in COLUMNS)
               for i, _ in order])
    return [i for i, _ in order]


def touch_counts(st, counts: dict[str, int], now) -> dict[str, int]:
    """Add ``counts[id]`` accesses at ``now`` to each stored id (increments, so concurrent
    touches add up), stamped with the transaction's version; returns the new access counts."""
    if not counts:
        return {}
    cur = st.con.execute(f"UPDATE {_M} m SET access_count = m.access_count + v.n, last_accessed = %s, touched_at = "
                         f"%s FROM unnest(%s::text[], %s::bigint[]) AS v(id, n) WHERE m.id = v.id RETURNING m.id, "
                         f"m.access_count", (now, st.next_version, list(counts), list(counts.values())))
    return {r[0]: int(r[1]) for r in cur}


def update_fields(st, id: str, fields: dict[str, Any]) -> None:
    """Set record fields (``meta``, ``t``, ``valid_from``, ``valid_until``) of one row,
    stamped ``changed_at`` with the transaction's version."""
    if fields:
        sets = ", ".join(f"{c} = %s::jsonb" if c == "meta" else f"{c} = %s" for c in fields)
        vals = [exact_numbers(json.dumps(v, allow_nan=False)) if c == "meta" else v for c, v in fields.items()]
        st.con.execute(f"UPDATE {_M} SET {sets}, changed_at = %s WHERE id = %s", (*vals, st.next_version, id))


def mean_weight(con, decay, now, n: int, t_max=None) -> float:
    """Mean time weight at ``now`` of the ``n`` stored memories (with ``t_max``: of the ``n``
    recorded at ``t_max`` or before), streamed in chunks (a server-side cursor: no column of
    the whole store in the process)."""
    total = 0.0
    f64 = {"dtype": torch.float64}
    where, params = recorded_by(t_max)
    with con.cursor(name="hypermem_weights") as cur:
        cur.execute(f"SELECT t, access_count, valid_from, valid_until FROM {_M}{where}", params)
        while batch := cur.fetchmany(50_000):
            t, acc, vf, vu = zip(*batch)
            w = policy_weights(decay, now, torch.tensor([to_seconds(x) for x in t], **f64),
                               torch.tensor([float(a) for a in acc], **f64),
                               torch.tensor([to_seconds(x, -math.inf) for x in vf], **f64),
                               torch.tensor([to_seconds(x, math.inf) for x in vu], **f64))
            total += float(w.sum())
    return total / n
