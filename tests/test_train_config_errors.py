"""A bad value in a second ``--config`` file (a user's ``my.yaml`` over a shipped config) is one
line naming the setting, the file and what is accepted (the parser's errors: and a tip line), with
status 2, for both trainers."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("lightning")

from train_helpers import run_train  # noqa: E402

BROKEN = ("error: my.yaml: not valid YAML at line 2, column 1: expected ',' or ']', but got '<stream end>' "
          "(while parsing a flow sequence started at line 1, column 14)")
MAX_TIME = ('is not a duration (set in my.yaml); give "DD:HH:MM:SS" (e.g. "00:00:05:00" for 5 minutes) or a '
            "mapping such as {minutes: 5} (days, hours, minutes, seconds)")
# (my.yaml, options after it, the error line); the same for both trainers unless marked
CASES = {
    "wrong type": ("model: {dim: three}", [], "error: model.dim: expected an integer{null}, got 'three' (set in my.yaml)"),
    "broken yaml": ("model: {dim: [3\n", [], BROKEN),
    "batch_size": ("data: {batch_size: 0}", [], "error: data.batch_size must be {batch}, got 0 (set in my.yaml)"),
    "lr": ("model: {lr: -1}", [], "error: model.lr must be a finite positive number, got -1.0 (set in my.yaml)"),
    "max_time": ('trainer: {max_time: "5 minutes"}', [], f"error: trainer.max_time: '5 minutes' {MAX_TIME}"),
    "max_time keys": ("trainer: {max_time: {minuts: 5}}", [], f"error: trainer.max_time: {{'minuts': 5}} {MAX_TIME}"),
    # the command line sets it after the file: no file to name
    "command line": ("model: {lr: -1}", ["--model.lr=-2"], "error: model.lr must be a finite positive number, got -2.0"),
    "wrong type on the command line": ("trainer: {max_epochs: 1}", ["--model.dim=three"], "error: model.dim: expected an integer{null}, got 'three'"),
}
PARSER_ERRORS = {"wrong type", "broken yaml", "wrong type on the command line"}
ENCODER = {"null": " or null", "batch": "at least 2"}      # dim: null is the base's width
HIERARCHY = {"null": "", "batch": "a positive integer"}


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory):
    """A folder with a tiny base model and a user's config over its own edges and names files."""
    pytest.importorskip("sentence_transformers")
    from encoder_helpers import EDGES, NAMES, tiny_model_folder

    tmp = tmp_path_factory.mktemp("enc")
    (tmp / "edges.jsonl").write_text("".join(json.dumps({"child": c, "parent": p}) + "\n" for c, p in EDGES))
    (tmp / "names.jsonl").write_text("".join(json.dumps({"id": i, "name": t}) + "\n" for i, t in sorted(NAMES.items())))
    (tmp / "base.yaml").write_text(f"model: {{base: {tiny_model_folder(tmp / 'm')}}}\n"
                                   "data: {hierarchy: files, edges: edges.jsonl, names: names.jsonl, task: none, "
                                   "batch_size: 8}\ntrainer: {max_epochs: 1}\n")
    return tmp


def fill(line: str, words: dict) -> str:
    for key, word in words.items():
        line = line.replace("{" + key + "}", word)
    return line


def refused(folder, capsys, argv, parser_error: bool) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        run_train(folder, ["fit", *argv])
    assert exc.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")]
    if parser_error:   # and how to list the options
        assert err[1:] == ["tip: `python -m hypermem.train fit --help` lists every option"], err
    else:
        assert len(err) == 1, err
    assert not list(folder.glob("runs/*/version_*")), "a failed start leaves no version folder"
    return err[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_hierarchy_config_errors_name_the_setting_and_the_file(tmp_path, capsys, case):
    text, after, line = CASES[case]
    (tmp_path / "my.yaml").write_text(text)
    err = refused(tmp_path, capsys, ["--config", "mammals_poincare", "--config", "my.yaml", *after],
                  case in PARSER_ERRORS)
    assert err == fill(line, HIERARCHY)


@pytest.mark.parametrize("case", sorted(CASES))
def test_encoder_config_errors_name_the_setting_and_the_file(encoder_folder, capsys, case):
    text, after, line = CASES[case]
    (encoder_folder / "my.yaml").write_text(text)
    err = refused(encoder_folder, capsys,
                  ["--config", "wordnet_encoder", "--config", "base.yaml", "--config", "my.yaml", *after],
                  case in PARSER_ERRORS)
    assert err == fill(line, ENCODER)


def test_a_module_refusal_names_the_option_when_built_in_python():
    from hypermem.train.hierarchy_data import HierarchyDataModule
    from hypermem.train.hierarchy_module import HierarchyModule

    with pytest.raises(ValueError, match=r"^lr \(--model.lr\) must be a finite positive number, got nan$"):
        HierarchyModule(lr=float("nan"))
    with pytest.raises(ValueError, match=r"^negatives \(--data.negatives\) must be a positive integer, got 0$"):
        HierarchyDataModule(negatives=0)


@pytest.mark.parametrize("where", ["file", "command line"])
def test_a_base_model_that_does_not_load_offline_is_a_config_error(encoder_folder, capsys, where):
    """Not a traceback or status 1: one ``error:`` line naming the setting (and its file), status 2."""
    (encoder_folder / "my.yaml").write_text("model: {base: bert-base-uncased}" if where == "file" else "{}")
    after = [] if where == "file" else ["--model.base=bert-base-uncased"]
    err = refused(encoder_folder, capsys,
                  ["--config", "wordnet_encoder", "--config", "base.yaml", "--config", "my.yaml", *after], False)
    set_in = " (set in my.yaml)" if where == "file" else ""
    assert err.startswith(f"error: model.base='bert-base-uncased'{set_in}: no such folder and no model of that "
                          "name in the local Hugging Face cache, and nothing is downloaded at run time"), err


def test_a_data_file_error_names_the_file_read_and_its_role(encoder_folder, capsys):
    """A relative ``--data.edges`` is read from the working folder (a file of that name beside the
    YAML is not it): the error says which, by absolute path, and which role each file plays."""
    exp = encoder_folder / "exp"
    exp.mkdir(exist_ok=True)
    (encoder_folder / "both.tsv").write_text("a\ta\n")          # read: the working folder's
    (exp / "both.tsv").write_text("b\tc\n")
    (encoder_folder / "plain.tsv").write_text("x\ty\nz\ty\n")
    (exp / "names.tsv").write_text("x\tan x\n")
    (exp / "mime.yaml").write_text("data: {names: names.tsv}\n")
    first = ["--config", "wordnet_encoder", "--config", "base.yaml", "--config", "exp/mime.yaml"]
    err = refused(encoder_folder, capsys, [*first, "--data.edges=both.tsv"], False)
    assert err == f"error: data.edges file {encoder_folder / 'both.tsv'}:1: 'a' is its own parent (a self-loop)"
    err = refused(encoder_folder, capsys, [*first, "--data.edges=plain.tsv"], False)
    assert err == (f"error: data.names file {exp / 'names.tsv'}: no name for 2 entities of the edges file "
                   f"{encoder_folder / 'plain.tsv'}, e.g. ['y', 'z'] (set in exp/mime.yaml)")
