r"""The lexical term of a hybrid search run by PostgreSQL: its own full-text search.

In process the hybrid term is ``hybrid * bm25 / max bm25`` (:mod:`hypermem.store.lexical`);
the server has no BM25, so it uses PostgreSQL's ``ts_rank_cd`` (cover density ranking,
Clarke, Cormack & Tudhope 2000) of ``to_tsvector('simple', text)`` against
``plainto_tsquery('simple', query)``, divided by the best rank over the whole store: the same
shape, ``[0, hybrid]`` distance units, another lexical score (rankings can differ from the
in-process search's).  :func:`lexical_terms` returns the term of every candidate row that
holds a query word; the certified scan reads those rows first, so the rows it has not read
have no lexical term and its stopping bound stays what it was (:mod:`.pg_search`).
"""

from __future__ import annotations

_M = "hypermem_memories"
_TSV = "to_tsvector('simple', text)"
_TSQ = "plainto_tsquery('simple', %s)"


def lexical_terms(con, query: str, weight: float, where: str, params: list) -> dict[str, float]:
    """``{id: weight * rank / max rank}`` of the candidate rows (``where``) matching ``query``."""
    best = con.execute(f"SELECT max(ts_rank_cd({_TSV}, {_TSQ})) FROM {_M} WHERE {_TSV} @@ {_TSQ}",
                       (query, query)).fetchone()[0]
    if not best or best <= 0:
        return {}
    join = " AND " if where else " WHERE "
    rows = con.execute(f"SELECT id, ts_rank_cd({_TSV}, {_TSQ}) FROM {_M}{where}{join}{_TSV} @@ {_TSQ}",
                       (query, *params, query)).fetchall()
    return {i: weight * float(r) / float(best) for i, r in rows}
