"""One walker over the dict-filter tree (``map_fields``) behind the adapters' rewriters, the time
operands' range check in that one walk, the LangChain parent hint from the inputs (not the error's
text), one ``stops_after`` for Lightning's stop rule, one learning-rate check, and the empty
metadata key read alike by ``select`` and ``search``."""

from __future__ import annotations

import types

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.integrations import _common as C
from hypermem.integrations import _record_filters as RF
from hypermem.store.filters import FilterError, map_fields


def _upper(key, want):
    return {key: want.upper() if isinstance(want, str) else want}


def test_map_fields_rewrites_every_field_under_the_combinators_and_keeps_their_shape():
    spec = {"a": "x", "$or": [{"b": "y"}, {"$not": {"c": "z"}}], "$and": [{"d": "w"}]}
    assert map_fields(spec, _upper) == {"a": "X", "$or": [{"b": "Y"}, {"$not": {"c": "Z"}}], "$and": [{"d": "W"}]}
    bad = {"$and": "no list", "$or": [3, "s", {"e": "v"}], "$not": 5}   # for check_filter to name
    assert map_fields(bad, _upper) == {"$and": "NO LIST", "$or": [3, "s", {"e": "V"}], "$not": 5}
    assert map_fields({}, _upper) == {}


def test_map_fields_joins_replacements_that_share_a_key_by_and():
    wrap = lambda key, want: {"value": {key: want}}   # noqa: E731
    assert map_fields({"a": 1}, wrap) == {"value": {"a": 1}}
    assert map_fields({"a": 1, "b": 2}, wrap) == {"$and": [{"value": {"a": 1}}, {"value": {"b": 2}}]}
    assert map_fields({"a": 1, "$or": [{"b": 2}]}, lambda k, w: {"$or": [{k: w}]}) == \
        {"$and": [{"$or": [{"a": 1}]}, {"$or": [{"$or": [{"b": 2}]}]}]}


def test_lists_as_values_through_the_one_walker():
    spec = {"tags": ["a"], "$or": [{"n": {"$in": [1]}}, {"$not": {"place": {"room": ["k"]}}}]}
    assert C.lists_as_values(spec) == {"tags": {"$eq": ["a"]}, "$or": [{"n": {"$in": [1]}},
                                                                      {"$not": {"place": {"room": {"$eq": ["k"]}}}}]}


@pytest.mark.parametrize("spec", [{"t": {"$gt": 1e20}}, {"$or": [{"valid_from": {"$in": [1, -1e15]}}]},
                                  {"$not": {"valid_until": 253402300800}}])
def test_seconds_outside_the_datetime_range_are_a_filter_error_in_every_time_filter(spec):
    for make in (lambda: C.instants(spec), lambda: C.compile_filter(spec), lambda: RF.node_filter(spec)):
        with pytest.raises(FilterError, match=r"filter value for '(t|valid_from|valid_until)'.*years 1..9999"):
            make()
    assert C.instants({"t": -62135596800}) == {"t": "0001-01-01T00:00:00+00:00"}   # the range's first second


def test_langchain_names_every_unknown_parent_and_a_replaced_memorys_too():
    pytest.importorskip("langchain_core")
    from hypermem.integrations.langchain import HypermemVectorStore

    vs = HypermemVectorStore(embedding=HashingEmbedder(dim=16))
    vs.add_texts(["a"], ids=["a"])
    with pytest.raises(KeyError, match=r"unknown memory id 'zz'.*metadatas\[0\]\['parent'\] is this store's reserved"):
        vs.add_texts(["a2"], ids=["a"], metadatas=[{"parent": "zz"}])
    with pytest.raises(KeyError, match=r"metadatas\[0\]\['parent'\] and metadatas\[2\]\['parent'\] are this store's"):
        vs.add_texts(["b", "c", "d"], metadatas=[{"parent": "x1"}, {"parent": "a"}, {"parent": "x2"}])
    assert vs.memory.ids == ["a"]


def _trainer(**kw):
    base = dict(max_steps=-1, max_epochs=3, global_step=5, current_epoch=0, should_stop=False, min_epochs=None,
                min_steps=None, num_training_batches=4, processed=1)
    base.update(kw)
    progress = types.SimpleNamespace(current=types.SimpleNamespace(processed=base.pop("processed")))
    return types.SimpleNamespace(fit_loop=types.SimpleNamespace(epoch_loop=types.SimpleNamespace(batch_progress=progress)),
                                 **base)


@pytest.mark.parametrize("kw,batch,epoch", [
    ({}, False, False),
    ({"max_steps": 5}, True, True),
    ({"current_epoch": 2}, False, True),                      # the last epoch: its end, not a middle batch
    ({"current_epoch": 2, "processed": 4}, True, True),       # the last epoch's last batch
    ({"should_stop": True}, True, True),
    ({"should_stop": True, "min_epochs": 1}, False, True),    # this epoch counts at its end
    ({"should_stop": True, "min_steps": 6}, False, False),
    ({"max_epochs": -1, "current_epoch": 9, "processed": 4}, False, False),
])
def test_stops_after_a_batch_or_an_epoch(kw, batch, epoch):
    pytest.importorskip("lightning")
    from hypermem.train.fit_stop import stops_after

    assert stops_after(_trainer(**kw), "batch") is batch
    assert stops_after(_trainer(**kw), "epoch") is epoch
    with pytest.raises(ValueError, match="unit must be 'batch' or 'epoch', got 'step'"):
        stops_after(_trainer(), "step")


@pytest.mark.parametrize("lr", [0, -1, float("nan"), float("inf"), "0.1", None])
def test_one_learning_rate_check_names_the_option(lr):
    from hypermem.hierarchy.steps import check_lr, make_optimizer

    with pytest.raises(ValueError, match=rf"^model.lr must be a finite positive number, got {lr!r}$"):
        check_lr(lr, "model.lr")
    with pytest.raises(ValueError, match=r"^lr must be a finite positive number"):
        make_optimizer([], "rsgd", lr)
    check_lr(0.3)


def test_an_empty_metadata_key_is_one_field_in_select_and_search():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add_many([{"text": "a", "id": "a", "meta": {"": 1}}, {"text": "b", "id": "b", "meta": {"": 2}},
                  {"text": "c", "id": "c"}])
    for spec, want in (({"": 1}, ["a"]), ({"": {"$gte": 1}}, ["a", "b"]), ({"$not": {"": 2}}, ["a", "c"])):
        assert mem.select(spec) == want
        assert sorted(r.id for r in mem.search("a", k=3, filters=spec)) == want
