"""``Memory.select(filters)``, the ids a filter keeps without a search, and the listings built on it
(LlamaIndex ``get_nodes`` / ``delete_nodes``, LangGraph ``list_namespaces`` and its pages) give
exactly the row-by-row answers they replace, through writes and a SQLite reopen, and read no
record they do not return."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from test_meta_columns import _meta
from test_meta_columns import _spec as meta_filter
from test_record_filters import _langgraph_pair, _store, _time
from test_record_filters import _spec as record_filter

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C
from hypermem.store.filters import FilterError, RecordFilter, compile_filter
from hypermem.store.record_table import RecordTable


def _row_by_row(mem: Memory, spec) -> list[str]:
    if spec is None:
        return [r.id for r in mem]
    pred = spec if callable(spec) else compile_filter(spec)
    return [r.id for r in mem if pred(r if callable(spec) else r.meta)]


def _check_meta(mem: Memory, rng: random.Random, specs: int = 40) -> None:
    for _ in range(specs):
        spec = meta_filter(rng)
        assert mem.select(spec) == _row_by_row(mem, spec), spec


def test_select_is_the_row_by_row_answer_through_writes():
    rng = random.Random(0)
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": _meta(rng)} for i in range(120)])
    _check_meta(mem, rng)
    mem.add_many([{"text": f"n{i}", "id": f"n{i}", "meta": _meta(rng)} for i in range(30)])
    _check_meta(mem, rng)
    for i in rng.sample(range(150), 25):
        mem.update(mem.ids[i], meta=_meta(rng))
    _check_meta(mem, rng)
    mem.remove_many(rng.sample(mem.ids, 20))
    _check_meta(mem, rng)
    assert mem.select() == mem.select(None) == mem.ids
    pred = lambda r: r.meta.get("k") == "a" or r.id.startswith("n1")  # noqa: E731
    assert mem.select(pred) == _row_by_row(mem, pred) != []


@pytest.mark.parametrize("seed", range(3))
def test_select_answers_record_filters_as_the_record_predicate(seed):
    rng = random.Random(seed)
    mem = _store(rng)
    for step in range(3):
        for _ in range(40):
            spec = record_filter(rng)
            ids = None if rng.random() < 0.6 else {f"m{rng.randrange(70)}" for _ in range(8)}
            fast = RecordFilter(C.instants(spec), {k: k for k in C.STORE_KEYS}, ids)
            old = C.all_of(C.compile_filter(spec), None if ids is None else (lambda r, ids=ids: r.id in ids))
            assert mem.select(fast) == mem.select(old) == [r.id for r in mem if old(r)], spec
        live = mem.ids
        mem.update(live[3], valid_from=None, valid_until=_time(rng), meta={"kind": "b"})
        mem.link(live[5], live[1])
        mem.remove(live[2], cascade=True)
        mem.add(f"late {step}", id=f"late{step}", parent=live[1], t=_time(rng))


def test_select_follows_a_sqlite_store_and_its_other_handles(tmp_path):
    rng = random.Random(5)
    path = str(tmp_path / "m.db")
    mem = Memory.open(path, embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": _meta(rng)} for i in range(80)])
    _check_meta(mem, rng, 20)
    other = Memory.open(path, embedder=HashingEmbedder(dim=16))
    _check_meta(other, rng, 20)
    mem.add_many([{"text": f"n{i}", "id": f"n{i}", "meta": {"k": "fresh"}} for i in range(5)])
    mem.update("m1", meta={"k": "fresh"})
    mem.remove("m2")
    assert other.select({"k": "fresh"}) == ["m1"] + [f"n{i}" for i in range(5)]   # the other's writes, seen
    mem.close()
    other.close()
    back = Memory.open(path, embedder=HashingEmbedder(dim=16))
    _check_meta(back, rng, 30)
    back.close()


def test_select_refuses_a_malformed_filter_naming_it():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("a", id="a", meta={"k": 1})
    with pytest.raises(FilterError, match=r"\$bogus"):
        mem.select({"k": {"$bogus": 1}})
    with pytest.raises(TypeError, match="filters must be a dict or a callable, got int"):
        mem.select(3)


def _count_reads(monkeypatch) -> list[int]:
    read: list[int] = []
    at_rows = RecordTable.at_rows

    def counted(self, rows, copies=True):
        rows = list(rows)
        read.append(len(rows))
        return at_rows(self, rows, copies)

    monkeypatch.setattr(RecordTable, "at_rows", counted)
    return read


def test_select_with_a_dict_reads_no_record(monkeypatch):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "meta": {"k": i % 7}} for i in range(300)])
    read = _count_reads(monkeypatch)
    assert len(mem.select({"k": 3})) == 43 and read == []


# ---------------------------------------------------------------------------- LlamaIndex
def _old_matching(store, node_ids, filters) -> list[str]:
    """HypermemVectorStore._matching before Memory.select (the reference): node by node."""
    from hypermem.integrations.llama_index import _field, filter_spec

    pred = C.compile_filter(filter_spec(filters), _field)
    mem = store.memory
    recs = [mem.get(i) for i in node_ids if i in mem] if node_ids is not None else list(mem)
    return [r.id for r in recs if pred is None or pred(r)]


def _llama_filters(rng: random.Random):
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )

    if rng.random() < 0.15:
        return None
    ops = [FilterOperator.EQ, FilterOperator.NE, FilterOperator.GT, FilterOperator.LTE, FilterOperator.IN,
           FilterOperator.NIN, FilterOperator.IS_EMPTY]
    parts = []
    for _ in range(rng.randint(1, 3)):
        key, op = rng.choice(["parent", "t", "valid_until", "kind"]), rng.choice(ops)
        if key in ("parent", "kind"):
            x = rng.choice(["m1", "m2", "m7", "a", "b", 1])
        else:
            x = _time(rng).isoformat()
        parts.append(MetadataFilter(key=key, value=[x] if op in (FilterOperator.IN, FilterOperator.NIN) else x,
                                    operator=op))
    return MetadataFilters(filters=parts, condition=rng.choice([FilterCondition.AND, FilterCondition.OR,
                                                                FilterCondition.NOT]))


@pytest.mark.parametrize("seed", range(3))
def test_llama_index_get_and_delete_nodes_as_node_by_node(seed):
    pytest.importorskip("llama_index.core")
    from hypermem.integrations.llama_index import HypermemVectorStore

    rng = random.Random(seed)
    base = _store(rng, 80)
    for _ in range(25):
        flt = _llama_filters(rng)
        node_ids = [f"m{rng.randrange(90)}" for _ in range(15)] if rng.random() < 0.4 else None
        store = HypermemVectorStore(base)
        want = _old_matching(store, node_ids, flt)
        assert [n.node_id for n in store.get_nodes(node_ids, flt)] == want
        gone = HypermemVectorStore(Memory.from_json(base.to_json(), embedder=HashingEmbedder(dim=32)))
        gone.delete_nodes(node_ids, flt)
        assert set(gone.memory.ids) == set(base.ids) - set(want)


def test_llama_index_get_nodes_reads_the_matching_records_alone(monkeypatch):
    pytest.importorskip("llama_index.core")
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

    from hypermem.integrations.llama_index import HypermemVectorStore

    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": f"m{i}", "id": f"m{i}", "meta": {"kind": "a" if i % 10 else "b"}} for i in range(200)])
    store = HypermemVectorStore(mem)
    read = _count_reads(monkeypatch)
    nodes = store.get_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="kind", value="b")]))
    assert [n.node_id for n in nodes] == [f"m{i}" for i in range(0, 200, 10)] and sum(read) == 20
    nodes = store.get_nodes(["m5", "m0", "zz", "m0", "m10"],
                            MetadataFilters(filters=[MetadataFilter(key="kind", value="b")]))
    assert [n.node_id for n in nodes] == ["m0", "m0", "m10"]   # node_ids' order, repeats kept


# ---------------------------------------------------------------------------- LangGraph
def _old_namespaces(store, op, now):
    """HypermemStore._list_namespaces before the store's columns (the reference)."""
    from hypermem.integrations.langgraph import _is_item, _matches_path

    spaces = {tuple(r.meta["namespace"]) for r in store.memory if _is_item(r) and store._live(r, now)}
    if op.match_conditions:
        spaces = {ns for ns in spaces if all(_matches_path(c, ns) for c in op.match_conditions)}
    if op.max_depth is not None:
        spaces = {ns[: op.max_depth] for ns in spaces}
    return sorted(spaces)[op.offset: op.offset + op.limit]


