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


def run_in_pty(cwd, argv: list[str], timeout: float = 240) -> str:
    """``hypermem.train`` with ``argv`` in a child process whose stdout and stderr are a terminal
    (a pseudo-terminal): what the terminal received."""
    import os
    import pty
    import select
    import subprocess
    import sys

    main_fd, child_fd = pty.openpty()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "hypermem.train", *argv], cwd=cwd, stdin=child_fd,
                            stdout=child_fd, stderr=child_fd, env=env, close_fds=True)
    os.close(child_fd)
    out = b""
    try:
        while True:
            ready, _, _ = select.select([main_fd], [], [], timeout)
            if not ready:
                proc.kill()
                break
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:   # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(main_fd)
        proc.wait(timeout=30)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_on_a_terminal_the_summary_comes_after_the_progress_bar_is_closed(tmp_path):
    """The rich progress bar's last frame is drawn once, before the ``done`` / ``logs`` lines,
    not again after them (the summary used to be printed while the live bar was still up)."""
    pytest.importorskip("rich")
    write_run(tmp_path)
    out = run_in_pty(tmp_path, ["fit", "--config", "tiny.yaml", "--trainer.enable_progress_bar=true",
                                "--trainer.max_epochs=2"])
    assert "Epoch 2/2" in out or "Epoch 1/1" in out, out[-2000:]
    head, sep, tail = out.rpartition("done: 2 epochs")
    assert sep and "Epoch" in head
    assert "logs: runs/tiny/version_0" in tail
    assert "Epoch" not in tail, tail   # no bar frame after the summary


def test_a_fit_resumed_from_a_file_elsewhere_says_so_in_one_line(tmp_path, capsys):
    """``fit --ckpt_path=FILE`` of a file outside the run's folders starts a new version with one
    note, printed once the resume was accepted, not Lightning's raw ``dirpath has changed``."""
    import shutil

    write_run(tmp_path)
    base = ["fit", "--config", "tiny.yaml", "--model.schedule_epochs=4"]
    run_train(tmp_path, [*base, "--trainer.max_epochs=2"])
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(tmp_path / "runs/tiny/version_0/checkpoints/last.ckpt", tmp_path / "elsewhere/x.ckpt")
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        cli = run_train(tmp_path, [*base, "--trainer.max_epochs=3", "--ckpt_path=elsewhere/x.ckpt"])
    assert cli.trainer.log_dir == "runs/tiny/version_1" and cli.trainer.global_step > 0
    assert not [w for w in seen if "dirpath has changed" in str(w.message)]
    out = capsys.readouterr()
    assert "dirpath has changed" not in out.out + out.err
    notes = [line for line in out.err.splitlines() if "resumed elsewhere/x.ckpt" in line]
    assert len(notes) == 1 and "runs/tiny/version_1/checkpoints" in notes[0], out.err
    # a file of the run's own folder says nothing
    run_train(tmp_path, [*base, "--trainer.max_epochs=4", "--ckpt_path=last"])
    assert "resumed" not in capsys.readouterr().err


def test_validate_adds_no_point_to_the_fits_run_and_says_the_epoch_as_the_fit(tmp_path, capsys):
    """After a fit, ``validate --ckpt_path=last`` twice and ``=best`` once: the fit's event files
    keep one ``val/map`` point per validation of the fit; each checkpoint's validate has its own
    TensorBoard run (``validate-last``) with one point, at the checkpoint's step, however often it
    is run; no "Embedding dir exists" line; the epoch is counted from 1, as the fit prints it."""
    from train_helpers import scalars

    write_run(tmp_path, config=CONFIG.replace("log_projector: false", "log_projector: true"))
    fit = run_train(tmp_path, ["fit", "--config", "tiny.yaml", "--trainer.max_epochs=3"])
    run = tmp_path / fit.trainer.log_dir
    fit_points = scalars(run, "val/map")
    last = fit.trainer.global_step
    capsys.readouterr()
    for ckpt in ("last", "last", "best"):
        val = run_train(tmp_path, ["validate", "--config", "tiny.yaml", f"--ckpt_path={ckpt}"])
        assert "epoch" not in val.trainer.callback_metrics   # Lightning's 0-based epoch is not in the table
    out = capsys.readouterr()
    assert "Embedding dir exists" not in out.out + out.err
    assert f"last.ckpt (epoch 3, step {last}); logs: runs/tiny/version_0/validate-last" in out.out
    assert scalars(run, "val/map") == fit_points
    assert [s for s, _ in scalars(run / "validate-last", "val/map")] == [last]
    (best,) = [p for p in run.iterdir() if p.name.startswith("validate-best-")]
    assert len(scalars(best, "val/map")) == 1
