"""A user's walk through ``hypermem train`` (report F2): CJK node names in the disk picture,
a resume from another run's checkpoint, ``validate`` after ``fit``, the finish on a terminal."""

import warnings

import pytest
from train_helpers import CONFIG, run_train

pytest.importorskip("lightning")

CJK = [("犬", "動物"), ("猫", "動物"), ("日本犬", "犬"), ("柴犬", "日本犬")]


def write_run(tmp_path, edges=CJK, config=CONFIG):
    (tmp_path / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in edges), encoding="utf-8")
    (tmp_path / "tiny.yaml").write_text(config)


def test_cjk_names_in_the_disk_picture_give_one_note_not_a_warning_per_glyph(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from hypermem.viz.fonts import label_fonts

    write_run(tmp_path)
    families, missing = label_fonts([c for pair in CJK for c in pair])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--model.log_images=true", "--trainer.max_epochs=2"])
    glyphs = [str(w.message) for w in seen if "missing from font" in str(w.message)]
    assert glyphs == []
    notes = [line for line in capsys.readouterr().err.splitlines() if "no glyph" in line]
    if missing:   # no installed font has them (the usual CI machine): one line, for the two validations
        assert len(notes) == 1 and "show boxes" in notes[0] and "犬" in notes[0], notes
    else:         # an installed font has them: it is used, and nothing is said
        assert families and notes == []


def test_label_fonts_names_the_characters_no_font_has():
    pytest.importorskip("matplotlib")
    from hypermem.viz.fonts import label_fonts, missing_glyphs

    assert label_fonts(["dog", "Électronique"]) == (None, "")
    assert missing_glyphs(["a\U0010fffdb"]) == "\U0010fffd"   # a private-use code point: in no font
    assert label_fonts(["x\U0010fffd"]) == (None, "\U0010fffd")
