"""Walk 73 (awkward paths): a store name that begins with ``file:``, paths too long for SQLite,
file names near ``NAME_MAX`` and JSON file names that start like JSON."""

from __future__ import annotations

import errno
import os

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store import backup
from hypermem.store.atomic import temp_prefix
from hypermem.store.backends.durable import StorageError
from hypermem.store.sqlite_paths import SQLITE_PATH_LIMIT
from hypermem.store.validation import MemoryFileError

EMB = HashingEmbedder(dim=16)
needs_posix = pytest.mark.skipif(os.name == "nt", reason="SQLite's Unix VFS limit; file names with ':'")


def _memory() -> Memory:
    m = Memory(embedder=EMB)
    m.add("hello", id="h")
    return m


@needs_posix
def test_a_name_beginning_file_colon_is_that_file_in_every_call(tmp_path, monkeypatch):
    """SQLite (built with USE_URI) read "file:notes.db" as a URI: open wrote notes.db, read_only
    and backup looked for the literal name, "?mode=memory" kept nothing."""
    monkeypatch.chdir(tmp_path)
    with Memory.open("file:notes.db", embedder=EMB) as m:
        m.add("hello", id="h")
    assert os.path.isfile("file:notes.db") and not os.path.exists("notes.db")
    with Memory.open("file:notes.db", read_only=True, embedder=EMB) as m:
        assert len(m) == 1
    backup("file:notes.db", "file:bk.db")
    with Memory.open("file:bk.db", read_only=True, embedder=EMB) as m:
        assert m.ids == ["h"]
    for name in ("file:mem.db?mode=memory", "q?#%41.db"):
        with Memory.open(name, embedder=EMB) as m:
            m.add("kept", id="k")
        with Memory.open(name, read_only=True, embedder=EMB) as m:
            assert len(m) == 1
        assert os.path.isfile(name)
    _memory().save("file:snap.db")
    assert len(Memory.load("file:snap.db", embedder=EMB)) == 1
    with pytest.raises(StorageError, match="not a durable memory database"):  # the snapshot, not a new file
        Memory.open("file:snap.db", embedder=EMB)
    assert not any(os.path.exists(n) for n in ("notes.db", "bk.db", "mem.db", "snap.db", "q"))


def _deep(base, size: int) -> str:
    """A path of ``size`` bytes (absolute, no symlinks) under ``base``: folders of up to 200 bytes."""
    head = os.path.realpath(base)
    left = size - len(os.fsencode(head)) - 1
    parts = []
    while left > 0:
        take = min(left, 200)
        if 0 < left - take - 1 < 5:   # keep the last part (the file name) a few bytes long
            take -= 5
        parts.append("d" * take)
        left -= take + 1
    path = os.path.join(head, *parts)
    assert len(os.fsencode(path)) == size
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


@needs_posix
def test_sqlite_path_limit_is_the_one_sqlite_opens(tmp_path):
    """The limit checked is SQLite's own: a store at exactly SQLITE_PATH_LIMIT bytes opens and
    writes, one byte more is refused up front (it was "unable to open database file")."""
    fits = _deep(tmp_path, SQLITE_PATH_LIMIT)
    with Memory.open(fits, embedder=EMB) as m:
        m.add("x", id="x")
    with Memory.open(fits, read_only=True, embedder=EMB) as m:
        assert len(m) == 1
    over = _deep(tmp_path / "o", SQLITE_PATH_LIMIT + 1)
    for read_only in (False, True):
        if read_only:
            open(over, "wb").close()
        with pytest.raises(StorageError, match=f"longer than {SQLITE_PATH_LIMIT} bytes \\(this one is "
                                               f"{SQLITE_PATH_LIMIT + 1}"):
            Memory.open(over, read_only=read_only, embedder=EMB)


@needs_posix
def test_save_load_and_backup_say_the_path_is_too_long(tmp_path):
    """save was PermissionError [Errno 13], load "cannot be opened", open "unable to open"."""
    m = _memory()
    short = tmp_path / "m.db"
    m.save(short)
    deep = _deep(tmp_path / "deep", 560)
    with pytest.raises(OSError, match="longer than 504 bytes \\(this one is 560") as info:
        m.save(deep)
    assert info.value.errno == errno.ENAMETOOLONG and not os.path.exists(deep)
    assert os.listdir(os.path.dirname(deep)) == []
    os.replace(short, deep)   # a file moved into a deep folder
    with pytest.raises(MemoryFileError, match="longer than 504 bytes \\(this one is 560"):
        Memory.load(deep, embedder=EMB)
    link = tmp_path / "link"
    link.symlink_to(os.path.dirname(deep))   # SQLite follows the link: no way round
    with pytest.raises(MemoryFileError, match="a symlink to it does not help"):
        Memory.load(link / os.path.basename(deep), embedder=EMB)
    store = tmp_path / "s.db"
    with Memory.open(store, embedder=EMB) as s:
        s.add("y", id="y")
    with pytest.raises(OSError, match="longer than 504") as info:
        backup(store, deep + "2")
    assert info.value.errno == errno.ENAMETOOLONG
    # a short name in a folder that just fits: its temporary file's longer path is the one refused
    edge = _deep(tmp_path / "edge", SQLITE_PATH_LIMIT)
    with pytest.raises(OSError, match="temporary file") as info:
        m.save(edge)
    assert info.value.errno == errno.ENAMETOOLONG and os.listdir(os.path.dirname(edge)) == []


def test_a_name_near_name_max_is_written(tmp_path, monkeypatch):
    """".<name>.XXXXXXXX.tmp" of a 242..255-byte name exceeded NAME_MAX: save, to_json and
    inspect refused a name the folder accepts."""
    monkeypatch.chdir(tmp_path)
    stem = "会议纪要" * 20   # 240 bytes
    m = _memory()
    m.save(stem + ".db")
    m.to_json(stem + ".json")
    m.inspect(stem + ".html")
    assert len(Memory.load(stem + ".db", embedder=EMB)) == 1
    assert len(Memory.from_json(stem + ".json", embedder=EMB)) == 1
    assert sorted(os.listdir()) == sorted(stem + ext for ext in (".db", ".json", ".html"))


def test_temp_prefix_keeps_a_recognisable_whole_character_stem():
    assert temp_prefix("notes.db") == ".notes.db."
    for name in ("会" * 100, "a" + "会" * 100, "ab" + "会" * 100, "x" * 300):
        prefix = temp_prefix(name)
        assert name.startswith(prefix[1:-1]) and 97 <= len(prefix[1:-1].encode()) <= 100


def test_from_json_reads_a_file_whose_name_starts_like_json(tmp_path, monkeypatch):
    """A str naming an existing file was parsed as JSON text when it began with "[" or "{"."""
    monkeypatch.chdir(tmp_path)
    m = _memory()
    for name in ("[draft] notes.json", "{2024} mem.json", " [x].json"):
        m.to_json(name)
        assert Memory.from_json(name, embedder=EMB).ids == ["h"]
    with pytest.raises(MemoryFileError, match=r"the JSON text \(no file of that name either\)"):
        Memory.from_json("[final] notes.json", embedder=EMB)
    text = m.to_json()
    assert Memory.from_json(text, embedder=EMB).ids == ["h"]
    with pytest.raises(MemoryFileError) as info:   # a document's own errors name no file
        Memory.from_json('{"format": 1}', embedder=EMB)
    assert "no file of that name" not in str(info.value)
