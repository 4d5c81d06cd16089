"""The HNSW index of a PostgreSQL store (:meth:`.postgres.PostgresStorage.build_ann_index`), named
in the store's own schema: several stores in one database (one a schema, with ``public`` on
every search path for pgvector) never drop or read each other's index."""

from __future__ import annotations

from psycopg import sql

ANN_OPS = {"lor": "vector_l2_ops", "dirv": "vector_ip_ops"}
"""The columns an HNSW index may cover, with their operator classes (:meth:`PostgresStorage.build_ann_index`)."""


def build_hnsw(con, on: str, m: int, ef_construction: int, maintenance_work_mem: str | None,
               workers: int | None) -> None:
    """Drop the store's HNSW index (either column) and create it on ``on``, in the open
    transaction, every name qualified by the store's schema (``current_schema()``)."""
    schema = con.execute("SELECT current_schema()").fetchone()[0]
    for col in ANN_OPS:
        con.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(schema, f"hypermem_memories_{col}")))
    if maintenance_work_mem is not None:
        con.execute("SELECT set_config('maintenance_work_mem', %s, true)", (str(maintenance_work_mem),))
    if workers is not None:
        con.execute(sql.SQL("SET LOCAL max_parallel_maintenance_workers = {}").format(sql.Literal(int(workers))))
    con.execute(sql.SQL("CREATE INDEX {} ON {} USING hnsw ({} {}) WITH (m = {}, ef_construction = {})").format(
        sql.Identifier(f"hypermem_memories_{on}"), sql.Identifier(schema, "hypermem_memories"), sql.Identifier(on),
        sql.SQL(ANN_OPS[on]), sql.Literal(int(m)), sql.Literal(int(ef_construction))))
