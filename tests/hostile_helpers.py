"""Helpers of the hostile-input tests: crafted SQLite files and a record of a folder."""

import hashlib
import sqlite3
from pathlib import Path

import pytest
from hypothesis import strategies as st

from hypermem.store.validation import MemoryFileError


def deep_json(n: int, opener: str = "[", closer: str = "]") -> str:
    """A JSON value nested ``n`` arrays deep."""
    return opener * n + closer * n


def nested(n: int, leaf=0):
    """A Python list nested ``n`` deep around ``leaf`` (built iteratively)."""
    out = leaf
    for _ in range(n):
        out = [out]
    return out


def loosen(path: Path) -> None:
    """Rebuild every table of the SQLite file ``path`` without types or constraints, so
    that a test can write what a hostile file may hold (TEXT keys, NULLs, duplicates)."""
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for t in tables:
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
            con.execute(f"ALTER TABLE {t} RENAME TO old_{t}")
            con.execute(f"CREATE TABLE {t} ({', '.join(cols)})")
            con.execute(f"INSERT INTO {t} SELECT * FROM old_{t}")
            con.execute(f"DROP TABLE old_{t}")
        con.commit()
    finally:
        con.close()


def execute(path: Path, sql: str, *params) -> None:
    con = sqlite3.connect(path)
    try:
        con.execute(sql, params)
        con.commit()
    finally:
        con.close()


def folder_state(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` with the hash of its bytes (to show that nothing was written)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(folder).iterdir())}


def not_a(kind: str):
    """JSON values that are NOT of ``kind`` ("number", "bool", "str", "int"): what a
    hostile file puts in a field of that kind."""
    pool = {
        "number": st.one_of(st.text(max_size=5), st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
                            st.dictionaries(st.text(max_size=2), st.integers(), max_size=1)),
        "bool": st.one_of(st.sampled_from(["false", "true", "0", "1", ""]), st.integers(), st.none(),
                          st.floats(allow_nan=False, allow_infinity=False), st.lists(st.booleans(), max_size=1)),
        "str": st.one_of(st.integers(), st.booleans(), st.none(), st.lists(st.text(max_size=2), max_size=2)),
        "int": st.one_of(st.text(max_size=4), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False),
                         st.lists(st.integers(), max_size=2)),
    }
    return pool[kind]


def refused_without_a_trace(load, path: Path, match: str) -> None:
    """``load(path)`` is a MemoryFileError naming the file and matching ``match``, and the
    folder (names and bytes) is unchanged: a failed load writes nothing."""
    before = folder_state(path.parent)
    with pytest.raises(MemoryFileError, match=match) as info:
        load(path)
    assert str(path) in str(info.value)
    assert folder_state(path.parent) == before
