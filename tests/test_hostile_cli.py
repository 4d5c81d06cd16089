"""``hypermem import`` (and the commands that read memory files) against hostile input: one
line naming the file, no traceback, nothing written; options are never read by truthiness."""

import json

import pytest
from hostile_helpers import deep_json, folder_state

from hypermem import HalfLife, Memory
from hypermem.cli import main


def fails(capsys, *argv, code=1) -> str:
    """Run a command that must fail with one line on stderr (no traceback); returns it."""
    try:
        got = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: bad options
        got = exc.code
    _, err = capsys.readouterr()
    assert got == code and "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def items(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text('{"text": "animals", "id": "a"}\n{"text": "dogs", "parent": "a"}\n')
    return path


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-0.0", "abc"])
def test_half_life_must_be_a_positive_number(capsys, items, tmp_path, value):
    line = fails(capsys, "import", items, tmp_path / "o.db", f"--half-life={value}", code=2)
    assert "--half-life" in line
    assert not (tmp_path / "o.db").exists()


@pytest.mark.parametrize("value,hours", [("0.5", 0.5), ("1e-3", 1e-3), ("72", 72.0)])
def test_small_half_lives_are_used_not_dropped(capsys, items, tmp_path, value, hours):
    assert main(["import", str(items), str(tmp_path / "o.db"), "--half-life", value]) == 0
    assert Memory.load(tmp_path / "o.db").decay == HalfLife(hours)
    assert main(["import", str(items), str(tmp_path / "n.db")]) == 0
    assert Memory.load(tmp_path / "n.db").decay == Memory().decay  # no option: no decay


@pytest.mark.parametrize("data,what", [
    (b"\xff\xfe{\"text\": \"a\"}\n", "byte 0xff at position 0"),
    ('{"text": "caf\u00e9"}\n'.encode("latin-1"), "byte 0xe9 at position 13"),
    ('{"text": "a"}'.encode("utf-16"), "byte 0xff at position 0"),
])
def test_non_utf8_input_names_the_file(capsys, tmp_path, data, what):
    src = tmp_path / "in.jsonl"
    src.write_bytes(data)
    line = fails(capsys, "import", src, tmp_path / "o.db")
    assert str(src) in line and "not UTF-8" in line and what in line
    memory_json = tmp_path / "m.json"
    memory_json.write_bytes(data)
    line = fails(capsys, "stats", memory_json)
    assert str(memory_json) in line and "not UTF-8" in line


@pytest.mark.parametrize("text,what", [
    (deep_json(100_000), "too deep"),
    ('{"config": ' + deep_json(100_000) + ', "records": []}', "too deep"),
    ('{"text": "x", "meta": {"a": ' + deep_json(150) + "}}\n", "nests deeper than 100"),
    ('{"text": "x", "meta": ' + deep_json(100_000, '{"a": ', "}") + "}\n", "too deep"),
    ("[1, 2]", "item #0 is not an object"),
    ('{"text": 5}\n', "line 1"),
    ('{"text": "x", "meta": {"v": NaN}}\n', "line 1"),
    ('{"text": "x", "parent": "nobody"}\n', "nobody"),
])
def test_bad_imports_are_one_line_and_write_nothing(capsys, tmp_path, text, what):
    src = tmp_path / "in.json"
    src.write_text(text)
    old = tmp_path / "o.db"
    Memory().save(old)
    before = folder_state(tmp_path)
    line = fails(capsys, "import", src, old, "--force")
    assert what in line and str(src) in line
    assert folder_state(tmp_path) == before  # the old output is untouched, no stray files


def test_a_sqlite_file_or_a_folder_as_source(capsys, tmp_path):
    Memory().save(tmp_path / "m.db")
    assert "is a SQLite file" in fails(capsys, "import", tmp_path / "m.db", tmp_path / "o.db")
    assert "is a folder" in fails(capsys, "import", tmp_path, tmp_path / "o.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]


def test_hostile_memory_files_for_the_reading_commands(capsys, tmp_path):
    doc = json.loads(Memory().to_json())
    doc["config"]["dim"] = 2**40
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for command in (["stats", bad], ["tree", bad], ["search", bad, "x"], ["export", bad, tmp_path / "o.csv"]):
        line = fails(capsys, *command)
        assert "bad memory file" in line and "config dim" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]


def test_times_outside_the_datetime_range_are_one_line(capsys, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a", "t": "0001-01-01T00:00:00+14:00"}\n')
    assert "outside the datetime range" in fails(capsys, "import", src, tmp_path / "o.db")
    Memory().save(tmp_path / "m.db")
    line = fails(capsys, "search", tmp_path / "m.db", "x", "--at", "9999-12-31T23:59:59-14:00", code=2)
    assert "--at" in line and "outside the datetime range" in line


def test_byte_order_mark_and_devices(capsys, tmp_path):
    src = tmp_path / "bom.jsonl"
    src.write_bytes(b'\xef\xbb\xbf{"text": "a"}\n')
    assert main(["import", str(src), str(tmp_path / "o.db")]) == 0
    assert len(Memory.load(tmp_path / "o.db")) == 1
    capsys.readouterr()
    assert "is a device" in fails(capsys, "import", "/dev/zero", tmp_path / "z.db")
