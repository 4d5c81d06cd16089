"""to_json builds its text a record at a time (json_chunks): the same text as json.dumps of the
whole document, for every indent, empty and non-empty stores, float32 and float64, and without
the whole store's vectors as Python floats at once."""

from __future__ import annotations

import json
import tracemalloc

import pytest
import torch

from hypermem import HashingEmbedder, Memory
from hypermem.store.persistence import json_chunks, to_json, to_payload


def _store(n, dtype=torch.float64, dim=16):
    m = Memory(embedder=HashingEmbedder(dim=dim), dtype=dtype)
    for i in range(n):
        m.add(f'text {i} "quoted"\nsecond line', id=f"i{i}", parent=None if i == 0 else "i0",
              meta={"a": [1, {"b": None}], "ü": "x", "n": i})
    return m


@pytest.mark.parametrize("n", [0, 1, 4])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("indent", [None, 0, 2])
def test_the_text_is_json_dumps_of_the_document(n, dtype, indent):
    m = _store(n, dtype)
    want = json.dumps(to_payload(m), indent=indent, allow_nan=False)
    assert to_json(m, indent=indent) == want == "".join(json_chunks(m, indent))
    assert Memory.from_json(want).ids == m.ids


def test_the_peak_is_well_below_the_whole_store_as_python_floats():
    m = _store(1500, dim=256)
    tracemalloc.start()
    text = to_json(m)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    floats = 3 * 1500 * 256 * (24 + 8)   # points, embeddings, directions as Python floats in lists
    assert peak < len(text) * 2 + floats / 4, (peak, len(text))


def test_export_writes_the_chunks_as_they_come(tmp_path, capsys):
    from hypermem.cli.outputs import write_text
    m = _store(3)
    write_text(str(tmp_path / "m.json"), json_chunks(m, 2))
    assert (tmp_path / "m.json").read_text(encoding="utf-8") == to_json(m, indent=2)
    write_text("-", json_chunks(m))
    assert capsys.readouterr().out == to_json(m)

    def broken():
        yield "{"
        raise ValueError("cut")
    (tmp_path / "m.json").write_text("old", encoding="utf-8")
    with pytest.raises(ValueError, match="cut"):
        write_text(str(tmp_path / "m.json"), broken())
    assert (tmp_path / "m.json").read_text(encoding="utf-8") == "old"   # atomic: the old file stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]
