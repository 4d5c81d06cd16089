r"""The lexical term of a hybrid search run by PostgreSQL: its own full-text search.

In process the hybrid term is ``hybrid * bm25 / max bm25`` (:mod:`hypermem.store.lexical`);
the server has no BM25, so it uses PostgreSQL's ``ts_rank_cd`` (cover density ranking,
Clarke, Cormack & Tudhope 2000) of ``to_tsvector('english', text)`` against the query's words
joined by OR (``to_tsquery('english', 'w1 | w2 | ...')``: a row holding any of them matches, as
in BM25; the ``english`` configuration drops stopwords and stems with Snowball, as the
in-process tokeniser does with Porter), divided by the best rank over the whole store: the same
shape, ``[0, hybrid]`` distance units, another lexical score (rankings can differ from the
in-process search's, and the server adds no family or neighbour term).  :func:`lexical_terms` returns the term of every candidate row that
holds a query word; the certified scan reads those rows first, so the rows it has not read
have no lexical term and its stopping bound stays what it was (:mod:`.pg_search`).
"""

from __future__ import annotations

from ...retrieval.bm25 import words

_M = "hypermem_memories"
_TSV = "to_tsvector('english', text)"
_TSQ = "to_tsquery('english', %s)"


def or_query(query: str) -> str:
    """The ``to_tsquery`` text of ``query``: its words (``\\w+`` runs, so no operator) joined by ``|``."""
    return " | ".join(words(query))


def lexical_terms(con, query: str, weight: float, where: str, params: list) -> dict[str, float]:
    """``{id: weight * rank / max rank}`` of the candidate rows (``where``) matching ``query``."""
    query = or_query(query)
    if not query:
        return {}
    best = con.execute(f"SELECT max(ts_rank_cd({_TSV}, {_TSQ})) FROM {_M} WHERE {_TSV} @@ {_TSQ}",
                       (query, query)).fetchone()[0]
    if not best or best <= 0:
        return {}
    join = " AND " if where else " WHERE "
    rows = con.execute(f"SELECT id, ts_rank_cd({_TSV}, {_TSQ}) FROM {_M}{where}{join}{_TSV} @@ {_TSQ}",
                       (query, *params, query)).fetchall()
    return {i: weight * float(r) / float(best) for i, r in rows}
