"""The WordNet noun hierarchy: shipped mammals and, where installed, the full database."""

import pytest

from hypermem.data import wordnet
from hypermem.hierarchy import children_map, transitive_closure

needs_wordnet = pytest.mark.skipif(not wordnet.available(),
                                   reason="WordNet not installed (apt-get install -y wordnet-base)")


def test_shipped_mammals(mammals):
    assert len(mammals.nodes) == 1180 and len(mammals.closure) == 6540 and len(mammals.tree) == 1179
    assert mammals.root == "mammal.n.01"
    assert ("dog.n.01", "mammal.n.01") in set(mammals.closure)
    assert ("dog.n.01", "canine.n.02") in set(mammals.closure)
    assert mammals.glosses["dog.n.01"].startswith("a member of the genus Canis")
    assert set(mammals.glosses) == set(mammals.nodes)
    assert not any(u == v for u, v in mammals.closure)


def test_mammal_tree_is_a_tree_inside_the_closure(mammals):
    ch, roots = children_map(mammals.tree)
    assert roots == ["mammal.n.01"]
    tree_pairs = {(d, a) for a, d in transitive_closure(ch, roots[0])}
    assert tree_pairs <= set(mammals.closure)
    assert len(tree_pairs) > 0.9 * len(mammals.closure)


def test_fresh_copies(mammals):
    a = wordnet.load_mammals()
    a.closure.clear()
    assert len(wordnet.load_mammals().closure) == 6540


def test_closure_of_a_dag():
    anc = wordnet.hypernym_closure({"c": ["a", "b"], "b": ["a"], "d": ["c"]})
    assert anc["d"] == {"a", "b", "c"} and anc["a"] == set()
    with pytest.raises(ValueError, match="cycle"):
        wordnet.hypernym_closure({"a": ["b"], "b": ["a"]})


def test_a_cycle_error_names_the_cycle_not_a_node_below_it():
    # air_conditioner and lamp are under the cycle (never ordered either), not on it
    parents = {"household_item": ["chair"], "chair": ["furniture"], "furniture": ["household_item", "thing"],
               "air_conditioner": ["household_item"], "lamp": ["air_conditioner", "thing"], "thing": []}
    with pytest.raises(ValueError) as err:
        wordnet.hypernym_closure(parents)
    assert str(err.value) == ("the hierarchy has a cycle (each node a child of the next): "
                              "'chair' -> 'furniture' -> 'household_item' -> 'chair'")
    with pytest.raises(ValueError, match="cycle .*: 'a' -> 'a'$"):
        wordnet.hypernym_closure({"a": ["a"]})


def test_a_long_cycle_under_a_deep_chain_is_found_fast_and_named_briefly():
    n = 100_000   # a chain of 50,000 nodes above a cycle of 50,001: no recursion, linear time
    parents = {f"{i:06d}": [f"{i + 1:06d}"] for i in range(n)}
    parents[f"{n:06d}"] = [f"{n // 2:06d}"]
    with pytest.raises(ValueError, match=r"'050000' -> '050001' -> .* -> \.\.\. -> '100000' -> '050000' "
                       r"\(50,001 nodes\)$") as err:
        wordnet.hypernym_closure(parents)
    assert len(str(err.value)) < 200


def test_missing_database_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        wordnet.read_nouns(tmp_path)


@needs_wordnet
def test_builder_reproduces_shipped_mammals(mammals):
    h = wordnet.build_hierarchy("mammal.n.01")
    assert h.closure == mammals.closure and h.tree == mammals.tree and h.glosses == mammals.glosses


@needs_wordnet
def test_all_nouns_counts():
    synsets = wordnet.read_nouns()
    assert len(synsets) == 82115
    assert synsets["dog.n.01"].lemmas[:2] == ("dog", "domestic_dog")
    assert synsets["dog.n.01"].hypernyms == ("canine.n.02", "domestic_animal.n.01")
    closure = wordnet.noun_closure()
    assert len(closure) == 743086
    assert len({n for p in closure for n in p}) == 82115
    g = wordnet.glosses(["entity.n.01"])
    assert "perceived" in g["entity.n.01"]
    with pytest.raises(KeyError, match="dog.n.01"):
        wordnet.glosses(["no_such.n.01"])


