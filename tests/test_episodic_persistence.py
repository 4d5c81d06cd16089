"""MemoryStorage.save / MemoryStorage.load: everything survives, bad files are clear errors."""

import sqlite3

import pytest
import torch
from episodic_helpers import T0, snapshot  # noqa: F401  (T0: the start of the clock fixture)
from persistence_helpers import foreign_sqlite

from hypermem import CallableEmbedder, HalfLife, HashingEmbedder
from hypermem.episodic import EpisodicMemory, Eventuality, MemoryStorage
from hypermem.store.persistence import MemoryFileError


def _day(clock, embedder=..., **kwargs):
    embedder = HashingEmbedder(dim=32) if embedder is ... else embedder
    s = MemoryStorage(embedder=embedder, importance_threshold=0.3, clock=clock,
                      telic_predicates={"reply-to.v", "say-to.v"}, **kwargs)
    s.instantiate("((Block1 between.p Block2 Block3) ** E1)", importance=0.8)
    clock.tick(minutes=5)
    s.instantiate("((^you reply-to.v E1) ** E3)", importance=0.4)
    s.instantiate("((^you reply-to.v E1) ** E4)", importance=0.6)  # merged
    s.instantiate(Eventuality(("Block1", "on.p", "Table"), "E5"), importance=0.5)
    clock.tick(minutes=5)
    s.instantiate(Eventuality(("not", ("Block1", "on.p", "Table")), "E6"), importance=0.7)  # ends E5's fact
    s.store(EpisodicMemory(Eventuality(("^me", "say-to.v", "^you", '"hello there"'), "E7"), telic=False),
            context=False)
    clock.tick(minutes=5)
    s.retrieve("blocks", n=2)
    return s


def test_round_trip_keeps_everything(tmp_path, clock):
    s = _day(clock)
    path = tmp_path / "episodic.db"
    s.save(path)
    t = MemoryStorage.load(path, clock=clock)
    assert snapshot(t) == snapshot(s)
    assert t.importance_threshold == 0.3 and t.telic_predicates == {"reply-to.v", "say-to.v"}
    assert t.embedder == s.embedder  # the hashing embedder is rebuilt from its spec
    for m, n in zip(s, t):
        assert torch.equal(t.point(n), s.point(m))
        assert n.clock is clock
    # both behave the same afterwards
    clock.tick(minutes=1)
    assert [t.key_of(m) for m in t.retrieve("Block1 on a table", n=3)] == \
        [s.key_of(m) for m in s.retrieve("Block1 on a table", n=3)]
    assert snapshot(t) == snapshot(s)
    # keys keep counting from where they were
    a = s.instantiate("((new p) ** E9)")
    b = t.instantiate("((new p) ** E9)")
    assert s.key_of(a) == t.key_of(b)


def test_round_trip_without_embedder_and_with_decay(tmp_path, clock):
    s = _day(clock, embedder=None, decay=HalfLife(hours=2.0))
    s.save(tmp_path / "e.db")
    t = MemoryStorage.load(tmp_path / "e.db", clock=clock)
    assert t.hyperbolic is None and t.decay == HalfLife(hours=2.0)
    assert snapshot(t) == snapshot(s)
    # an embedder given at load time embeds the formulas
    u = MemoryStorage.load(tmp_path / "e.db", embedder=HashingEmbedder(dim=16), clock=clock)
    assert len(u.hyperbolic) == len(s) and u.hyperbolic.get(u.key_of(next(iter(u)))).text == \
        "(Block1 between.p Block2 Block3)"


def test_save_replaces_the_old_file(tmp_path, clock):
    s = _day(clock)
    path = tmp_path / "e.db"
    s.save(path)
    s.remove_matching("between.p")
    s.save(path)
    assert len(MemoryStorage.load(path, clock=clock)) == len(s)
    assert [p.name for p in tmp_path.iterdir()] == ["e.db"]  # no temporary file left


def test_custom_embedder_must_be_passed_back(tmp_path, clock):
    emb = CallableEmbedder(lambda texts: [[1.0, float(len(t))] for t in texts], dim=2)
    s = _day(clock, embedder=emb)
    s.save(tmp_path / "e.db")
    with pytest.raises(ValueError, match="custom embedder"):
        MemoryStorage.load(tmp_path / "e.db")
    with pytest.raises(ValueError, match="dimension mismatch"):
        MemoryStorage.load(tmp_path / "e.db", embedder=HashingEmbedder(dim=16))
    t = MemoryStorage.load(tmp_path / "e.db", embedder=emb, clock=clock)
    assert snapshot(t) == snapshot(s)


def test_missing_and_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        MemoryStorage.load(tmp_path / "absent.db")
    assert not (tmp_path / "absent.db").exists()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(MemoryFileError):
        MemoryStorage.load(junk)
    other = foreign_sqlite(tmp_path / "other.db")
    with pytest.raises(MemoryFileError, match="not an episodic memory file"):
        MemoryStorage.load(other)


@pytest.mark.parametrize("column, value, message", [
    ("wff", "(Block1 between.p", "malformed"),
    ("episodes", "[]", "episode list"),
    ("importance", "high", "importance"),  # any finite number is an importance (the seed's score)
    ("importance", float("inf"), "importance"),
    ("start_time", "yesterday", "ISO 8601"),
    ("embedding", b"\x00" * 8, "bytes"),
])
def test_corrupt_fields_are_named(tmp_path, column, value, message, clock):
    _day(clock).save(tmp_path / "e.db")
    con = sqlite3.connect(tmp_path / "e.db")
    con.execute(f"UPDATE memories SET {column} = ? WHERE seq = 0", (value,))
    con.commit()
    con.close()
    with pytest.raises(MemoryFileError, match=message):
        MemoryStorage.load(tmp_path / "e.db")


def test_other_format_version_is_refused(tmp_path, clock):
    _day(clock).save(tmp_path / "e.db")
    con = sqlite3.connect(tmp_path / "e.db")
    con.execute("UPDATE config SET value = '2' WHERE key = 'format'")
    con.commit()
    con.close()
    with pytest.raises(MemoryFileError, match="format version 2"):
        MemoryStorage.load(tmp_path / "e.db")


def test_awkward_file_names(tmp_path, clock):
    s = _day(clock)
    path = tmp_path / "my day #1 ?50%.db"
    s.save(path)
    assert snapshot(MemoryStorage.load(path, clock=clock)) == snapshot(s)
