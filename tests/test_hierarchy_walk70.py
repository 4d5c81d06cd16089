"""Walk 70 (a data scientist's pandas tables of (child, parent) edges): NaN roots and 1 / 1.0 ids
refused by one check at every entry point, a swapped TSV header and a root row named, cyclic
is-a pairs refused by training and evaluation, the evaluation's share of training time."""

import io
import subprocess
import sys

import pytest
import torch

from hypermem.data.dag import CycleError
from hypermem.data.hierarchy_files import HierarchyFileError, read_checked_edges
from hypermem.hierarchy import (
    Relations,
    children_map,
    fit_entailment_cones,
    fit_poincare_embeddings,
    reconstruction,
    sarkar_layout,
    transitive_closure,
)
from hypermem.hierarchy.node_ids import check_node_ids, is_missing
from hypermem.hierarchy.shadows import shadow_layout
from hypermem.train.export import embedding_to_memory

NAN = float("nan")
ISA = [("dog", "animal"), ("cat", "animal"), ("puppy", "dog")]  # (hyponym, hypernym)
TREE = [("animal", "dog"), ("animal", "cat"), ("dog", "puppy")]  # (parent, child)
POINTS = {n: torch.tensor([0.1 * i, 0.05], dtype=torch.float64) for i, n in enumerate(["animal", "dog", "cat", "puppy"])}


def _fit(pairs):
    return fit_poincare_embeddings(pairs, dim=2, epochs=1, burn_in=0)


@pytest.mark.parametrize("call", [
    lambda: _fit([*ISA, ("animal", NAN)]),
    lambda: reconstruction(POINTS, [*ISA, ("animal", None)]),
    lambda: sarkar_layout([(NAN, "animal"), *TREE], dim=4),
    lambda: shadow_layout([(NAN, "animal"), *TREE], dim=4),
    lambda: children_map([*TREE, (None, "fish")]),
    lambda: transitive_closure({"animal": ["dog", NAN]}, "animal"),
    lambda: embedding_to_memory(POINTS, [(NAN, "animal"), *TREE]),
    lambda: Relations([(1, 2), (3, NAN)]),
], ids=["fit", "reconstruction", "sarkar", "shadow", "children_map", "closure", "export", "relations"])
def test_a_missing_parent_is_refused_everywhere_with_one_message(call):
    with pytest.raises(ValueError, match=r"(pair|edge) \d+ .*a missing parent \(NaN/None\): drop root rows, "
                                         r"e\.g\. df\.dropna\(subset=\['parent'\]\)"):
        call()


def test_pandas_roots_as_read_csv_gives_them():
    pd = pytest.importorskip("pandas")
    num = pd.read_csv(io.StringIO("child,parent\n1,\n2,1\n3,1\n10,\n11,10\n"))
    with pytest.raises(ValueError, match=r"pair 0 is \(1, nan\): a missing parent"):
        _fit(list(zip(num.child, num.parent)))
    txt = pd.read_csv(io.StringIO("child,parent\na,\nb,a\n"))
    with pytest.raises(ValueError, match="edge 0 .*missing parent"):
        sarkar_layout([(p, c) for c, p in zip(txt.child, txt.parent)], dim=4)
    assert is_missing(pd.NA) and is_missing(pd.NaT) and is_missing(float("nan")) and is_missing(None)
    with pytest.raises(ValueError, match="edge 1 .*missing parent"):
        children_map([("a", "b"), (pd.NA, "a")])


