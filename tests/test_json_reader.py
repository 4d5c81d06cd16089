"""Memory.from_json of a file reads it a record at a time (hypermem.store.json_reader): the same
memory as json.loads of the whole document, vectors moved into arrays a chunk of records at a
time, and every bad field, however deep in the file, refused with the whole-document error."""

from __future__ import annotations

import json

import pytest
import torch

from hypermem import HashingEmbedder, Memory
from hypermem.cli import main
from hypermem.store import json_reader
from hypermem.store.persistence import from_payload
from hypermem.store.validation import MemoryFileError, load_json


def _store(n: int) -> Memory:
    m = Memory(embedder=HashingEmbedder(dim=16))
    m.add_many([{"text": f"note {i} café", "id": f"i{i}", "parent": None if i % 3 == 0 else f"i{i - i % 3}",
                 "meta": {"n": i, "deep": [{"x": i}]}} for i in range(n)])
    return m


def _whole(text: str) -> Memory:
    """The memory as the loader built it before: json.loads of the whole text, then from_payload."""
    return from_payload(load_json(text, "w", "the document", depth=None), cls=Memory, where="w")


def _same(a: Memory, b: Memory) -> None:
    n = a.state.n
    assert n == b.state.n and a.ids == b.ids
    for name in ("direction", "depth", "time", "access", "valid_from", "valid_until"):
        assert torch.equal(getattr(a.state, name)[:n], getattr(b.state, name)[:n]), name
    assert torch.equal(a.state.embeddings_of(), b.state.embeddings_of())
    assert a.state.children == b.state.children and a.state.levels == b.state.levels
    assert [a.get(i).meta for i in a.ids] == [b.get(i).meta for i in b.ids]


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 97 characters and chunks of 4 records: records straddle blocks, arrays fill in chunks."""
    monkeypatch.setattr(json_reader, "BLOCK_CHARS", 97)
    monkeypatch.setattr(json_reader, "CHUNK_ROWS", 4)


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("count", ["kept", "dropped"])   # without a saved count the arrays grow
def test_chunked_reading_equals_the_whole_document(tmp_path, small_blocks, indent, count):
    m = _store(23)
    text = m.to_json(indent=indent)
    if count == "dropped":
        doc = json.loads(text)
        del doc["config"]["count"]
        text = json.dumps(doc, indent=indent)
    path = tmp_path / "m.json"
    path.write_text(text)
    with open(path, "rb") as f:
        assert json_reader.read_document(f, path.stat().st_size) is not None   # the fast path, not the fallback
    got = Memory.from_json(path)
    _same(got, _whole(text))
    _same(Memory.from_json(text), got)
    assert got.to_json(indent=indent) == m.to_json(indent=indent)


def test_the_vectors_become_the_one_shot_arrays(tmp_path, small_blocks):
    text = _store(10).to_json()
    _, rows, points, embeddings, (directions, depths, siblings) = json_reader.read_document(text)
    doc = json.loads(text)
    for got, key in ((points, "point"), (embeddings, "embedding"), (directions, "direction")):
        assert got.dtype == torch.float64 and torch.equal(got, torch.tensor([r[key] for r in doc["records"]], dtype=torch.float64))
    assert depths.tolist() == [r["depth"] for r in doc["records"]]
    assert siblings == [r["sibling_index"] for r in doc["records"]]
    assert [r["id"] for r in rows] == [r["id"] for r in doc["records"]] and "point" not in rows[0]


def _broken(text: str, at: int, change) -> str:
    doc = json.loads(text)
    change(doc["records"][at])
    return json.dumps(doc)


@pytest.mark.parametrize("change,message", [
    (lambda r: r["embedding"].__setitem__(7, "0.5"), "the embedding of memory 'i37' holds str values"),
    (lambda r: r["point"].__setitem__(3, True), "the point of memory 'i37' holds bool values"),
    (lambda r: r["direction"].pop(), "the direction of memory 'i37' has 15 values, expected 16"),
    (lambda r: r.__setitem__("depth", "1"), "the depth of memory 'i37' is '1', not a finite number"),
    (lambda r: r.pop("direction"), "some records have a direction and others do not"),
    (lambda r: r.pop("text"), "record #37 lacks ['text']"),
    (lambda r: r.__setitem__("t", "soon"), "the time of memory 'i37' is not an ISO 8601 time"),
    (lambda r: r.__setitem__("parent", "nobody"), "memory 'i37' has an unknown parent 'nobody'"),
    (lambda r: r["embedding"].__setitem__(0, 10 ** 400), "the embedding of memory 'i37' holds an integer beyond"),
])
def test_a_bad_field_deep_in_the_file_gets_its_error(tmp_path, small_blocks, change, message):
    text = _broken(_store(40).to_json(), 37, change)
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(MemoryFileError, match="^'.*bad.json': " + message.replace("[", r"\[").replace("(", r"\(")):
        Memory.from_json(path)
    with pytest.raises(MemoryFileError) as whole:
        _whole(text)
    with pytest.raises(MemoryFileError) as streamed:
        Memory.from_json(text)
    assert str(streamed.value) == str(whole.value).replace("w: ", "the JSON text: ", 1)


@pytest.mark.parametrize("tail,message", [
    (lambda t: t[:-5000], "is not valid JSON"),                              # truncated
    (lambda t: t.replace('"id": "i35"', '"id": NaN', 1), "is not valid JSON"),
    (lambda t: t[:-2] + ', "records": []}', "is not valid JSON"),           # not a syntax error ...
])
def test_malformed_text_deep_in_the_file_is_named_as_before(tmp_path, small_blocks, tail, message):
    text = tail(_store(40).to_json())
    path = tmp_path / "bad.json"
    path.write_text(text)
    try:
        _whole(text)
    except MemoryFileError as exc:
        want = str(exc).replace("w: ", f"{str(path)!r}: ", 1)
    else:   # ... a repeated key: json.loads keeps the last, and so does the loader (the whole-document path)
        want = None
    if want is None:
        assert Memory.from_json(path).ids == _whole(text).ids == []
    else:
        assert message in want
        with pytest.raises(MemoryFileError) as exc:
            Memory.from_json(path)
        assert str(exc.value) == want


def test_records_before_the_config_still_load(tmp_path, small_blocks):
    m = _store(9)
    doc = json.loads(m.to_json())
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"records": doc["records"], "config": doc["config"]}))
    _same(Memory.from_json(path), m)


def test_import_of_a_memory_json_with_a_bad_byte_deep_inside_names_the_byte(tmp_path, capsys):
    data = _store(30).to_json().encode()
    at = data.index(b"i27")
    path = tmp_path / "m.json"
    path.write_bytes(data[:at] + b"\xff" + data[at + 1:])
    assert main(["import", str(path), str(tmp_path / "o.db")]) == 1
    err = capsys.readouterr().err
    assert f"not UTF-8 text (byte 0xff at position {at})" in err and not (tmp_path / "o.db").exists()
    path.write_bytes(data)
    assert main(["import", str(path), str(tmp_path / "o.db")]) == 0
    _same(Memory.load(tmp_path / "o.db"), Memory.from_json(data.decode()))


@pytest.mark.parametrize("count", [True, 2.0, "40", -1])
def test_a_saved_count_of_the_wrong_type_gets_the_whole_documents_error(count):
    """The reader sizes its arrays from ``config.count`` only when it is an int the file could
    hold; any other value is left to the checks, which name it as before (not a numpy error)."""
    doc = json.loads(_store(5).to_json())
    doc["config"]["count"] = count
    text = json.dumps(doc)
    with pytest.raises(MemoryFileError) as whole:
        _whole(text)
    with pytest.raises(MemoryFileError) as streamed:
        Memory.from_json(text)
    w = str(whole.value)   # "w: ..." or "w holds ...": the same words after the document's name
    assert str(streamed.value).startswith("the JSON text") and str(streamed.value).endswith(w[w.index(" "):])


def test_a_nan_in_a_file_is_placed_by_line_and_column():
    """json reports no position for a NaN its parse_constant refuses; the loader's message does."""
    doc = json.loads(_store(3).to_json(indent=1))
    text = json.dumps(doc, indent=1).replace('"n": 2', '"n": NaN', 1)
    line = next(k for k, t in enumerate(text.splitlines(), 1) if "NaN" in t)
    with pytest.raises(MemoryFileError, match=rf"non-finite number NaN at line {line} column \d+\)"):
        Memory.from_json(text)