@pytest.mark.parametrize("seed", range(3))
def test_langgraph_namespaces_and_pages_as_the_item_predicate(seed):
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import ListNamespacesOp, MatchCondition, SearchOp

    rng = random.Random(seed)
    clock, (new, old) = _langgraph_pair(rng, "nearest")
    for _ in range(30):
        conds = rng.choice([None, (MatchCondition("prefix", ("a",)),), (MatchCondition("suffix", ("*",)),)])
        op = ListNamespacesOp(conds, rng.choice([None, 1, 2]), rng.randint(1, 6), rng.randint(0, 2))
        assert new.batch([op])[0] == _old_namespaces(new, op, clock.now), op
        op = SearchOp(rng.choice([(), ("a",), ("d",)]), None, rng.randint(1, 8), rng.randint(0, 40),
                      rng.choice([None, None, "topic 2 note"]), refresh_ttl=False)
        assert [(i.namespace, i.key, i.score) for i in new.batch([op])[0]] == \
            [(i.namespace, i.key, i.score) for i in old.batch([op])[0]], op
        clock.now += timedelta(minutes=rng.choice([0, 0, 20, 45]))   # TTLs run out: namespaces go


def test_langgraph_list_namespaces_reads_no_record(monkeypatch):
    pytest.importorskip("langgraph.store.base")
    from langgraph.store.base import PutOp

    from hypermem.integrations.langgraph import HypermemStore

    store = HypermemStore(embedder=HashingEmbedder(dim=16))
    store.batch([PutOp(("users", f"u{i % 7}", "notes"), f"k{i}", {"text": f"n{i}"}) for i in range(100)])
    read = _count_reads(monkeypatch)
    monkeypatch.setattr(Memory, "__iter__", lambda self: pytest.fail("a pass over every record"))
    assert store.list_namespaces(max_depth=2) == [("users", f"u{i}") for i in range(7)] and read == []
