"""A walk of the installed wheel as a long-lived agent's durable SQLite store: a ``decay=`` on
reopen that was accepted for one session only, ``import --durable`` resetting access counts,
a dict filter on a record field (or ``select``) finding nothing without a useful word, the
``add_many`` hint crediting embedder batching only, and a future-dated memory that the default
search finds where ``at_time=clock()`` does not."""

from __future__ import annotations

import warnings
from datetime import datetime, timedelta, timezone

import pytest
from test_cli_walk_outputs import run

from hypermem import CallableEmbedder, HashingEmbedder, Memory
from hypermem.integrations.snapshots import durable_copy
from hypermem.store.add_hint import AddManyHint, OneByOne
from hypermem.store.filters import RecordFilter
from hypermem.temporal import Ebbinghaus, HalfLife, Product

pytestmark = pytest.mark.usefixtures("one_thread")
NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


class Flat:
    """A custom decay policy (not built in): weight 1 always."""

    def weight(self, age_hours, access_count=None):
        return age_hours * 0 + 1


def _store(target, **kwargs):
    mem = Memory.open(target, embedder=HashingEmbedder(dim=32), clock=lambda: NOW, **kwargs)
    mem.add("the user prefers tea", id="tea")
    mem.close()


def test_a_different_decay_on_reopen_is_refused_naming_both(tmp_path, capsys):
    path = tmp_path / "c.db"
    _store(path, decay=HalfLife(hours=168))
    with pytest.raises(ValueError, match=r"was created with decay=HalfLife\(hours=168\.0\); cannot open it with "
                                         r"decay=HalfLife\(hours=24\.0\).*without decay=.*docs/storage\.md"):
        Memory.open(path, decay=HalfLife(hours=24))
    with pytest.raises(ValueError, match="was created with decay=HalfLife"):
        Memory.open(path, decay=Product(HalfLife(hours=168), Ebbinghaus()))
    with Memory.open(path, decay=HalfLife(hours=168)) as mem:     # the stored policy again: accepted
        assert mem.decay == HalfLife(hours=168)
    code, out, _ = run(capsys, "stats", path)
    assert code == 0 and "168" in out                                # the CLI ranks with the same one


def test_a_custom_decay_must_be_passed_again_and_another_is_refused(tmp_path):
    path = tmp_path / "custom.db"
    _store(path, decay=Flat())
    with Memory.open(path, decay=Flat()) as mem:
        assert isinstance(mem.decay, Flat)
    with pytest.raises(ValueError, match=r"was created with decay=<a custom policy 'Flat'>; cannot open it with "
                                         r"decay=HalfLife"):
        Memory.open(path, decay=HalfLife(hours=24))


def test_postgres_refuses_another_decay_too(pg_url):
    _store(pg_url, decay=HalfLife(hours=168))
    for mirror in (True, False):
        with pytest.raises(ValueError, match=r"was created with decay=HalfLife\(hours=168\.0\); cannot open it"):
            Memory.open(pg_url, decay=HalfLife(hours=24), mirror=mirror)
    Memory.open(pg_url, decay=HalfLife(hours=168), mirror=False).close()


def test_the_documented_way_to_change_the_decay_copies_the_store(tmp_path):
    """docs/storage.md, "Reopening a store, and changing a stored setting"."""
    path, new = tmp_path / "c.db", tmp_path / "c24.db"
    _store(path, decay=HalfLife(hours=168))
    with Memory.open(path, clock=lambda: NOW) as mem:
        mem.search("tea", k=1)
    src = Memory.open(path, read_only=True)
    src.decay = HalfLife(hours=24)
    durable_copy(src, new).close()
    src.close()
    with Memory.open(new) as mem:
        assert mem.decay == HalfLife(hours=24) and mem.get("tea").access_count == 1


