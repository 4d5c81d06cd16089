"""A copy of a store whose filters have run answers every filter as the original does.

The metadata value columns a dict filter builds hold the ``MISSING`` and ``NOT_DICT`` markers,
checked with ``is``; ``copy.copy`` (a deep copy of the state), ``copy.deepcopy`` and ``pickle``
(supported for an in-process store: tests/test_store_copy.py) must give back those same objects,
or a missing field reads as present on the copy."""

from __future__ import annotations

import copy
import pickle

import pytest

from hypermem.embed import HashingEmbedder
from hypermem.store import Memory
from hypermem.store.filters import MISSING
from hypermem.store.meta_columns import NOT_DICT

FILTERS = [
    {"n": {"$exists": True}},
    {"n": {"$exists": False}},
    {"n": {"$ne": 0}},
    {"n": {"$nin": [0, 7]}},
    {"n": {"$gte": 0}},
    {"kind": "c"},
    {"o": {"$exists": False}},
    {"o": {"x": {"$exists": False}}},
    {"o": {"x": {"$exists": True}}},
    {"o": {"x": 1}},
    {"o": {"x": {"$ne": 1}}},
    {"o": {"x": {"$nin": [1]}}},
    {"$not": {"n": {"$exists": True}}},
    {"$or": [{"n": {"$exists": False}}, {"o": {"x": {"$exists": True}}}]},
]


def build() -> Memory:
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add("rain falls", id="a", meta={"kind": "c", "o": "text"})            # no n; o is no dict
    m.add("fox runs", id="b", meta={"kind": "c", "n": 0, "o": {"x": 1}})
    m.add("owl hoots", id="c", meta={})                                     # nothing at all
    m.add("bee hums", id="d", meta={"kind": "w", "n": 3, "o": {"y": 2}})   # o without x
    return m


def update(m: Memory) -> None:
    m.update("b", meta={"kind": "w", "o": "flat"})     # n and o.x gone
    m.update("c", meta={"n": 7, "o": {"x": 5}})         # both appear
    m.add("elk calls", id="e", meta={"o": {}})


def answers(m: Memory) -> list:
    return [(m.select(f), sorted(r.id for r in m.search("rain", k=10, filters=f))) for f in FILTERS]


COPIES = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": lambda m: pickle.loads(pickle.dumps(m))}


@pytest.mark.parametrize("sentinel", [MISSING, NOT_DICT], ids=["MISSING", "NOT_DICT"])
@pytest.mark.parametrize("how", sorted(COPIES))
def test_the_sentinels_stay_the_same_objects(sentinel, how):
    assert COPIES[how](sentinel) is sentinel
    assert COPIES[how]([sentinel])[0] is sentinel


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_after_filters_answers_every_filter_as_the_original(how):
    m = build()
    expected = answers(m)                  # the filters build the value columns, then are copied
    assert expected[0][0] == ["b", "d"] and expected[1][0] == ["a", "c"]  # the defect's case
    c = COPIES[how](m)
    assert answers(c) == expected
    update(c)                              # columns of the copy follow its own rows
    fresh = build()
    update(fresh)                          # the same store never copied, never filtered before
    assert answers(c) == answers(fresh)
    assert answers(m) == expected          # the original is untouched by the copy's update



@pytest.mark.parametrize("sentinel", [MISSING, NOT_DICT], ids=["MISSING", "NOT_DICT"])
def test_an_older_pickle_of_a_marker_loads_as_the_one_object(sentinel):
    cls = type(sentinel)   # before the fix a marker pickled as cls.__new__(cls): GLOBAL, (), NEWOBJ
    older = b"\x80\x02c" + f"{cls.__module__}\n{cls.__name__}\n".encode() + b")\x81."
    assert pickle.loads(older) is sentinel
    assert cls() is sentinel
