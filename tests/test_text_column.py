"""The store's texts as one UTF-8 column (``hypermem.store.text_column``)."""

import copy
import pickle

import pytest

from hypermem.store.text_column import TextColumn

TEXTS = ["dog", "", "čaj s citronem", "日本語のテキスト", "emoji 🐍", "lone \udcff surrogate", "x" * 5000]


def test_every_text_reads_back_equal():
    col = TextColumn(TEXTS)
    assert len(col) == len(TEXTS)
    assert list(col) == TEXTS
    assert [col[i] for i in range(len(TEXTS))] == TEXTS
    assert col[-1] == TEXTS[-1] and col[1:3] == TEXTS[1:3]
    with pytest.raises(IndexError):
        col[len(TEXTS)]
    with pytest.raises(TypeError, match="must be a str"):
        col.append(b"bytes")
    assert len(col) == len(TEXTS)  # the refused append left nothing behind


def test_rewrites_appends_and_take_keep_rows_aligned():
    texts = [f"memory {i}" for i in range(3000)]
    col = TextColumn(texts[:10])
    col.extend(texts[10:])
    for i in range(0, 3000, 2):  # more rewrites than the overlay holds: folded back on the way
        texts[i] = f"rewritten {i} ü"
        col[i] = texts[i]
    col.append("last")
    texts.append("last")
    assert list(col) == texts and col == texts
    rows = [2999, 0, 5, 5, 1234]
    picked = col.take(rows)
    assert list(picked) == [texts[r] for r in rows]
    assert list(col.take([])) == []
    assert col.many(rows + [-1]) == [texts[r] for r in rows] + ["last"]
    col[7] = "in the overlay"  # a rewrite not folded back yet
    assert col.many([7, 6]) == ["in the overlay", texts[6]] and col.many([]) == []
    with pytest.raises(IndexError):
        col.many([len(col)])


def test_keep_from_keeps_a_prefix_and_the_rows_named_in_place():
    texts = [f"memory {i} é" for i in range(500)]
    col = TextColumn(texts)
    col[3], col[200], col[499] = "three", "two hundred", "last one"
    texts[3], texts[200], texts[499] = "three", "two hundred", "last one"
    rows = [r for r in range(120, 500) if r % 3]
    col.keep_from(120, rows)
    want = texts[:120] + [texts[r] for r in rows]
    assert list(col) == want and col.many([3, len(col) - 1]) == ["three", "last one"]
    col.keep_from(len(col), [])                       # nothing after the end: unchanged
    assert list(col) == want
    col.keep_from(0, [])                              # everything removed
    assert list(col) == [] and col.nbytes == 0
    col.append("again")
    assert list(col) == ["again"]


def test_delete_blocks_equals_keeping_the_other_rows_overlay_included():
    import random

    rng = random.Random(1)
    for _ in range(200):
        n = rng.randrange(1, 60)
        texts = [f"x{i} ü" for i in range(n)]
        col = TextColumn(texts)
        for _ in range(rng.randrange(0, 10)):       # rewrites waiting in the overlay
            r = rng.randrange(n)
            texts[r] = col[r] = f"rewritten {r}"
        drop = sorted(rng.sample(range(n), rng.randrange(1, n + 1)))
        blocks = []
        for r in drop:
            blocks = blocks[:-1] + [(blocks[-1][0], r + 1)] if blocks and blocks[-1][1] == r else blocks + [(r, r + 1)]
        col.delete_blocks(blocks)
        gone = set(drop)
        assert list(col) == [t for i, t in enumerate(texts) if i not in gone]


def test_the_column_is_smaller_than_a_list_of_strings():
    import sys
    texts = [f"a note about the kitchen shelf number {i:07d}" for i in range(10_000)]
    as_list = sys.getsizeof(texts) + sum(sys.getsizeof(t) for t in texts)
    assert TextColumn(texts).nbytes < 0.6 * as_list


def test_copies_and_pickles():
    col = TextColumn(TEXTS)
    col[0] = "cat"  # in the overlay
    for other in (copy.deepcopy(col), pickle.loads(pickle.dumps(col))):
        assert list(other) == ["cat", *TEXTS[1:]]
        other.append("new")
        assert len(col) == len(TEXTS)


def test_a_store_reads_its_texts_from_the_column():
    from hypermem import Memory
    m = Memory()
    a = m.add("première note")
    b = m.add("second", parent=a)
    m.update(a, text="first note, edited")
    assert isinstance(m.state.records.texts, TextColumn)
    assert m.get(a).text == "first note, edited" and m.get(b).text == "second"
    m.update(b, text="second, edited twice")
    assert m.search("edited twice", k=1, hybrid=1.0)[0].record.text == "second, edited twice"
    m.link(b, None)
    m.remove(a)
    assert [r.text for r in m.state.records.values()] == ["second, edited twice"]
    assert m.search("second", k=1, hybrid=1.0)[0].record.text == "second, edited twice"
