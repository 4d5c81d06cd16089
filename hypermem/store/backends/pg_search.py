r"""Search run by the PostgreSQL server: exact with a certified early stop, or HNSW.

Both rank by the store's score ``-distance + depth_bias * depth + time_coef * log(w)``
with the shell metric, computed in float64 **in Python by the same functions as the
in-process search** (:class:`hypermem.index.ShellDistance`, the decay policy's
``weight``, :func:`hypermem.index.exact_topk` over the rows read); SQL only chooses which
rows to read and in what order.

**Exact, certified early stop.**  ``ORDER BY dirv <#> q`` reads rows by decreasing float32
cosine ``s~`` between the stored and the query direction.  For unit vectors rounded to
float32 and summed in float32, ``|s~ - s| <= eps = (d + 4) 2^-23`` (each product's relative
error is below ``(d + 2) 2^-24`` and ``sum |u_i q_i| <= 1``).  Every row not read yet
therefore has ``s <= s~_last + eps``, distance ``>= g(min(1, s~_last + eps))`` (``g``
decreases) and score ``<= -g(min(1, s~_last + eps)) + B``, where ``B`` bounds the other
terms over the rows this query may return (one aggregate query): ``depth_bias * max depth``
(``min depth`` when ``depth_bias < 0``) plus ``time_coef * log(w_best)``.  For the built-in
policies (:func:`monotone_policy`) a weight never decreases with a later ``t``, more
accesses or a wider validity window, so ``w_best`` is the weight of a made-up memory with
the latest ``t``, the most accesses and no window; for any other policy ``w_best = 1``
(weights are at most 1).  With ``time_coef < 0`` the term is bounded by
``time_coef * log(MIN_WEIGHT)``.  Rows are read in growing batches and the scan stops as soon as that
bound is below the k-th best exact score: no unread row can enter the top k, so the
answer equals the full exact search (ties broken by insertion order, as in process).

The frontier cosine is the largest one among the last eighth of the latest batch (in the
exact order, the last row's).

**ANN.**  The same batched scan and stop, reading rows in the order of the HNSW index
(``ORDER BY lor <-> q~``, ``vector_l2_ops`` on the Lorentz vectors made Euclidean,
:mod:`.postgres`; or, with the index built ``on="dirv"``, ``ORDER BY dirv <#> q``, the
cosine order of the exact scan read from an HNSW ``vector_ip_ops`` index; ``hnsw.iterative_scan = strict_order`` so that the index keeps producing
rows, ``hnsw.ef_search = ef_search``; the first batch is ``k * oversample`` rows).  Every
row read is scored exactly in float64; the answer misses only rows that the approximate
index order leaves behind the frontier.  Recall against the exact answer is measured in
``benchmarks/bench_storage.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import torch

from ...geometry import poincare as P
from ...index import ShellDistance, exact_topk
from ...retrieval.scoring import score_bias
from ...temporal import MIN_WEIGHT, policy_weights
from ...temporal.clock import to_seconds
from ..caller_warning import warn_caller
from ..filters import compile_filter, to_postgres
from ..records import SearchResult
from .rows import COLUMNS, record_of, vector_from

SERVER_MODES = ("nearest", "subtree", "children", "ancestors", "siblings")
_SUBTREE = ("id IN (WITH RECURSIVE sub(id) AS (SELECT %s::text UNION ALL SELECT m.id FROM hypermem_memories m "
            "JOIN sub ON m.parent_id = sub.id) SELECT id FROM sub)")
_ANCESTORS = ("id IN (WITH RECURSIVE up(id, parent_id) AS (SELECT id, parent_id FROM hypermem_memories WHERE id = "
              "%s UNION ALL SELECT m.id, m.parent_id FROM hypermem_memories m JOIN up ON m.id = up.parent_id) "
              "SELECT parent_id FROM up WHERE parent_id IS NOT NULL)")


def float32_cosine_error(dim: int) -> float:
    """Bound on ``|float32 cosine - exact cosine|`` of unit vectors (module docstring)."""
    return (dim + 4) * 2.0 ** -23


def _where(mode: str, root: str | None, at_time: datetime | None, now: datetime, filters, valid_only: bool):
    return where_clause(mode, root, now if at_time is not None else None, now if valid_only else None, filters)


def where_clause(mode: str, root: str | None, t_max: datetime | None, valid_at: datetime | None, filters):
    """``(" WHERE ...", params)`` choosing the candidate rows: the mode's rows of ``root``,
    created at ``t_max`` or before (when given), valid at ``valid_at`` (when given), whose
    metadata passes ``filters`` (:func:`hypermem.store.filters.to_postgres`: a JSONB clause never
    stricter than the Python predicate, which checks every row read)."""
    clauses, params = [], []
    if mode != "nearest":
        if root is None:
            raise ValueError(f"mode={mode!r} needs root=<memory id>")
        if mode == "subtree":
            clauses.append(_SUBTREE)
        elif mode == "children":
            clauses.append("parent_id = %s")
        elif mode == "ancestors":
            clauses.append(_ANCESTORS)
        else:
            clauses.append("parent_id IS NOT DISTINCT FROM (SELECT parent_id FROM hypermem_memories WHERE id = %s) "
                           "AND id <> %s")
            params.append(root)
        params.append(root)
    if t_max is not None:
        clauses.append("t <= %s")
        params.append(t_max)
    if valid_at is not None:
        clauses.append("(valid_from IS NULL OR valid_from <= %s) AND (valid_until IS NULL OR valid_until >= %s)")
        params += [valid_at, valid_at]
    if filters:
        clause, fparams = to_postgres(filters)
        if clause is not None:
            clauses.append(clause)
            params += fparams
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def _bias(memory, rows: list[dict], now: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``time_coef * log(max(w, MIN_WEIGHT)) + depth_bias * depth`` of rows (as in ``Memory.search``), with
    the rows' time weights ``w`` and depths."""
    f64 = {"dtype": torch.float64}
    t = torch.tensor([to_seconds(r["t"]) for r in rows], **f64)
    acc = torch.tensor([float(r["access_count"]) for r in rows], **f64)
    vf = torch.tensor([to_seconds(r["valid_from"], -math.inf) for r in rows], **f64)
    vu = torch.tensor([to_seconds(r["valid_until"], math.inf) for r in rows], **f64)
    w = policy_weights(memory.decay, now, t, acc, vf, vu)
    depth = torch.tensor([float(r["depth"]) for r in rows], **f64)
    return score_bias(w, depth, memory.time_coef, memory.depth_bias), w, depth


