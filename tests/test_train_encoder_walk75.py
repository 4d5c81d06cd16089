"""`average` (a moving average of the weights) and `aliases` (other names as training variants)
in the YAML path of a hierarchy encoder (walk 75): the same meaning as
``fit_hierarchy_encoder(average=..., aliases=...)``, off by default, exact resume with the average
in the checkpoint, and one-line config errors for bad values and bad alias files."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("sentence_transformers")
pytest.importorskip("lightning")

from encoder_helpers import EDGES, tiny_model_folder  # noqa: E402
from test_train_encoder import _args as _encoder_args  # noqa: E402

from hypermem.train.hierarchy_cli import main  # noqa: E402


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("enc-walk75")
    model = tiny_model_folder(root / "m")
    (root / "edges.tsv").write_text("".join(f"{c}\t{p}\n" for c, p in EDGES))   # as test_train_encoder's
    (root / "aliases.tsv").write_text("id\talias\ndog\tdomestic dog\ndog\thound\tpooch\ncat\tfeline\nowl\towlet\n")
    (root / "exp.yaml").write_text("model: {average: 0.9, alias_rate: 1.0}\ndata: {aliases: aliases.tsv}\n")
    return root, model


def _args(root, model, name, epochs, *extra):
    return _encoder_args(root, model, name, epochs, "--trainer.enable_progress_bar=false", *extra)


def _last(root, name):
    return torch.load(root / "runs" / name / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)


def test_average_and_aliases_from_yaml_train_and_resume_exactly(setup):
    root, model = setup
    exp = ("--config", str(root / "exp.yaml"))   # aliases.tsv read beside exp.yaml
    main(_args(root, model, "avg", 2, *exp))
    main(_args(root, model, "avg-parts", 1, *exp))
    main(_args(root, model, "avg-parts", 2, *exp, "--ckpt_path=last"))
    main(_args(root, model, "plain", 2))
    a, b, plain = _last(root, "avg"), _last(root, "avg-parts"), _last(root, "plain")
    assert a["global_step"] == b["global_step"] > 0
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, rtol=0, atol=0, msg=k)
    # the average is saved, restored on resume (the same after the resumed part) and is not the weights
    avg_a, avg_b = a["hypermem_encoder_average"], b["hypermem_encoder_average"]
    assert avg_a["steps"] == avg_b["steps"] == a["global_step"] and avg_a["decay"] == 0.9
    assert set(avg_a["shadow"]) and set(avg_a["shadow"]) <= {k[len("model."):] for k in a["state_dict"]}
    for k, v in avg_a["shadow"].items():
        torch.testing.assert_close(avg_b["shadow"][k], v, rtol=0, atol=0, msg=k)
    assert any(not torch.equal(v, a["state_dict"]["model." + k]) for k, v in avg_a["shadow"].items())
    # both the weights and their average are validated; the validation records which scored
    assert "averaged" in a["hypermem_encoder_validation"]
    # aliases at alias_rate 1.0 change what trains; without either setting none of it is there
    assert any(not torch.equal(v, plain["state_dict"][k]) for k, v in a["state_dict"].items())
    assert "hypermem_encoder_average" not in plain


def test_the_exported_encoder_holds_the_average_when_it_scored_best(setup):
    from hypermem.embed.hierarchy_encoder import HierarchyEncoder

    root, _ = setup
    run = root / "runs" / "avg" / "version_0"
    enc = HierarchyEncoder.load(run / "encoder")
    best = torch.load(next((run / "checkpoints").glob("best-step=*.ckpt")), map_location="cpu", weights_only=True)
    own = best["hypermem_encoder_validation"]
    source = ({k: v for k, v in best["hypermem_encoder_average"]["shadow"].items()} if own["averaged"]
              else {})
    for k, v in enc.model.state_dict().items():
        want = source.get(k, best["state_dict"]["model." + k])
        torch.testing.assert_close(v, want, rtol=0, atol=0, msg=k)
    assert enc.metrics["val_averaged"] == own["averaged"] and enc.threshold == own["threshold"]


@pytest.mark.parametrize(("option", "message"), [
    ("--model.average=1.5", "error: model.average must be 0 (off) or a decay between 0 and 1, got 1.5"),
    ("--model.alias_rate=2", "error: model.alias_rate must be a number between 0 and 1, got 2.0"),
])
def test_bad_values_are_one_config_error(setup, capsys, option, message):
    root, model = setup
    with pytest.raises(SystemExit) as exc:
        main(_args(root, model, "bad", 1, option))
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == message


@pytest.mark.parametrize(("name", "text", "why"), [
    ("a.tsv", "dog\tdomestic dog\ncat\n", ":2: every line needs an id and at least one alias, tab-separated"),
    ("b.tsv", "dog\tdomestic dog\nunicorn\thorse with a horn\n", ":2: the id 'unicorn' has no name in the hierarchy"),
    ("c.tsv", "dog\t  \n", ":1: a blank alias"),
    ("d.jsonl", '{"id": "dog", "aliases": ["hound", 3]}\n', ":1: field 'aliases' must be a list of non-empty strings"),
    ("e.jsonl", '{"id": "dog", "names": ["hound"]}\n', ":1: missing field 'aliases'"),
    ("f.jsonl", "[1, 2]\n", ":1: expected a JSON object"),
    ("g.jsonl", '{"id": "dog", "aliases": ["hound"\n', ":1: not valid JSON"),
])
def test_a_bad_aliases_file_names_the_file_and_line(setup, tmp_path, capsys, name, text, why):
    root, model = setup
    (tmp_path / name).write_text(text)
    with pytest.raises(SystemExit) as exc:
        main(_args(root, model, "bad", 1, f"--data.aliases={tmp_path / name}"))
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()[0]
    assert err.startswith(f"error: data.aliases: {tmp_path / name}{why}"), err


def test_a_jsonl_aliases_file_reads_like_the_tsv(tmp_path):
    from hypermem.train.encoder_data import read_aliases

    (tmp_path / "a.jsonl").write_text(json.dumps({"id": "dog", "aliases": ["hound", "pooch"]}) + "\n"
                                      + json.dumps({"id": "dog", "alias": "domestic dog"}) + "\n")
    (tmp_path / "a.tsv").write_text("dog\thound\tpooch\ndog\tdomestic dog\n")
    assert read_aliases(tmp_path / "a.jsonl") == read_aliases(tmp_path / "a.tsv") == {
        "dog": ["hound", "pooch", "domestic dog"]}
