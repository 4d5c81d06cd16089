"""Walk 72, typing: what mypy and pyright read from hypermem's annotations, checked at run time
(the checkers themselves are not part of the suite): the delegated Memory methods carry their
collaborator's types, the constructors' return types, the lazy names under TYPE_CHECKING, short
reprs, and Parameters sections that name every parameter."""

import ast
import inspect
import os
import re
import typing
import zipfile
from collections.abc import Hashable
from pathlib import Path

import pytest
import torch

import hypermem
from hypermem import Memory, SearchResult
from hypermem.data.dag import check_acyclic, hypernym_closure
from hypermem.episodic import MemoryStorage
from hypermem.geometry import PoincareBall
from hypermem.hierarchy import polish_ranks, reconstruction
from hypermem.nn import BallEncoder, HyperbolicMemory, ParentVote, memory_info_nce
from hypermem.store.search import Searcher
from hypermem.store.suggest import Suggester
from hypermem.store.views import MemoryViews

ROOT = Path(__file__).resolve().parents[1]
METHODS = {Searcher: ["search", "search_batch", "time_weights", "embed_query", "build_index", "index_recall"],
           Suggester: ["suggest_parents"],
           MemoryViews: ["parent", "children", "ancestors", "descendants", "siblings", "roots", "level", "depth",
                         "point", "embedding", "stats", "table", "to_dataframe", "tree"]}
COLUMNS = ["ids", "points", "directions", "depths", "embeddings"]


def test_a_delegated_method_has_its_collaborators_signature_types_and_docs():
    for cls, names in METHODS.items():
        for name in names:
            ours, theirs = getattr(Memory, name), getattr(cls, name)
            assert inspect.signature(ours) == inspect.signature(theirs), name
            assert typing.get_type_hints(ours) == typing.get_type_hints(theirs), name
            assert ours.__doc__ == theirs.__doc__, name
    assert typing.get_type_hints(Memory.search)["return"] == list[SearchResult]


def test_the_columns_are_typed_read_only_properties_with_the_views_docs():
    mem = Memory()
    mem.add("animals")
    for name in COLUMNS:
        prop = inspect.getattr_static(Memory, name)
        assert isinstance(prop, property) and prop.fset is None
        assert prop.__doc__ == getattr(MemoryViews, name).__doc__
        assert typing.get_type_hints(prop.fget)["return"] in (list[str], torch.Tensor)
        with pytest.raises(AttributeError):
            setattr(mem, name, None)
    assert mem.ids == mem.views.ids and torch.equal(mem.points, mem.views.points)


def test_a_wrong_argument_is_still_named_as_memorys():
    mem = Memory()
    mem.add("animals")
    with pytest.raises(TypeError, match=r"^Memory\.search\(\): got an unexpected keyword argument 'kk'$"):
        mem.search("animals", kk=1)
    with pytest.raises(TypeError, match=r"^Memory\.tree\(\): "):
        mem.tree(1, 2, 3)


def test_constructors_return_the_class_and_open_is_overloaded():
    bound = typing.get_type_hints(Memory.load)["return"]
    assert isinstance(bound, typing.TypeVar) and typing.get_type_hints(Memory.from_json)["return"] is bound
    assert typing.get_type_hints(Memory.__enter__)["return"] is bound
    assert typing.get_type_hints(HyperbolicMemory.to_memory)["return"] is Memory
    assert inspect.signature(HyperbolicMemory.from_memory).return_annotation == "_Layer"
    if not hasattr(typing, "get_overloads"):  # Python 3.10
        pytest.skip("typing.get_overloads needs Python 3.11")
    opened = [ov.__annotations__["return"] for ov in typing.get_overloads(Memory.open)]
    assert opened == ["_M", "ServerMemory", "_M | ServerMemory"]
    made = [ov.__annotations__["return"] for ov in typing.get_overloads(MemoryStorage.instantiate)]
    assert made == ["EpisodicMemory", "list[EpisodicMemory]"]


def test_public_parameters_are_annotated():
    for fn, names in [(Memory.__init__, ["embedder"]), (Memory.load, ["embedder", "decay"]),
                      (Memory.search, ["query"]), (MemoryStorage.save, ["path"]), (MemoryStorage.load, ["path"]),
                      (hypermem.in_cone, ["x", "y", "ball"]), (hypermem.lorentz_distance, ["X", "Y"]),
                      (hypermem.to_mips_vectors, ["X"]), (memory_info_nce, ["memory"])]:
        params = inspect.signature(fn).parameters
        assert all(params[n].annotation is not inspect.Parameter.empty for n in names), fn
    hints = typing.get_type_hints(Memory.search)
    assert str in typing.get_args(hints["query"]) and torch.Tensor in typing.get_args(hints["query"])
    node = typing.get_type_hints(hypernym_closure)["parents"].__args__[0]
    assert isinstance(node, typing.TypeVar) and node.__bound__ is Hashable
    assert typing.get_type_hints(check_acyclic)["parents"].__args__[0] is node
    assert hypernym_closure({1: [0], 0: []}) == {0: set(), 1: {0}}          # int nodes, as annotated


def test_the_lazy_names_are_imported_for_checkers_and_still_lazy_at_run_time():
    tree = ast.parse((ROOT / "hypermem" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {a.name for n in block.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert seen == set(hypermem._LAZY)
    hidden = [n for n in block.orelse if isinstance(n, ast.FunctionDef)]  # checkers see no __getattr__
    assert [f.name for f in hidden] == ["__getattr__"]
    with pytest.raises(ImportError, match="Memroy"):
        from hypermem import Memroy  # noqa: F401
    assert callable(hypermem.sarkar_layout) and "fit_poincare_embeddings" in dir(hypermem)


def test_a_records_repr_is_short_and_memorys_names_its_embedder_and_a_closed_store(tmp_path):
    mem = Memory()
    a = mem.add("animals " * 30, meta={"kind": "pet", "label": "x" * 200, "a": 1, "b": 2})
    b = mem.add("dog", parent=a, meta={"k": 1})
    long = repr(mem.get(a))
    assert len(long) < 200 and "x" * 41 not in long and "<4 keys: 'kind', 'label', 'a', …>" in long
    assert long.startswith(f"MemoryRecord(id={a!r}, t=") and "text='animals animals" in long
    assert repr(mem.get(b)).endswith("text='dog', meta={'k': 1})") and f"parent_id={a!r}" in repr(mem.get(b))
    assert "embedder=HashingEmbedder" in repr(mem) and "closed" not in repr(mem)
    db = Memory.open(tmp_path / "x.db")
    db.add("tea")
    assert "closed" not in repr(db)
    db.close()
    assert "storage closed" in repr(db)


def _parameters(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc[doc.index("Parameters"):] if "Parameters" in doc else ""


def test_the_parameters_sections_name_every_parameter():
    for obj, names in [(ParentVote, ["learn", "combine", "children"]),
                       (HyperbolicMemory, ["learn_temperature", "dtype", "device"]),
                       (BallEncoder, ["dtype", "device"]), (polish_ranks, ["nodes", "seed"]),
                       (reconstruction, ["nodes"]), (PoincareBall.retr, ["dim"])]:
        section = _parameters(obj)
        for name in names:
            assert re.search(rf"^\s*(\w+, )*{name}\b[\w, ]*:", section, re.M), (obj, name)


def test_the_wheel_marks_the_package_typed(wheel):
    path, _ = wheel
    assert "hypermem/py.typed" in zipfile.ZipFile(path).namelist()
    assert os.path.exists(ROOT / "hypermem" / "py.typed")
