"""Aliases as training variants of an entity's text: the checks, the texts' layout, the
per-step draw, fit_hierarchy_encoder with aliases, and WordNet's other lemmas."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, tiny_model_folder  # noqa: E402

from hypermem.data import wordnet  # noqa: E402
from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder  # noqa: E402
from hypermem.hierarchy.encoder_variants import (  # noqa: E402
    TextVariants,
    check_alias_rate,
    check_aliases,
    distinct_aliases,
    variant_texts,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


def test_check_aliases_keeps_new_texts_and_names_the_bad_item():
    names = {"1": "dog", "2": "cat"}
    assert check_aliases({1: ["dog", "hound", "hound", "pooch"], "2": ["cat"]}, names) == {"1": ("hound", "pooch")}
    with pytest.raises(ValueError, match="id 'wolf'.*no name"):
        check_aliases({"wolf": ["lupus"]}, names)
    with pytest.raises(TypeError, match=r"aliases\['1'\] must be a list"):
        check_aliases({"1": "hound"}, names)
    with pytest.raises(ValueError, match="non-empty string"):
        check_aliases({"1": ["hound", "  "]}, names)
    with pytest.raises(TypeError, match="mapping"):
        check_aliases([("1", ["hound"])], names)
    for bad in (-0.1, 1.5, True, "0.5", float("nan"), None):
        with pytest.raises(ValueError, match="alias_rate"):
            check_alias_rate(bad)
    assert check_alias_rate(np.float32(0.25)) == 0.25 and check_alias_rate(torch.tensor(0.5)) == 0.5


def test_aliases_come_as_any_ordered_collection_but_not_a_set_and_ids_once():
    names = {"1": "dog", "2": "cat"}
    assert check_aliases({"1": np.array(["hound", "pooch"]), 2: ("kitty",)}, names) == {
        "1": ("hound", "pooch"), "2": ("kitty",)}
    assert check_aliases({"1": (t for t in ["Dog ", "hound"])}, names) == {"1": ("hound",)}   # own name, spaced
    with pytest.raises(TypeError, match="no order"):
        check_aliases({"1": {"hound", "pooch"}}, names)
    with pytest.raises(ValueError, match="two keys for the id '1'"):
        check_aliases({1: ["hound"], "1": ["pooch"]}, names)
    with pytest.raises(TypeError, match="must be a string"):
        check_aliases({"1": ["hound", 3]}, names)
    with pytest.raises(TypeError) as err:   # a huge bad value is named by its first items
        check_aliases({"1": np.arange(100_000)}, names)
    assert len(str(err.value)) < 200
    pd = pytest.importorskip("pandas")
    series = pd.DataFrame({"id": ["1", "1", "2"], "alias": ["hound", "pooch", "kitty"]}).groupby("id")["alias"].agg(list)
    assert check_aliases(series, names) == {"1": ("hound", "pooch"), "2": ("kitty",)}


def test_an_alias_that_names_another_entity_or_several_is_left_out_with_a_warning():
    names = {"a": "dog", "b": "cat", "c": "animal"}
    aliases = {"a": ("hound", "Animal", "pet"), "b": ("pet", "kitty")}
    with pytest.warns(UserWarning, match="1 alias.*another entity's name.*2 that several entities share"):
        assert distinct_aliases(aliases, names) == {"a": ("hound",), "b": ("kitty",)}
    assert distinct_aliases({"a": ("hound",), "z": ("x",)}, names) == {"a": ("hound",)}   # only the given entities


def test_variant_texts_put_the_names_first_then_each_entitys_aliases():
    texts, rows = variant_texts(["a", "b", "c"], {"a": "A", "b": "B", "c": "C"}, {"a": ("A1", "A2"), "c": ("C1",)})
    assert texts == ["A", "B", "C", "A1", "A2", "C1"]
    assert rows == [[3, 4], [], [5]]


def test_the_draw_follows_the_rate_and_repeats_under_a_seed():
    v = TextVariants(None, [[3, 4], [], [5]], rate=0.5)
    torch.manual_seed(0)
    first = v.rows([0, 1, 2] * 400)
    torch.manual_seed(0)
    assert v.rows([0, 1, 2] * 400) == first
    a, b, c = Counter(first[0::3]), Counter(first[1::3]), Counter(first[2::3])
    assert set(b) == {1}                      # no aliases: always the name
    assert set(a) == {0, 3, 4} and set(c) == {2, 5}
    assert 0.4 < (a[3] + a[4]) / 400 < 0.6 and abs(a[3] - a[4]) < 80   # half aliases, both drawn alike
    assert TextVariants(None, [[3, 4]], rate=0.0).rows([0] * 50) == [0] * 50
    assert set(TextVariants(None, [[3, 4]], rate=1.0).rows([0] * 50)) == {3, 4}
    assert repr(v) == "TextVariants(2 of 3 entities with aliases, rate=0.5)"


def test_fit_trains_on_the_aliases_of_training_entities_only(tiny):
    val = [("tabby", "cat"), ("rose", "flower")]
    train = [e for e in EDGES if e not in val]
    aliases = {"dog": ["hound", "pooch"], "car": ["automobile"], "tabby": ["tabby cat"]}
    common = dict(base=str(tiny), epochs=2, batch_size=8, lr=2e-3, negatives=3, hard_negatives=2,
                  validation_edges=val, seed=1)
    plain = fit_hierarchy_encoder(train, NAMES, **common)
    with_aliases = fit_hierarchy_encoder(train, NAMES, aliases=aliases, alias_rate=1.0, **common)
    assert plain.config["aliases"] == 0
    assert with_aliases.config["aliases"] == 3       # "tabby" is a validation entity: its alias is left out
    p = plain.encode(["dog", "car"])
    q = with_aliases.encode(["dog", "car"])
    assert p.shape == q.shape and not torch.allclose(p, q)   # the alias texts changed what was trained
    again = fit_hierarchy_encoder(train, NAMES, aliases=aliases, alias_rate=1.0, **common)
    assert torch.equal(again.encode(["dog", "car"]), q)       # the draw is seeded
    with pytest.raises(ValueError, match="no name"):
        fit_hierarchy_encoder(train, NAMES, aliases={"unicorn": ["horned horse"]}, **common)
    with pytest.raises(ValueError, match="alias_rate"):
        fit_hierarchy_encoder(train, NAMES, aliases=aliases, alias_rate=2, **common)
    with pytest.raises(TypeError, match="aliases must be a mapping"):
        fit_hierarchy_encoder(train, NAMES, aliases=[], **common)
    off = fit_hierarchy_encoder(train, NAMES, aliases=aliases, alias_rate=0.0, **common)
    assert off.config["aliases"] == 0 and torch.equal(off.encode(["dog", "car"]), p)   # rate 0: no alias read


@pytest.mark.skipif(not wordnet.available(), reason="WordNet (Debian's wordnet-base) is not installed")
def test_wordnet_aliases_are_the_other_lemmas_of_hits_entities():
    aliases = wordnet.hit_noun_aliases()
    assert aliases["dog.n.01"] == ["domestic dog", "Canis familiaris"]
    names = wordnet.hit_noun_hierarchy().names
    assert set(aliases) <= set(names) and "entity.n.01" not in aliases
    assert all(names[n] not in a and a for n, a in aliases.items())