def test_the_check_never_imports_pandas_and_keeps_plain_ids():
    code = ("import sys; from hypermem.hierarchy.node_ids import is_missing, check_node_ids; "
            "check_node_ids([('a', 'b'), (1, 2.5)]); assert not is_missing('nan') and not is_missing(0); "
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    check_node_ids([(1.0, 2.0), (2.0, 3.0)])  # floats alone: one type, allowed


def test_one_number_in_two_types_is_refused():
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(io.StringIO("child,parent\n1,\n2,1\n3,1\n4,2\n")).dropna()
    tree = list(zip(df.parent, df.child))  # [(1.0, 2), (1.0, 3), (2.0, 4)]: the parent column stayed float
    for call in (lambda: sarkar_layout(tree, dim=8), lambda: embedding_to_memory(POINTS, tree),
                 lambda: _fit([(c, p) for p, c in tree])):
        with pytest.raises(ValueError, match=r"ids 2 \(int\) and 2\.0 \(float\) are the same number in different "
                                             r"types: cast the columns, e\.g\. df\.astype\(\{'parent': 'Int64'\}\)"):
            call()
    with pytest.raises(ValueError, match=r"pair 0: id 1\.0 \(float\) is a whole number among int ids"):
        Relations([(2, 1.0), (3, 1.0)])
    good = df.astype({"parent": "Int64"})
    assert sorted(sarkar_layout(list(zip(good.parent, good.child)), dim=8)) == [1, 2, 3, 4]


def test_a_swapped_header_and_a_root_row_are_named(tmp_path):
    path = tmp_path / "rev.tsv"
    path.write_text("parent\tchild\nanimal\tdog\nanimal\tcat\ndog\tpuppy\n")
    with pytest.raises(HierarchyFileError, match=r"rev\.tsv:1: the header 'parent'<TAB>'child' says parent first: "
                                                 r"this loader reads child<TAB>parent; swap the columns"):
        read_checked_edges(path)
    path.write_text("Hypernym\tHyponym\nanimal\tdog\n")
    with pytest.raises(HierarchyFileError, match="says parent first"):
        read_checked_edges(path)
    path.write_text("child\tparent\ndog\tanimal\nanimal\t\n")
    with pytest.raises(HierarchyFileError, match=r":3: .*'animal' has a blank parent, this looks like a root row"):
        read_checked_edges(path)
    path.write_text("child\tparent\ndog\tanimal\n")
    assert read_checked_edges(path)[0] == [("dog", "animal")]


CYCLE = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]


@pytest.mark.parametrize("call", [
    lambda: _fit(CYCLE),
    lambda: fit_entailment_cones(CYCLE, dim=2, epochs=1, init_epochs=1),
], ids=["poincare", "cones"])
def test_cyclic_isa_pairs_are_refused_naming_the_cycle(call):
    with pytest.raises(CycleError, match=r"cycle \(each node a child of the next\): 'a' -> 'b' -> 'c' -> 'a'"):
        call()


def test_reconstruction_of_cyclic_pairs_warns_naming_the_cycle():
    """The ranking is defined for any relation (the evaluation tests use random graphs), so it
    warns rather than refuses."""
    with pytest.warns(UserWarning, match=r"'a' -> 'b' -> 'c' -> 'a'.*not a hierarchy's"):
        reconstruction({n: torch.tensor([0.1 * i, 0.0]) for i, n in enumerate("abcd")}, CYCLE)


def test_the_cycle_check_finds_a_cycle_above_a_long_chain():
    chain = [(i, i + 1) for i in range(2000)] + [(3000, 3001), (3001, 3000), (2000, 3000)]
    with pytest.raises(CycleError, match="3000 -> 3001 -> 3000"):
        Relations(chain).check_acyclic()
    Relations(chain[:2000]).check_acyclic()


def test_the_report_states_the_evaluation_seconds():
    pts, rep = fit_poincare_embeddings(ISA, dim=2, epochs=3, burn_in=0, eval_every=1)
    assert len(rep.history) == 3 and 0.0 < rep.eval_seconds <= rep.seconds
    assert fit_poincare_embeddings(ISA, dim=2, epochs=2, burn_in=0)[1].eval_seconds == 0.0


def test_reconstruction_shows_a_bar_only_when_asked_or_on_a_terminal(capsys):
    r = reconstruction(POINTS, ISA, progress=True)
    assert "reconstruction" in capsys.readouterr().err
    assert reconstruction(POINTS, ISA).map == r.map
    assert capsys.readouterr().err == ""  # not a terminal: quiet