def _top(memory, q: torch.Tensor, rows: list[dict], k: int, now: float, filters, lexical=None):
    """Exact top-k of the rows (insertion order breaks ties); ``(results, kth score)``;
    ``lexical`` (``{id: term}``) adds a hybrid search's lexical term (:mod:`.pg_lexical`)."""
    if filters:
        pred = compile_filter(filters)
        rows = [r for r in rows if pred(r["meta"])]
    if not rows:
        return [], -math.inf
    rows = sorted(rows, key=lambda r: r["seq"])
    dim = memory.dim
    keys = torch.stack([vector_from(r["direction"], dim, "direction", r["id"]) for r in rows])
    bias, w, depth = _bias(memory, rows, now)
    if lexical:
        bias = bias + torch.tensor([lexical.get(r["id"], 0.0) for r in rows], dtype=bias.dtype)
    g = ShellDistance(memory.curvature, memory.base_depth)
    s, idx, dist = exact_topk(q.unsqueeze(0), keys, min(k, len(rows)), g, bias, g.inverse, max_product=1.0)
    out = []
    for sc, i, d in zip(s[0].tolist(), idx[0].tolist(), dist[0].tolist()):
        if i >= 0 and sc != -math.inf:
            out.append(SearchResult(record=record_of(rows[i]), score=float(sc), distance=float(d),
                                    time_weight=float(w[i]), depth=float(depth[i])))
    kth = out[k - 1].score if len(out) >= k else -math.inf
    return out, kth


