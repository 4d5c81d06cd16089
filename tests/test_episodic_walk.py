"""Defects found walking the episodic memory from an installed wheel: the seed API's
argument-free ``forget()``, wrong-type inputs, saving into a read-only folder or over a
file of another kind, and hand-edited files."""

import episodic_helpers
import pytest
from episodic_helpers import T0  # noqa: F401  (the clock fixture starts there)

from hypermem.episodic import MemoryStorage

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
