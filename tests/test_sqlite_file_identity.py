"""A SQLite store opened by a user who may not write it leaves nothing behind, and a store
whose file was removed or replaced under a running process refuses writes instead of
acknowledging them into an unlinked file."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends.durable import StorageError


def _shared_folder():
    folder = tempfile.mkdtemp(prefix="hm-shared-")
    os.chmod(folder, 0o777)  # anyone may create files here, as in the tester's shared folder
    return folder


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_a_store_this_user_may_not_write_is_refused_and_left_as_it_was(monkeypatch):
    folder = _shared_folder()
    path = os.path.join(folder, "s.db")
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add("the owner's note", id="a")
    mem.close()
    before = sorted(os.listdir(folder))
    os.chmod(path, 0o444)
    if os.geteuid() == 0:  # root may write any file: the permission check answers as for another user
        real = os.access
        monkeypatch.setattr("hypermem.store.backends.sqlite.os.access",
                            lambda f, mode: False if os.fspath(f) == path and mode == os.W_OK else real(f, mode))
    try:
        Memory.open(path)
    except StorageError as exc:
        said = f"refused: {exc}"
    else:
        said = "opened"
    monkeypatch.undo()
    os.chmod(path, 0o644)
    assert said.startswith("refused:") and "may not write" in said and "read_only=True" in said, said
    assert sorted(os.listdir(folder)) == before  # no -wal / -shm of another user that would lock the owner out
    owner = Memory.open(path, embedder=HashingEmbedder(dim=16))
    owner.add("still writable by its owner", id="b")
    assert owner.ids == ["a", "b"]
    owner.close()
    shutil.rmtree(folder)


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_writes_after_the_file_was_removed_or_replaced_are_refused(tmp_path, how):
    path = tmp_path / "g.db"
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add("first", id="a")
    for f in tmp_path.iterdir():
        f.unlink()
    if how == "replaced":
        other = Memory.open(path, embedder=HashingEmbedder(dim=16))
        other.add("another store's note", id="z")
        other.close()
    with pytest.raises(StorageError, match="removed or replaced since this process opened it"):
        mem.add("second", id="b")
    mem.close()
    if how == "replaced":
        assert Memory.open(path, embedder=HashingEmbedder(dim=16)).ids == ["z"]  # the new file untouched
    else:
        assert not path.exists()
