"""Received encoder / reranker folders: each hostile change is refused by name before it loads
(pickle, weights that do not match config.json, deep JSON, symlinks out, non-regular files,
module configs, results.tsv, out-of-range settings), and a store's checksum sees the
pooling and tokenizer."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

pytest.importorskip("sentence_transformers")

from encoder_helpers import tiny_model_folder  # noqa: E402

from hypermem.embed.encoder_folder import EncoderFolderError  # noqa: E402
from hypermem.embed.hierarchy_encoder import HierarchyEncoder  # noqa: E402
from hypermem.embed.reranker import PlacementReranker, RerankerFolderError  # noqa: E402

torch.set_num_threads(1)
H = "hypermem_encoder.json"
DEEP = "[" * 300000 + "]" * 300000


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One tiny model saved as a hierarchy encoder, one with a Dense head, and a reranker."""
    root = tmp_path_factory.mktemp("saved")
    tiny = tiny_model_folder(root)
    HierarchyEncoder.from_pretrained(str(tiny), "poincare", max_length=16).save(root / "ball")
    HierarchyEncoder.from_pretrained(str(tiny), "poincare", max_length=16, dim=8).save(root / "dense")
    PlacementReranker(str(tiny), max_length=32).save(root / "rr")
    return {"tiny": tiny, "enc": root / "ball", "dense": root / "dense", "rr": root / "rr"}


def _part(name: str, key: str):
    @pytest.fixture(name=name)
    def part(saved):
        return saved[key]
    return part


tiny_part, enc_part, dense_part, rr_part = (_part(n, k) for n, k in (("tiny", "tiny"), ("enc_dir", "enc"),
                                                                      ("dense_dir", "dense"), ("rr_dir", "rr")))


def copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "received"
    shutil.copytree(src, dst, symlinks=True)
    return dst


def edit(path: Path, **fields) -> None:
    raw = json.loads(path.read_text())
    raw.update(fields)
    path.write_text(json.dumps(raw))


def drop_tensors(path: Path, part: str) -> None:
    from safetensors.torch import load_file, save_file

    d = load_file(path)
    save_file({k: v for k, v in d.items() if part not in k}, path)


def refused(folder: Path, match: str, load=HierarchyEncoder.load, error=EncoderFolderError) -> str:
    with pytest.raises(error, match=match) as info:
        load(folder)
    return str(info.value)


def test_the_untouched_folders_load(enc_dir, dense_dir, rr_dir):
    assert HierarchyEncoder.load(enc_dir).dim == 32 and HierarchyEncoder.load(dense_dir).dim == 8
    assert PlacementReranker.load(rr_dir).max_length == 32


# D2: pickle anywhere
@pytest.mark.parametrize("where", ["pytorch_model.bin", "sub/weights.pt", "1_Pooling/x.ckpt"])
def test_a_pickle_file_anywhere_is_refused_by_name(enc_dir, tmp_path, where):
    f = copy(enc_dir, tmp_path)
    (f / where).parent.mkdir(parents=True, exist_ok=True)
    torch.save({"w": torch.zeros(1)}, f / where)
    refused(f, rf"{where.split('/')[-1]}: a pickle file")


def test_pickle_weights_with_a_stray_safetensors_are_refused(enc_dir, tmp_path):
    f = copy(enc_dir, tmp_path)
    (f / "model.safetensors").rename(f / "keep")
    (f / "zz.safetensors").write_bytes(b"")
    (f / "keep").unlink()
    refused(f, r"has no model.safetensors")


def test_a_dense_head_beside_pickled_weights_is_refused(dense_dir, tmp_path):
    f = copy(dense_dir, tmp_path)
    torch.save({}, f / "2_Dense" / "pytorch_model.bin")
    refused(f, r"2_Dense/pytorch_model.bin: a pickle file")


# D3: the weights must be the model's
def test_missing_or_extra_layers_and_another_model_type_are_refused(enc_dir, tmp_path):
    f = copy(enc_dir, tmp_path)
    drop_tensors(f / "model.safetensors", "layer.1.")
    refused(f, r"config.json: field 'num_hidden_layers' is 2 but model.safetensors holds 1 layers")
    shutil.rmtree(f)
    f = copy(enc_dir, tmp_path)
    drop_tensors(f / "model.safetensors", "layer.1.attention.self.query.weight")
    refused(f, r"model.safetensors: lacks the tensors \['encoder.layer.1.attention.self.query.weight'\]")
    shutil.rmtree(f)
    f = copy(enc_dir, tmp_path)
    edit(f / "config.json", num_hidden_layers=100000)   # would build 100000 random layers
    refused(f, r"'num_hidden_layers' is 100000 but model.safetensors holds 2 layers")
    edit(f / "config.json", num_hidden_layers=2, model_type="gpt2")
    refused(f, r"model.safetensors: lacks the tensors \['h.0")
    edit(f / "config.json", model_type="bert", hidden_size=-32)
    refused(f, r"config.json: field 'hidden_size' must be an integer")


