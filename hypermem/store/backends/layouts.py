r"""The layouts of a durable store (SQLite file, PostgreSQL schema) and their one-way upgrades.

The ``layout`` key of the config table says what the tables hold:

* **1**: the memories, the settings and the ``version`` counter; another process's write is
  seen by re-reading the whole store;
* **2**: adds the change stamps (``changed_at`` / ``touched_at``) and the removal log of
  :mod:`.changes`: a refresh reads only what changed.  A store upgraded from layout 1 also
  keeps ``stamped`` in the state table, the version of the last write that stamped its rows
  (see below);
* **3**: adds ``removed_floor`` to the state table: the version below which a client must
  re-read the store whole (the removal log was pruned, or a writer that does not stamp its
  rows wrote).  A version that reads only layouts 1 and 2 would not know the floor and would
  keep deleted memories, so the store takes layout 3 in the write transaction that first sets
  the floor (:func:`raise_floor`), or when a writer of this version opens a layout-2 store that
  has one already.

A store is created at layout 2 (older versions that read layout 2 can open it until the floor is
first needed); a writable open upgrades a layout-1 store to 2, in one transaction; nothing ever
goes back.  An upgrade warns once (:func:`warn_upgraded`): versions that read only the older
layouts can no longer open the store.  A process of an older version that has the store open
already is not stopped by the upgrade: stop the older version's processes before a newer one
writes (rolling upgrades across a layout change are not supported, ``docs/storage.md``).

**Writers that do not stamp.**  A layout-1 process that opened the store before it was upgraded
goes on writing rows without stamps (``changed_at`` 0, no removal log entry) and raising
``version``.  Every writer of this version raises ``stamped`` with ``version`` (one statement),
so ``stamped != version`` says some write since the last stamped one did not stamp: a client
then re-reads the store whole (:func:`behind`), and the next writer of this version records the
version it found as the floor (:func:`raise_floor`), so that clients further behind re-read too.
In the normal case this costs no query: the state table's rows are read in the query that
read the version already.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..caller_warning import warn_caller
from .storage_errors import StorageError

__all__ = ["FLOOR_LAYOUT", "LAYOUTS", "STAMPS_LAYOUT", "behind", "check_layout", "raise_floor", "unstamped",
           "warn_upgraded"]

STAMPS_LAYOUT = 2
"""The layout with change stamps and the removal log; a new store is created at it."""
FLOOR_LAYOUT = 3
"""The layout whose state table may hold ``removed_floor``."""
LAYOUTS = (1, STAMPS_LAYOUT, FLOOR_LAYOUT)
"""The layouts this version opens."""
_READ_BY = {1: "every hypermem version", 2: "versions that read only layout 1",
            3: "versions that read only layouts 1 and 2"}


def check_layout(cfg: Mapping[str, Any], where: str) -> int:
    """The layout of a stored config; a :class:`StorageError` naming it when this version
    cannot read it (a store written by a newer hypermem)."""
    layout = cfg.get("layout")
    if layout not in LAYOUTS:
        raise StorageError(f"{where} has storage layout {layout!r}; this hypermem reads "
                           f"{', '.join(map(str, LAYOUTS[:-1]))} and {LAYOUTS[-1]} (it was written by a newer "
                           f"hypermem: upgrade hypermem to open it)")
    return int(layout)


def warn_upgraded(where: str, old: int, new: int, why: str) -> None:
    """The one warning of an in-place upgrade from layout ``old`` to ``new``."""
    warn_caller(f"{where} was upgraded in place from storage layout {old} to {new} ({why}); the upgrade is "
                f"one-way: hypermem {_READ_BY[new]} can no longer open it, and processes of an older "
                f"version that still have it open must be stopped (docs/storage.md)")


def behind(version: int, state: Mapping[str, int]) -> bool:
    """Whether a client that last read ``version`` must re-read the store whole, from the
    state table's rows ``state`` (key -> value): ``version`` is below ``removed_floor``, or a
    write since the last stamped one did not stamp its rows (``stamped != version``)."""
    if version < int(state.get("removed_floor", 0)):
        return True
    stamped = state.get("stamped")
    return stamped is not None and int(stamped) != int(state["version"])


def unstamped(stamped: int | None, version: int) -> bool:
    """Inside a write transaction that found ``version`` committed and ``stamped`` (None: the
    store keeps none): whether a write since the last stamped one did not stamp its rows."""
    return stamped is not None and int(stamped) != version


def raise_floor(con, prefix: str, mark: str, floor: int) -> bool:
    """Inside the caller's write transaction: ``removed_floor`` raised to ``floor`` (never
    lowered) and the store taken to layout 3 (:data:`FLOOR_LAYOUT`) when it was not there.
    Returns whether the layout changed (the caller warns: :func:`warn_upgraded`)."""
    con.execute(f"INSERT INTO {prefix}_state VALUES ('removed_floor', {mark}) ON CONFLICT (key) DO UPDATE SET "
                f"value = CASE WHEN excluded.value > {prefix}_state.value THEN excluded.value "
                f"ELSE {prefix}_state.value END", (floor,))
    cur = con.execute(f"UPDATE {prefix}_config SET value = '{FLOOR_LAYOUT}' WHERE key = 'layout' AND "
                      f"value <> '{FLOOR_LAYOUT}'")
    return cur.rowcount > 0
