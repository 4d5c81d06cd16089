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