def server_search(st, memory, query: Any, k: int = 5, mode: str = "nearest", root: str | None = None,
                  at_time: datetime | None = None, filters: Mapping[str, Any] | None = None, valid_only: bool = False,
                  ann: bool = False, ef_search: int = 100, oversample: int = 4, stats: dict | None = None):
    """Search run by the server (see the module docstring); ``stats``, when given, receives
    ``rows_read``.  The shell metric only; no touches (the server search is read-only).
    ``query=None`` with a structural mode ranks the mode's rows as ``Memory.search`` does
    without a query (:func:`rank_by_bias`)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    if mode not in SERVER_MODES:
        raise ValueError(f"the server search supports modes {SERVER_MODES}, got {mode!r} (cone mode runs in "
                         f"process: Memory.search)")
    if filters is not None and not isinstance(filters, Mapping):
        raise TypeError("the server search takes a metadata dict as filters (a callable runs in process)")
    if query is None and mode == "nearest":
        raise ValueError("mode='nearest' needs a query; omit the query only with a structural mode")
    q = None if query is None else memory.searcher.query_directions([query], None)[0][0].to("cpu", torch.float64)
    now_dt = memory.searcher.now(at_time)
    now = to_seconds(now_dt)
    where, params = _where(mode, root, at_time, now_dt, filters, valid_only)
    con = st.con
    try:
        con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot for every batch
        if q is None:
            if con.execute("SELECT NOT EXISTS (SELECT 1 FROM hypermem_memories WHERE id = %s)", (root,)).fetchone()[0]:
                raise KeyError(f"unknown memory id {root!r}")
            return rank_by_bias(con, memory, k, now, where, params, filters)
        if ann:
            ann_settings(con, ef_search)
        bounds = candidate_bounds(con, where, params)
        return scan(con, memory, q, k, now, bounds, where, params, filters, ann, oversample, stats)
    finally:
        con.rollback()


def ann_settings(con, ef_search: int) -> None:
    """Settings of the current transaction for reading rows in HNSW order (module docstring)."""
    for setting in (f"hnsw.ef_search = {int(ef_search)}", "hnsw.iterative_scan = strict_order",
                    "enable_seqscan = off", "enable_sort = off"):
        con.execute(f"SET LOCAL {setting}")


def ann_column(con) -> str | None:
    """The column of the store's HNSW index (``"dirv"`` or ``"lor"``), None without one."""
    row = con.execute("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND "  # the store's own
                      "tablename = 'hypermem_memories' AND indexname IN "
                      "('hypermem_memories_dirv', 'hypermem_memories_lor') ORDER BY indexname LIMIT 1").fetchone()
    return None if row is None else row[0].rsplit("_", 1)[1]


def candidate_bounds(con, where: str, params: list) -> tuple | None:
    """``(min depth, max depth, latest t, most accesses)`` of the candidate rows (None: no row)."""
    bounds = con.execute(f"SELECT min(depth), max(depth), max(t), max(access_count) FROM hypermem_memories{where}",
                         params).fetchone()
    return None if bounds[0] is None else bounds


def scan(con, memory, q: torch.Tensor, k: int, now: float, bounds: tuple | None, where: str, params: list,
         filters=None, ann: bool = False, oversample: int = 4, stats: dict | None = None,
         lexical: dict | None = None) -> list[SearchResult]:
    """The exact top ``k`` of the candidate rows for the unit query direction ``q`` (float64,
    CPU), weights at ``now`` (POSIX seconds): the certified scan in cosine order, or in HNSW
    order with ``ann`` (after :func:`ann_settings`); ``bounds`` from :func:`candidate_bounds`."""
    if bounds is None:
        if stats is not None:
            stats["rows_read"] = 0
        return []
    column = ann_column(con) if ann else None
    if ann and column is None:
        warn_caller("search(ann=True): this store has no HNSW index (build_ann_index builds one), so PostgreSQL "
                    "read the candidate rows in exact distance order: same results, no index speed", RuntimeWarning)
    if column == "dirv":
        return _scan(con, memory, q, k, now, bounds, where, params, filters, stats, "dirv <#> %s",
                     q.numpy().astype("float32"), max(k * oversample, 16), lexical)
    if ann:
        qy = P.to_lorentz(P.point_at(q, memory.base_depth, memory.curvature), memory.curvature)
        qv = torch.cat([qy, qy.new_zeros(1)]).numpy().astype("float32")
        return _scan(con, memory, q, k, now, bounds, where, params, filters, stats, "lor <-> %s", qv,
                     max(k * oversample, 16), lexical)
    # "+ 0": an expression no HNSW index on dirv can serve, so the exact order stays exact
    return _scan(con, memory, q, k, now, bounds, where, params, filters, stats, "(dirv <#> %s) + 0, seq",
                 q.numpy().astype("float32"), max(4 * k, 64), lexical)


