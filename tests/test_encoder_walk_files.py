"""A user's own hierarchy files as a tester met them: a byte-order mark, a file that is not
UTF-8, two entities of one name (hypermem.data.hierarchy_files)."""

from __future__ import annotations

import warnings

import pytest

from hypermem.data.hierarchy_files import HierarchyFileError, read_edges, read_hierarchy, read_names


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl"])
def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path, suffix):
    edges = tmp_path / f"edges{suffix}"
    if suffix == ".tsv":
        edges.write_text("child\tparent\ndog\tanimal\ncat\tanimal\n", encoding="utf-8-sig")
    else:
        edges.write_text('{"child": "dog", "parent": "animal"}\n{"child": "cat", "parent": "animal"}\n',
                         encoding="utf-8-sig")
    assert read_edges(edges) == [("dog", "animal"), ("cat", "animal")]   # no ('\ufeffchild', 'parent')
    names = tmp_path / "names.tsv"
    names.write_text("id\tname\ndog\ta dog\ncat\ta cat\nanimal\tan animal\n", encoding="utf-8-sig")
    assert read_names(names) == {"dog": "a dog", "cat": "a cat", "animal": "an animal"}


def test_a_file_that_is_not_utf8_names_the_file_line_and_byte(tmp_path):
    edges = tmp_path / "edges.tsv"
    edges.write_bytes(b"dog\tanimal\ncat\tanimal\n" + "caf\u00e9\tplace\n".encode("latin-1"))
    with pytest.raises(HierarchyFileError) as exc:
        read_edges(edges)
    assert str(exc.value) == f"{edges}:3: not UTF-8 text (byte 0xe9 at column 4); save the file as UTF-8"
    names = tmp_path / "names.tsv"
    names.write_bytes(b"\xff\xfed\x00o\x00g\x00")   # UTF-16, as some editors save
    with pytest.raises(HierarchyFileError, match=rf"^{names}:1: not UTF-8 text \(byte 0xff at column 1\)"):
        read_names(names)


def test_two_ids_may_share_a_text_with_a_warning(tmp_path):
    (tmp_path / "edges.tsv").write_text("bank1\tinstitution\nbank2\tslope\n")
    (tmp_path / "names.tsv").write_text("bank1\tbank\nbank2\tbank\ninstitution\tinstitution\nslope\tslope\n")
    with pytest.warns(UserWarning, match=r"1 text\(s\) name more than one id, e.g. 'bank': \['bank1', 'bank2'\]"):
        h = read_hierarchy(tmp_path / "edges.tsv", tmp_path / "names.tsv")
    assert h.names["bank1"] == h.names["bank2"] == "bank"
    (tmp_path / "twice.tsv").write_text("bank1\tbank\nbank1\tbank of a river\n")
    with pytest.raises(HierarchyFileError, match="id 'bank1' is named twice"):
        read_names(tmp_path / "twice.tsv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # no warning without a shared text
        (tmp_path / "distinct.tsv").write_text("a\tx\nb\ty\n")
        assert read_names(tmp_path / "distinct.tsv") == {"a": "x", "b": "y"}


def test_read_hierarchy_names_each_files_role_and_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop.tsv").write_text("dog\tanimal\nanimal\tanimal\n")
    with pytest.raises(HierarchyFileError, match=rf"^edges file {tmp_path / 'loop.tsv'}:2: 'animal' is its own parent \(a self-loop\)$"):
        read_hierarchy("loop.tsv")
    (tmp_path / "e.tsv").write_text("dog\tanimal\n")
    (tmp_path / "n.tsv").write_text("dog\ta dog\n")
    with pytest.raises(HierarchyFileError) as exc:
        read_hierarchy("e.tsv", "n.tsv")
    assert str(exc.value) == (f"names file {tmp_path / 'n.tsv'}: no name for 1 entities of the edges file "
                              f"{tmp_path / 'e.tsv'}, e.g. ['animal']")
    with pytest.raises(FileNotFoundError, match=rf"^names file: no such file: '{tmp_path / 'none.tsv'}'$"):
        read_hierarchy("e.tsv", "none.tsv")