def test_import_durable_keeps_access_counts_and_last_access(tmp_path, capsys):
    mem = Memory(embedder=HashingEmbedder(dim=32), clock=lambda: NOW)
    mem.add_many([{"text": "tea", "id": "tea"}, {"text": "coffee", "id": "coffee"}, {"text": "milk", "id": "milk"}])
    mem.search("tea", k=1)
    mem.clock = lambda: NOW + timedelta(hours=5)
    mem.touch(["tea", "coffee", "tea"])
    mem.to_json(tmp_path / "agent.json")
    mem.save(tmp_path / "snap.db")
    want = {r.id: (r.access_count, r.last_accessed) for r in mem}
    assert want["tea"] == (3, NOW + timedelta(hours=5)) and want["milk"] == (0, None)
    for source, out in (("agent.json", "dur.db"), ("snap.db", "dur2.db")):
        code, _, err = run(capsys, "import", tmp_path / source, tmp_path / out, "--durable")
        assert code == 0, err
        with Memory.open(tmp_path / out, read_only=True) as back:
            assert {r.id: (r.access_count, r.last_accessed) for r in back} == want
    with Memory.open(tmp_path / "dur.db") as back:      # later touches add to the carried counts
        back.touch(["milk"])
    with Memory.open(tmp_path / "dur.db", read_only=True) as back:
        assert back.get("milk").access_count == 1 and back.get("tea").access_count == 3


def test_a_filter_on_a_record_field_warns_with_the_way_to_filter_it():
    mem = Memory(embedder=HashingEmbedder(dim=32), clock=lambda: NOW)
    mem.add("dentist in january", id="jan", t=datetime(2026, 1, 15, tzinfo=timezone.utc), meta={"kind": "visit"})
    with pytest.warns(UserWarning, match=r"metadata key 't'.*so the search found nothing: 't' is a field of the "
                                         r"record.*hypermem\.store\.filters\.RecordFilter.*callable"):
        assert mem.search("dentist", filters={"t": {"$lt": "2026-02-01"}}) == []
    hits = mem.search("dentist", filters=RecordFilter({"t": {"$lt": "2026-02-01"}}, fields={"t": "t"}))
    assert [r.id for r in hits] == ["jan"]                     # the way the warning names works
    with pytest.warns(UserWarning, match=r"'kindd'.*\(a misspelled key\?\)") as got:
        mem.search("dentist", filters={"kindd": "visit"})
    assert "field of the record" not in str(got[0].message)


def test_select_warns_as_search_does_once_per_key():
    mem = Memory(embedder=HashingEmbedder(dim=32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mem.select({"kindd": "pet"}) == [] and mem.search("dog", filters={"kindd": "pet"}) == []  # empty
    mem.add("a dog", id="d", meta={"kind": "pet"})
    with pytest.warns(UserWarning, match=r"no memory has the metadata key 'kindd'.*so select\(\) found nothing"):
        assert mem.select({"kindd": "pet"}) == []
    with pytest.warns(UserWarning, match=r"'text' is a field of the record.*callable"):
        assert mem.select({"text": "a dog"}) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mem.select({"kindd": "pet"}) == []              # once per store and key
        assert mem.select({"kind": "wild"}) == []              # a known key, no such value: no warning
        assert mem.select({"kind": "pet"}) == ["d"]


def test_the_add_many_hint_names_the_commits_on_a_durable_store_only(tmp_path):
    with Memory.open(tmp_path / "a.db", embedder=HashingEmbedder(dim=32)) as mem:
        mem.one_by_one.calls = mem.one_by_one.commit_calls = 3
        with pytest.warns(AddManyHint, match=r"one embedder call and one committed transaction each.*commits it "
                                             r"once.*durable store"):
            for n in range(4):          # due after the third, given at the start of the fourth
                mem.add(f"note {n}")
    mem = Memory(embedder=CallableEmbedder(HashingEmbedder(dim=32).embed, 32))   # one that batches: told in memory
    mem.one_by_one = OneByOne(calls=3)
    with pytest.warns(AddManyHint) as got:
        for n in range(4):
            mem.add(f"note {n}")
    text = str(got[0].message)
    assert "(one embedder call each)" in text and "commit" not in text


def test_the_default_search_finds_a_future_reminder_that_at_time_now_leaves_out():
    """Behaviour kept (reminders stay findable) and documented in ``Memory.search``."""
    mem = Memory(embedder=HashingEmbedder(dim=32), decay=HalfLife(hours=24), clock=lambda: NOW)
    mem.add("dentist appointment", id="soon", t=NOW + timedelta(days=3))
    assert [r.id for r in mem.search("dentist")] == ["soon"]
    assert float(mem.time_weights(["soon"])[0]) == 1.0
    assert mem.search("dentist", at_time=mem.clock()) == []
    assert "future-dated" in Memory.search.__doc__ and "at_time=mem.clock()" in Memory.search.__doc__