def rank_by_bias(con, memory, k: int, now: float, where: str, params: list, filters=None) -> list[SearchResult]:
    """The ``k`` candidate rows of highest ``time_coef * log(w) + depth_bias * depth`` (distance 0;
    ties by insertion order), as ``Memory.search`` ranks a structural mode without a query."""
    rows = [dict(zip(COLUMNS, r)) for r in con.execute(f"SELECT {', '.join(COLUMNS)} FROM hypermem_memories{where}",
                                                          params)]
    if filters:
        pred = compile_filter(filters)
        rows = [r for r in rows if pred(r["meta"])]
    if not rows:
        return []
    rows.sort(key=lambda r: r["seq"])
    bias, w, depth = _bias(memory, rows, now)
    order = torch.argsort(-bias, stable=True)[:k].tolist()
    return [SearchResult(record=record_of(rows[i]), score=float(bias[i]), distance=0.0, time_weight=float(w[i]),
                         depth=float(depth[i])) for i in order]


def monotone_policy(policy: Any) -> bool:
    """Whether ``policy``'s weight never decreases with a later ``t``, more accesses or a
    wider validity window (the built-in policies and their products)."""
    from ...temporal import Ebbinghaus, HalfLife, NoDecay, Product, ValidityWindow

    if isinstance(policy, Product):
        return all(monotone_policy(p) for p in policy.policies)
    return type(policy) in (NoDecay, HalfLife, Ebbinghaus, ValidityWindow)


def bias_bound(memory, lo: float, hi: float, t_max: datetime, acc_max: int, now: float) -> float:
    """Upper bound on ``time_coef * log(w) + depth_bias * depth`` of every row with depths in
    ``[lo, hi]``, times up to ``t_max`` and at most ``acc_max`` accesses (module docstring)."""
    bound = memory.depth_bias * (hi if memory.depth_bias > 0 else lo)
    if memory.time_coef < 0:
        return bound + memory.time_coef * math.log(MIN_WEIGHT)
    if memory.time_coef > 0 and monotone_policy(memory.decay):
        f64 = {"dtype": torch.float64}
        w = policy_weights(memory.decay, now, torch.tensor([to_seconds(t_max)], **f64),
                           torch.tensor([float(acc_max)], **f64))
        bound += memory.time_coef * math.log(max(float(w[0]), MIN_WEIGHT))
    return bound


def _scan(con, memory, q, k, now, bounds, where, params, filters, stats, order, order_arg, size, lexical=None):
    """Read rows in the order ``order`` in growing batches until the bound of the module
    docstring is below the k-th exact score (or every row is read).  The rows with a
    lexical term are read first, so the rows left unread have none: the bound holds."""
    lo, hi, t_max, acc_max = bounds
    bound_bias = bias_bound(memory, lo, hi, t_max, acc_max, now)
    g = ShellDistance(memory.curvature, memory.base_depth)
    eps = float32_cosine_error(memory.dim)
    q32 = q.numpy().astype("float32")
    rows: list[dict] = []
    out: list[SearchResult] = []
    cols = ", ".join(COLUMNS)
    if lexical:
        rows = [dict(zip(COLUMNS, r)) for r in con.execute(f"SELECT {cols} FROM hypermem_memories WHERE id = ANY(%s)",
                                                              (list(lexical),))]
    seen = {r["id"] for r in rows}
    with con.cursor(name="hypermem_scan") as cur:  # narrow rows: a sort stays in memory
        cur.execute(f"SELECT id, (dirv <#> %s) FROM hypermem_memories{where} ORDER BY {order}",
                    (q32, *params, order_arg))
        while True:
            batch = cur.fetchmany(size)
            if batch:
                new = [b[0] for b in batch if b[0] not in seen]
                full = con.execute(f"SELECT {cols} FROM hypermem_memories WHERE id = ANY(%s)", (new,))
                rows.extend(dict(zip(COLUMNS, r)) for r in full)
                seen.update(new)
            out, kth = _top(memory, q, rows, k, now, filters, lexical)
            if len(batch) < size:
                break  # every row read
            s_front = min(1.0, max(-float(b[1]) for b in batch[-max(1, len(batch) // 8):]) + eps)
            bound = -float(g(torch.tensor([s_front], dtype=torch.float64))[0]) + bound_bias
            if bound < kth:
                break  # no unread row can beat the k-th score (certified in the exact order)
            size *= 2
    if stats is not None:
        stats["rows_read"] = len(rows)
    return out