def test_a_cross_encoder_without_its_head_is_refused(rr_dir, tmp_path):
    f = copy(rr_dir, tmp_path)
    drop_tensors(f / "model.safetensors", "classifier")
    refused(f, r"lacks the tensors \['classifier.bias', 'classifier.weight'\]", PlacementReranker.load,
            RerankerFolderError)


@pytest.mark.parametrize("header", [(2**62).to_bytes(8, "little") + b"{}", b"\x01"])
def test_a_broken_safetensors_header_names_the_file(enc_dir, tmp_path, header):
    f = copy(enc_dir, tmp_path)
    (f / "model.safetensors").write_bytes(header)
    refused(f, r"model.safetensors: not a safetensors file")


# D7: symlinks out, non-regular files
def test_symlinks_out_of_the_folder_are_refused(enc_dir, tiny, tmp_path):
    f = copy(enc_dir, tmp_path)
    (f / H).unlink()
    (f / H).symlink_to("/etc/passwd")
    refused(f, r"hypermem_encoder.json: a symbolic link out of the folder")
    (f / H).unlink()
    shutil.copy(enc_dir / H, f / H)
    shutil.rmtree(f / "1_Pooling")
    (f / "1_Pooling").symlink_to(tiny / "1_Pooling")
    refused(f, r"1_Pooling: a symbolic link out of the folder")


def test_a_symlink_inside_the_folder_is_followed(enc_dir, tmp_path):
    f = copy(enc_dir, tmp_path)
    (f / "store").mkdir()
    (f / "model.safetensors").rename(f / "store" / "model.safetensors")
    (f / "model.safetensors").symlink_to(Path("store") / "model.safetensors")
    assert HierarchyEncoder.load(f).dim == 32


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_non_regular_settings_file_is_refused_not_skipped(enc_dir, tmp_path):
    from hypermem.embed import embedder_named

    f = copy(enc_dir, tmp_path)
    (f / H).unlink()
    (f / H).mkdir()
    refused(f, r"hypermem_encoder.json: not a regular file")
    refused(f, r"hypermem_encoder.json: not a regular file", lambda p: embedder_named(str(p)))


# D4: deep JSON in every file a library reads
@pytest.mark.parametrize("name", [H, "modules.json", "config.json", "1_Pooling/config.json", "sentence_bert_config.json",
                                  "config_sentence_transformers.json", "tokenizer_config.json", "tokenizer.json"])
def test_deeply_nested_json_is_refused_without_recursion_error(enc_dir, tmp_path, name):
    f = copy(enc_dir, tmp_path)
    (f / name).write_text(DEEP)
    refused(f, rf"{name}: nests deeper than 100 levels")


def test_deep_json_in_a_reranker_is_refused(rr_dir, tmp_path):
    f = copy(rr_dir, tmp_path)
    (f / "hypermem_reranker.json").write_text(DEEP)
    refused(f, r"hypermem_reranker.json: nests deeper", PlacementReranker.load, RerankerFolderError)


# D6: module configs
@pytest.mark.parametrize(("file", "fields", "match"), [
    ("1_Pooling/config.json", {"pooling_mode": "cls"}, r"'pooling_mode' must be 'mean'"),
    ("1_Pooling/config.json", {"zzz": 1}, r"1_Pooling/config.json: unknown field\(s\) \['zzz'\]"),
    ("1_Pooling/config.json", {"embedding_dimension": "x"}, r"1_Pooling/config.json: field 'embedding_dimension'"),
    ("config_sentence_transformers.json", {"model_type": "CrossEncoder"}, r"'model_type' must be 'SentenceTransformer'"),
    ("sentence_bert_config.json", {"model_kwargs": {"dtype": "float16"}}, r"'model_kwargs.dtype' = 'float16' is not"),
    ("sentence_bert_config.json", {"model_kwargs": {"device_map": "auto", "offload_folder": "x"}}, r"device_map"),
])
def test_module_configs_are_checked_field_by_field(enc_dir, tmp_path, file, fields, match):
    f = copy(enc_dir, tmp_path)
    edit(f / file, **fields)
    refused(f, match)


def test_a_folder_without_its_tokenizer_json_is_refused(enc_dir, tmp_path):
    f = copy(enc_dir, tmp_path)
    (f / "tokenizer.json").unlink()
    refused(f, r"no tokenizer.json")


