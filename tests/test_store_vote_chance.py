"""The vote less each candidate's chance share (hypermem.store.vote.chance_share): a root over a
whole tree no longer wins a parent's choice by collecting every neighbourhood's votes."""

from __future__ import annotations

import pytest

from hypermem import Memory
from hypermem.store.vote import VOTE_DECAY, VOTE_SELF, below_counts, chance_share, neighbour_vote

TREE = {"a": None, "b": "a", "c": "a", "d": "b", "e": "b", "f": "d", "g": "f", "h": "c"}


def kids(p):
    return [k for k, v in TREE.items() if v == p]


def test_below_counts_and_the_chance_share_by_hand():
    assert below_counts("a", kids) == [2, 3, 1]        # b c | d e h | f
    assert below_counts("b", kids) == [2, 1, 1]        # d e | f | g
    assert below_counts("g", kids) == [0, 0, 0]
    assert below_counts("a", kids, hops=1) == [2]
    assert chance_share([2, 3, 1], 8) == pytest.approx((VOTE_SELF + 2 + VOTE_DECAY * 3 + VOTE_DECAY ** 2) / 8)
    assert chance_share([0, 0, 0], 8) == pytest.approx(VOTE_SELF / 8)


def test_the_share_less_chance_reorders_only_by_the_chance_term():
    nb = [("d", 0.9, 1.0), ("e", 0.8, 1.0), ("h", 0.7, 1.0)]
    plain = dict(neighbour_vote(nb, TREE.get))
    chance = {c: 0.01 * i for i, c in enumerate(plain)}
    less = dict(neighbour_vote(nb, TREE.get, chance=chance.get))
    assert less == pytest.approx({c: v - chance[c] for c, v in plain.items()})


FAMILIES = {
    "tools": ["a hammer for nails", "a cordless drill with a battery", "a saw for wood", "a wrench for bolts",
              "a screwdriver set", "a tape measure"],
    "fruit": ["a ripe banana", "a red apple", "a bunch of grapes", "a juicy orange", "a sweet mango"],
    "vehicles": ["a red bicycle", "a family car", "a delivery van", "a city bus", "a motor scooter"],
    "kitchen": ["a frying pan", "a soup pot", "a chef knife", "a cutting board", "a kettle for tea"],
}


def one_root_store() -> Memory:
    mem = Memory(hybrid=0.0)
    mem.add("everything in the house", id="root")
    for fam, items in FAMILIES.items():
        mem.add(fam, id=fam, parent="root")
        mem.add_many([{"text": t, "id": t, "parent": fam} for t in items])
    return mem


def test_under_one_root_a_new_note_goes_to_its_family_not_the_root(monkeypatch):
    import hypermem.store.suggest as suggest

    mem = one_root_store()
    note = "a red one"   # an apple or a bicycle: neighbours in several families, all under the root
    got = [h.id for h in mem.suggest_parents(note, k=3)]
    with monkeypatch.context() as mp:   # the plain share (the rule before): the root collects every vote
        mp.setattr(suggest, "neighbour_vote", lambda *a, chance=None, **kw: neighbour_vote(*a, **kw))
        before = [h.id for h in mem.suggest_parents(note, k=3)]
    assert before[0] == "root" and got[0] == "fruit"
    i = mem.add(note, parent="auto")
    assert mem.parent(i) == "fruit" and mem.get(i).meta["auto_parent"]["suggested"][0]["id"] == "fruit"
    # the root-free ancestors search keeps the root: it is an ancestor of every memory
    assert "root" in [h.id for h in mem.search("a drill bit for bolts", mode="ancestors", k=3)]


def test_a_batch_counts_its_earlier_items_in_the_chance_share():
    one, many = one_root_store(), one_root_store()
    notes = [{"text": t, "parent": "auto"} for t in ("a red one", "a set for the car", "a bike bell",
                                                       "a box of nails")]
    singly = [one.parent(one.add(n["text"], parent="auto")) for n in notes]
    batched = [many.parent(i) for i in many.add_many(notes)]
    assert batched == singly and "root" not in batched
