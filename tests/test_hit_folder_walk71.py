"""HierarchyEncoder folders as a HiT user meets them: the folder's own max length, no default
prompt, float32 whatever config.json says, every refusal an EncoderFolderError, a single string
refused like encode's, and saving over a folder drops the earlier save's module folders."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

st = pytest.importorskip("sentence_transformers")

from encoder_helpers import tiny_model_folder  # noqa: E402

from hypermem.embed.encoder_folder import EncoderFolderError  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402

torch.set_num_threads(1)
LONG = ("retriever: a dog with a water-resistant coat, bred to retrieve game shot by hunters, often kept as "
        "a family companion and used as a guide dog for the blind")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_model_folder(tmp_path_factory.mktemp("tiny"))


def _edit(path, **fields):
    raw = json.loads(path.read_text())
    raw.update(fields)
    path.write_text(json.dumps(raw))


def _hit_folder(tiny, tmp_path, name="hit", max_length=64):
    """A folder in HiT's layout (no hypermem_encoder.json) whose tokenizer keeps ``max_length`` tokens."""
    folder = tmp_path / name
    shutil.copytree(tiny, folder)
    _edit(folder / "tokenizer_config.json", model_max_length=max_length)
    return folder


def test_a_hit_folder_keeps_its_own_max_length(tiny, tmp_path):
    folder = _hit_folder(tiny, tmp_path)
    enc = HierarchyEncoder.load(folder)
    assert enc.max_length == 64
    assert len(enc.model.tokenizer(LONG)["input_ids"]) > 32
    theirs = st.SentenceTransformer(str(folder), device="cpu").encode([LONG, "dog"], convert_to_tensor=True)
    torch.testing.assert_close(enc.encode([LONG, "dog"]), theirs, rtol=1e-5, atol=1e-5)
    enc.model.eval()   # the training path without dropout
    torch.testing.assert_close(enc.forward_features(enc.tokenize([LONG])).detach(), theirs[:1], rtol=1e-5, atol=1e-5)
    back = HierarchyEncoder.load(enc.save(tmp_path / "saved"))
    assert back.max_length == 64
    assert json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())["model_max_length"] == 64


def test_a_hit_folder_max_length_is_capped_by_the_positions(tiny, tmp_path):
    folder = _hit_folder(tiny, tmp_path, max_length=10 ** 30)   # transformers' "no limit"
    assert HierarchyEncoder.load(folder).max_length == 64        # config.json's max_position_embeddings


def test_a_default_prompt_is_refused_naming_file_and_field(tiny, tmp_path):
    folder = _hit_folder(tiny, tmp_path)
    conf = folder / "config_sentence_transformers.json"
    _edit(conf, prompts={"query": "query: "}, default_prompt_name="query")
    with pytest.raises(EncoderFolderError, match=r"config_sentence_transformers\.json.*'default_prompt_name'"):
        HierarchyEncoder.load(folder)
    _edit(conf, default_prompt_name=None)   # prompts that nothing applies by default are harmless
    enc = HierarchyEncoder.load(folder)
    x = enc.encode(["dog"])
    enc.model.eval()   # the training path without dropout
    torch.testing.assert_close(x, enc.forward_features(enc.tokenize(["dog"])).detach())


@pytest.mark.parametrize("key", ["dtype", "torch_dtype"])
def test_a_bfloat16_config_still_loads_in_float32(tiny, tmp_path, key):
    ref = HierarchyEncoder.load(_hit_folder(tiny, tmp_path, "ref")).encode(["golden retriever", LONG])
    folder = _hit_folder(tiny, tmp_path)
    _edit(folder / "config.json", **{key: "bfloat16"})
    for enc in (HierarchyEncoder.load(folder), HierarchyEncoder.from_pretrained(str(folder), max_length=64)):
        assert {p.dtype for p in enc.model.parameters()} == {torch.float32}
        torch.testing.assert_close(enc.encode(["golden retriever", LONG]), ref, rtol=1e-5, atol=1e-5)


def test_a_symlink_loop_is_an_encoder_folder_error(tiny, tmp_path):
    folder = _hit_folder(tiny, tmp_path)
    os.symlink("loop", folder / "loop")
    with pytest.raises(EncoderFolderError, match="loop"):
        HierarchyEncoder.load(folder)


@pytest.mark.parametrize("fields, match", [
    ({"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}}, "quantization_config"),
    ({"layer_norm_eps": "x"}, "does not load"),
])
def test_config_json_loading_options_and_bad_values_are_encoder_folder_errors(tiny, tmp_path, fields, match):
    folder = _hit_folder(tiny, tmp_path)
    _edit(folder / "config.json", **fields)
    with pytest.raises(EncoderFolderError, match=match):
        HierarchyEncoder.load(folder)


def test_a_single_string_is_refused_as_encode_refuses_it(tiny):
    enc = HierarchyEncoder.from_pretrained(str(tiny))
    with pytest.raises(TypeError, match="expected a list of texts, got a single string") as scores:
        enc.subsumption_scores("dog", "animal")
    with pytest.raises(TypeError) as encode:
        enc.encode("dog")
    assert str(scores.value) == str(encode.value)
    with pytest.raises(TypeError, match="single string"):
        enc.subsumption_scores(["dog"], "animal")


def test_saving_over_a_folder_drops_the_earlier_saves_module_folders(tiny, tmp_path):
    folder = tmp_path / "e"
    HierarchyEncoder.from_pretrained(str(tiny), dim=5).save(folder)
    assert (folder / "2_Dense" / "model.safetensors").is_file()
    plain = HierarchyEncoder.from_pretrained(str(tiny))
    plain.save(folder)
    assert not (folder / "2_Dense").exists() and (folder / "1_Pooling" / "config.json").is_file()
    assert HierarchyEncoder.load(folder).dim == plain.dim
    HierarchyEncoder.from_pretrained(str(tiny), dim=5).save(folder)
    (folder / "2_Dense" / "notes.txt").write_text("mine")   # a file no save wrote stays, with its folder
    plain.save(folder)
    assert sorted(p.name for p in (folder / "2_Dense").iterdir()) == ["notes.txt"]
