"""Defects found walking the episodic memory from an installed wheel: the seed API's
argument-free ``forget()``, wrong-type inputs, saving into a read-only folder or over a
file of another kind, and hand-edited files."""

import os
import sqlite3
import warnings

import episodic_helpers
import pytest
from episodic_helpers import T0  # noqa: F401  (the clock fixture starts there)

import hypermem
from hypermem.episodic import MemoryStorage
from hypermem.store.persistence import MemoryFileError

storage = episodic_helpers.storage


# ---------------------------------------------------------------------- 1. forget() as in the seed


def test_forget_without_arguments_uses_half_the_importance_threshold(storage, clock):
    old_low = storage.instantiate("((old low) ** E1)", importance=0.4)   # combined (0 + .4)/2 = .2 < .25
    old_high = storage.instantiate("((old high) ** E2)", importance=0.6)  # (0 + .6)/2 = .3
    clock.tick(hours=2)
    new_low = storage.instantiate("((new low) ** E3)", importance=0.0)   # (1 + 0)/2 = .5
    assert storage.importance_threshold == 0.5
    assert storage.forget() == [old_low]
    assert list(storage) == [old_high, new_low]
    assert storage.forget(max_size=1) == [old_high]  # the keywords still work


def test_forget_without_arguments_keeps_everything_at_threshold_zero(clock):
    s = MemoryStorage(importance_threshold=0.0, clock=clock)
    s.instantiate("((a p) ** E1)", importance=0.0)
    clock.tick(hours=1)
    s.instantiate("((b p) ** E2)", importance=0.0)
    assert s.forget() == [] and len(s) == 2


# ---------------------------------------------------------------------- 2. wrong-type inputs


@pytest.mark.parametrize("event, got", [({"a": 1}, "dict"), (b"((a b.p) ** E1)", "bytes"), (5, "int")])
def test_instantiate_names_the_argument_and_the_type(storage, event, got):
    with pytest.raises(TypeError, match=rf"instantiate\(event=\.\.\.\) takes .* got {got}"):
        storage.instantiate(event)
    assert len(storage) == 0


def test_instantiate_names_a_bad_list_item(storage):
    with pytest.raises(TypeError, match=r"event #1 must be an Eventuality or its text \(str\), got bytes"):
        storage.instantiate(["((a b.p) ** E1)", b"((c d.p) ** E2)"])
    assert len(storage) == 0


@pytest.mark.parametrize("query", [5, b"blocks", ["blocks"]])
def test_retrieve_query_of_the_wrong_type_is_a_type_error(storage, query):
    storage.instantiate("((a p) ** E1)", importance=0.9)
    with pytest.raises(TypeError, match="query must be a string or None, got"):
        storage.retrieve(query=query)
    with pytest.raises(TypeError, match="query must be a string or None"):
        storage.scores(query)


# ---------------------------------------------------------------------- 3. a read-only folder


def test_save_into_a_read_only_folder_names_the_target(storage, tmp_path, monkeypatch):
    import errno
    import tempfile

    def read_only(prefix="", suffix="", dir=None):
        raise OSError(errno.EROFS, "Read-only file system", os.path.join(dir, f"{prefix}ptuvzx_a{suffix}"))

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    target = str(tmp_path / "x.db")
    with pytest.raises(OSError, match=r"cannot write .*x\.db': the folder .* is not writable") as info:
        storage.save(target)
    assert info.value.errno == errno.EROFS and ".tmp" not in str(info.value)
    from hypermem import Memory  # the one atomic writer: the store's save says the same

    with pytest.raises(OSError, match=r"cannot write .*y\.db': the folder .* is not writable"):
        Memory().save(str(tmp_path / "y.db"))


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into a read-only folder")
def test_save_into_a_folder_without_write_permission(storage, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=r"x\.db'.*is not writable"):
            storage.save(folder / "x.db")
    finally:
        folder.chmod(0o755)


# ---------------------------------------------------------------------- 4. a file of the other kind