def _tiny_database(tmp_path):
    (tmp_path / "data.noun").write_text(
        "  1 licence header line\n"
        "00001740 03 n 01 entity 0 000 | that which is perceived or known\n"
        "00002000 05 n 02 dog 0 domestic_dog 0 001 @ 00001740 n 0000 | a member of the genus Canis\n"
        "00003000 06 n 01 leash 0 001 @ 00001740 n 0000 | restraint for an animal\n")
    (tmp_path / "index.noun").write_text(
        "  1 licence header line\n"
        "dog n 1 1 @ 1 0 00002000\n"
        "domestic_dog n 1 0 1 0 00002000\n"
        "entity n 1 0 1 0 00001740\n"
        "leash n 1 0 1 0 00003000\n")
    return tmp_path


def test_lex_filenum_is_parsed(tmp_path):
    d = _tiny_database(tmp_path)
    synsets = wordnet.read_nouns(d)
    assert {n: s.lex_filenum for n, s in synsets.items()} == {"entity.n.01": 3, "dog.n.01": 5, "leash.n.01": 6}
    assert synsets["dog.n.01"].hypernyms == ("entity.n.01",)
    assert wordnet.lex_classes(["dog.n.01"], d) == {"dog.n.01": 5}
    assert wordnet.NOUN_LEX_FILES[5] == "noun.animal" and sorted(wordnet.NOUN_LEX_FILES) == list(range(3, 29))
    with pytest.raises(KeyError, match="cat.n.01"):
        wordnet.lex_classes(["cat.n.01"], d)
    assert wordnet.Synset("x.n.01", 1, ("x",), "", (), ()).lex_filenum == -1  # the old six-field form


def test_sampled_hierarchy_keeps_every_ancestor(tmp_path):
    d = _tiny_database(tmp_path)
    for seed in range(4):
        h = wordnet.sampled_hierarchy(1, seed=seed, path=d)
        assert h.root == "entity.n.01" and "entity.n.01" in h.nodes and 1 <= len(h.nodes) <= 2
        assert h.tree == [("entity.n.01", n) for n in h.nodes if n != "entity.n.01"]
        assert h.closure == [(n, "entity.n.01") for n in h.nodes if n != "entity.n.01"]
    assert len(wordnet.sampled_hierarchy(3, path=d).nodes) == 3
    with pytest.raises(ValueError, match="n_sample"):
        wordnet.sampled_hierarchy(0, path=d)


@needs_wordnet
def test_lex_classes_of_the_database():
    lex = wordnet.lex_classes()
    assert len(lex) == 82115 and set(lex.values()) == set(range(3, 29))
    assert lex["dog.n.01"] == 5 and lex["entity.n.01"] == 3 and lex["leash.n.01"] == 6


def test_hit_hierarchy_names_entities_by_lemma_or_by_definition(tmp_path):
    assert wordnet.definition('a member of the genus Canis; occurs in many breeds; "the dog barked"') == \
        "a member of the genus Canis; occurs in many breeds"
    assert wordnet.definition('"only an example"') == ""
    d = _tiny_database(tmp_path)
    lemma = wordnet.hit_noun_hierarchy(d)
    defined = wordnet.hit_noun_hierarchy(d, text="definition")
    assert lemma.edges == defined.edges and set(lemma.names) == set(defined.names)
    assert lemma.names["dog.n.01"] == "dog" and lemma.name == "wordnet-nouns"
    assert defined.names["dog.n.01"] == "dog: a member of the genus Canis"
    assert defined.names["entity.n.01"] == "entity: that which is perceived or known"
    assert defined.name == "wordnet-nouns-definitions"
    with pytest.raises(ValueError, match="text must be one of"):
        wordnet.hit_noun_hierarchy(d, text="gloss")
