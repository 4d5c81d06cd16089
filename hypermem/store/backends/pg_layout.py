"""The layouts of a PostgreSQL store (:mod:`.layouts`): the change stamps' indexes and tables,
and the one-way upgrades a writable open runs (:func:`upgrade`)."""

from __future__ import annotations

from .layouts import FLOOR_LAYOUT, STAMPS_LAYOUT, raise_floor, warn_upgraded

__all__ = ["STAMPS", "upgrade"]

STAMPS = ("CREATE INDEX IF NOT EXISTS hypermem_memories_changed ON hypermem_memories (changed_at)",
          # partial: a new row (touched_at 0) costs the ingest no entry; the refresh's query
          # repeats the predicate (changes.issue_changes), so the planner can read by it
          "CREATE INDEX IF NOT EXISTS hypermem_memories_touched ON hypermem_memories (touched_at) WHERE touched_at > 0",
          "CREATE TABLE IF NOT EXISTS hypermem_removed (version bigint NOT NULL, ids text[] NOT NULL)",
          "CREATE INDEX IF NOT EXISTS hypermem_removed_version ON hypermem_removed (version)")
"""The change stamps' indexes and the removal log (a new store's and the upgrade's)."""
_TO_2 = ("ALTER TABLE hypermem_memories ADD COLUMN IF NOT EXISTS changed_at bigint NOT NULL DEFAULT 0",
         "ALTER TABLE hypermem_memories ADD COLUMN IF NOT EXISTS touched_at bigint NOT NULL DEFAULT 0",
         *STAMPS,
         # the version of the last stamped write (.layouts: layout-1 writers still open do not stamp)
         "INSERT INTO hypermem_state SELECT 'stamped', value FROM hypermem_state WHERE key = 'version' "
         "ON CONFLICT (key) DO NOTHING",
         f"UPDATE hypermem_config SET value = '{STAMPS_LAYOUT}'::jsonb WHERE key = 'layout'")
_FLOOR = "SELECT value FROM hypermem_state WHERE key = 'removed_floor'"


def upgrade(con, layout: int, where: str) -> int:
    """A writable open's upgrade of a store of ``layout`` (read by ``config``): 1 -> 2 (the change
    stamps, the removal log, ``stamped``), and 2 with a ``removed_floor`` (pruned by a version
    before layout 3) -> 3; one transaction under an exclusive lock of the config table, the
    layout read again under it; warns once when it upgraded.  Returns the layout now."""
    if layout == STAMPS_LAYOUT:
        floor = con.execute(_FLOOR).fetchone()
        con.rollback()
        if floor is None:
            return layout  # the common case: nothing to do, no lock taken
    try:
        con.execute("LOCK TABLE hypermem_config IN EXCLUSIVE MODE")
        was = now = int(con.execute("SELECT value FROM hypermem_config WHERE key = 'layout'").fetchone()[0])
        if now == 1:
            for sql in _TO_2:
                con.execute(sql)
            now = STAMPS_LAYOUT
        floor = con.execute(_FLOOR).fetchone()
        if now == STAMPS_LAYOUT and floor is not None:
            raise_floor(con, "hypermem", "%s", int(floor[0]))
            now = FLOOR_LAYOUT
        con.commit()
    except BaseException:
        con.rollback()
        raise
    if now != was:
        warn_upgraded(where, was, now, "opened for writing by this version")
    return now