def test_save_refuses_to_replace_a_memory_store(storage, tmp_path):
    path = tmp_path / "store.db"
    hypermem.Memory().save(path)
    storage.instantiate("((a p) ** E1)")
    with pytest.raises(FileExistsError, match=r"store\.db' is a memory store file of hypermem\.Memory\.save"):
        storage.save(path)
    assert len(hypermem.Memory.load(path)) == 0  # untouched
    storage.save(path, overwrite=True)
    assert len(MemoryStorage.load(path)) == 1
    storage.save(path)  # an episodic file is replaced freely, as Memory.save replaces its own


def test_save_refuses_another_sqlite_database(storage, tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(FileExistsError, match=r"SQLite database with the tables \['users'\]"):
        storage.save(path)
    (tmp_path / "notes.db").write_text("not sqlite")
    storage.save(tmp_path / "notes.db")  # not a database: replaced, as Memory.save does


def test_load_of_a_memory_store_points_to_memory_load(tmp_path):
    path = tmp_path / "store.db"
    hypermem.Memory().save(path)
    with pytest.raises(MemoryFileError, match=r"is a memory store file .*use hypermem\.Memory\.load"):
        MemoryStorage.load(path)


# ---------------------------------------------------------------------- 5. hand-edited files


def _edit(path, sql, *args):
    con = sqlite3.connect(path)
    con.execute(sql, args)
    con.commit()
    con.close()


@pytest.fixture
def saved(storage, tmp_path):
    storage.instantiate("((a p) ** E1)", importance=0.7)
    path = tmp_path / "day.db"
    storage.save(path)
    return path


def test_load_refuses_episodes_that_contradict_event_ep(saved):
    _edit(saved, "UPDATE memories SET episodes = ? WHERE event_ep = 'E1'", '["E5"]')
    with pytest.raises(MemoryFileError, match=r"memory 0 has the episode \(event_ep\) 'E1' but its episode "
                                              r"list \(episodes\) .*E5.* does not start with it"):
        MemoryStorage.load(saved)


def test_load_refuses_a_missing_config_row(saved):
    _edit(saved, "DELETE FROM config WHERE key = 'embedder'")
    with pytest.raises(MemoryFileError, match=r"the config table lacks \['embedder'\]"):
        MemoryStorage.load(saved)


@pytest.mark.parametrize("spec, message", [
    ('{"type": "openai"}', r"bad embedder spec dim None: .* \(in the spec of the embedder type 'openai'\)"),
    ('{"dim": 32}', r"the embedder spec has no type \(type None\)"),
])
def test_load_names_the_embedder_type_of_a_bad_spec(saved, spec, message):
    _edit(saved, "UPDATE config SET value = ? WHERE key = 'embedder'", spec)
    with pytest.raises(MemoryFileError, match=message):
        MemoryStorage.load(saved)


def test_remove_episode_rewrites_the_event_and_the_file_loads(storage, tmp_path):
    m = storage.instantiate(["((^you reply-to.v E1) ** E3)", "((^you reply-to.v E1) ** E4)"])[0]
    storage.remove_episode("E3")
    assert m.episodes == ["E4"] and m.get_ep() == "E4" and m.event.ep == "E4"
    storage.save(tmp_path / "day.db")
    (back,) = MemoryStorage.load(tmp_path / "day.db")
    assert back.event == m.event and back.episodes == ["E4"]


# ---------------------------------------------------------------------- default importance below the threshold

def test_instantiate_warns_when_the_memory_is_below_the_retrieval_threshold(clock):
    """The seed's defaults (importance 0.25, threshold 0.5) store a memory that retrieve() never
    returns: an agent replaying a conversation got [] for every query with no word."""
    s = MemoryStorage(embedder=hypermem.HashingEmbedder(), clock=clock)
    with pytest.warns(UserWarning, match=r"importance 0.25, below .*importance_threshold 0.5") as got:
        s.instantiate('((Caroline say.v "I went to a support group") ** S1)')
    assert got[0].filename == __file__  # the user's line, not hypermem's
    assert s.retrieve("support group", n=3) == []  # the seed's rule stands; the warning explains it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.instantiate('((Melanie say.v "I painted a sunrise") ** S1)', importance=0.8)
    assert [m.importance for m in s.retrieve("sunrise", n=3)] == [0.8]