def test_a_dense_head_whose_weights_disagree_with_its_config_is_refused(dense_dir, tmp_path):
    f = copy(dense_dir, tmp_path)
    edit(f / "2_Dense" / "config.json", out_features=16)
    refused(f, r"2_Dense/model.safetensors: holds .* but config.json declares")


# D8: results.tsv of a HiT folder
@pytest.mark.parametrize(("content", "match"), [
    ("\tcentri_weight\tthreshold\nvalidation\t" + "1" * 200000 + "\t-3\n", r"results.tsv: not a readable TSV"),
    (b"\xff\xfe\tcentri\n", r"results.tsv: not UTF-8 text"),
    ("\tcentri_weight\tthreshold\nvalidation\t1\t-3\n" + "#" * (2 << 20), r"results.tsv: larger than"),
    (None, r"results.tsv: not a regular file"),
])
def test_a_bad_results_tsv_is_refused_not_skipped(enc_dir, tmp_path, content, match):
    f = copy(enc_dir, tmp_path)
    (f / H).unlink()
    if content is None:
        (f / "results.tsv").mkdir()
    elif isinstance(content, bytes):
        (f / "results.tsv").write_bytes(content)
    else:
        (f / "results.tsv").write_text(content)
    refused(f, match)


def test_a_good_results_tsv_sets_lambda_and_threshold(enc_dir, tmp_path):
    f = copy(enc_dir, tmp_path)
    (f / H).unlink()
    (f / "results.tsv").write_text("\tcentri_weight\tthreshold\nvalidation\t0.5\t-3.0\n")
    enc = HierarchyEncoder.load(f)
    assert (enc.centripetal_weight, enc.threshold) == (0.5, -3.0)


# D9: settings in range
@pytest.mark.parametrize(("fields", "match"), [
    ({"curvature": 1e300}, r"'curvature' must be between 0.001/dim and 1000/dim"),
    ({"curvature": 1e-300}, r"'curvature' must be between 0.001/dim and 1000/dim"),
    ({"max_length": 4096}, r"'max_length' \(at most config.json's max_position_embeddings\) must be an integer in \[1, 64\]"),
    ({"centripetal_weight": -1e9}, r"'centripetal_weight' must be in \[0, 1000\]"),
    ({"ranking_weight": -1}, r"'ranking_weight' must be in"),
])
def test_settings_out_of_range_are_refused(enc_dir, tmp_path, fields, match):
    f = copy(enc_dir, tmp_path)
    edit(f / H, **fields)
    refused(f, match)


def test_a_negative_reranker_weight_is_refused(rr_dir, tmp_path):
    f = copy(rr_dir, tmp_path)
    edit(f / "hypermem_reranker.json", weight=-100.0)
    refused(f, r"field 'weight' must be in \[0, 1000\]", PlacementReranker.load, RerankerFolderError)


# D5: the store's checksum sees what has no tensor
def test_the_checksum_sees_pooling_activation_and_tokenizer(enc_dir, dense_dir, tmp_path):
    from hypermem.store.encoder_points import checksum_matches, encoder_checksum

    enc = HierarchyEncoder.load(enc_dir)
    base = encoder_checksum(enc)
    assert base.startswith("sha256v2:") and base == encoder_checksum(HierarchyEncoder.load(enc_dir))
    enc.model[1].pooling_mode = "cls"
    assert encoder_checksum(enc) != base
    f = copy(enc_dir, tmp_path)
    edit(f / "tokenizer_config.json", do_lower_case=False)
    other = HierarchyEncoder.load(f)
    assert encoder_checksum(other, 1) == encoder_checksum(HierarchyEncoder.load(enc_dir), 1)   # weights alike
    assert encoder_checksum(other) != base
    dense = HierarchyEncoder.load(dense_dir)
    before = encoder_checksum(dense)
    dense.model[2].activation_function = torch.nn.Identity()
    assert encoder_checksum(dense) != before
    assert checksum_matches(encoder_checksum(other, 1), other)   # a store saved before version 2 still loads


def test_a_store_with_a_version_1_checksum_still_loads(enc_dir, tmp_path):
    from hypermem import Memory
    from hypermem.store.encoder_points import encoder_checksum

    enc = HierarchyEncoder.load(enc_dir)
    m = Memory(embedder=enc)
    m.add("a dog")
    doc = json.loads(m.to_json())
    doc["config"]["encoder"]["checksum"] = encoder_checksum(enc, 1)
    assert len(Memory.from_json(json.dumps(doc), embedder=enc)) == 1
