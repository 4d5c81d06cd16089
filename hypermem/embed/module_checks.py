"""The sentence-transformers modules of a received folder, checked before and after they load.

Before: each JSON file that sentence-transformers or transformers will read is pre-read here
(:func:`~hypermem.embed.folder_files.read_json`: inside the folder, regular, bounded in size and
depth); the Transformer's ``config.json`` may declare no more layers than its ``safetensors``
weights hold (a declared ``num_hidden_layers`` would otherwise build that many layers of random
weights); ``sentence_bert_config.json`` names only known fields and no loading options
(``model_kwargs`` such as ``dtype``, ``device_map`` or ``offload_folder`` are refused), nor
does ``config.json`` (``quantization_config``); the tokenizer is the folder's own ``tokenizer.json``; the Pooling is one mode (the encoder's: mean).

After: :func:`check_loaded_weights` compares the loaded model's tensors with the weights'
header, so no tensor is silently left at random (missing) or ignored (unexpected).
"""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from .folder_files import EncoderFolderError, present, read_json, weights_header

__all__ = ["check_loaded_weights", "check_pooling", "check_transformer", "float32_kwargs", "load_errors",
           "module_config"]


def load_errors() -> tuple[type[BaseException], ...]:
    """What a library raises on a folder it cannot load (a config.json field of the wrong type
    included); the loaders re-raise it naming the folder (``except load_errors() as exc``: Python
    evaluates it only when an exception arrives).  A function, not a constant: naming
    safetensors' and huggingface_hub's error classes imports those libraries (huggingface_hub.errors
    imports an HTTP client, 0.2 s), which ``import hypermem`` never needs."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - safetensors comes with transformers
        SafetensorError = OSError
    try:   # the base of transformers' config validation errors (StrictDataclassFieldValidationError...)
        from huggingface_hub.errors import StrictDataclassError
    except ImportError:  # pragma: no cover - huggingface_hub < 0.34 validates no config field
        StrictDataclassError = ValueError
    return (OSError, ValueError, RuntimeError, TypeError, KeyError, AttributeError, SafetensorError,
            StrictDataclassError)


CONFIG_LOADING_OPTIONS = ("quantization_config",)
"""Fields of ``config.json`` that choose how transformers loads the model (quantised weights
through other libraries), refused like ``sentence_bert_config.json``'s ``model_kwargs``."""
CONFIG_JSONS = ("config.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                "generation_config.json", "preprocessor_config.json")
BIG_JSONS = ("tokenizer.json", "vocab.json")
LAYER_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
SIZE_FIELDS = ("hidden_size", "vocab_size", "intermediate_size", "max_position_embeddings", "type_vocab_size",
               "num_attention_heads", "n_embd", "n_positions", "n_head", "d_model")
_LAYER_KEY = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")
_WORDS = r"(?:^|\.)(?:word_embeddings|wte|embed_tokens|tok_embeddings)\.weight$"
SHAPE_ROLES = {"vocab_size": (_WORDS, 0), "hidden_size": (_WORDS, 1), "n_embd": (_WORDS, 1), "d_model": (_WORDS, 1),
               "dim": (_WORDS, 1),
               "max_position_embeddings": (r"(?:^|\.)(?:embeddings\.position_embeddings|wpe)\.weight$", 0),
               "n_positions": (r"(?:^|\.)wpe\.weight$", 0),
               "type_vocab_size": (r"(?:^|\.)token_type_embeddings\.weight$", 0),
               "intermediate_size": (r"(?:^|\.)(?:layer|layers)\.0\.(?:intermediate\.dense|mlp\.fc1|mlp\.up_proj)\.weight$", 0),
               "hidden_dim": (r"(?:^|\.)layer\.0\.ffn\.lin1\.weight$", 0)}
"""config.json's sizes and the tensor (a name pattern) and dimension each sizes: compared with
the ``safetensors`` header before anything is built (a declared ``vocab_size`` of 2**24 would
allocate gigabytes the weights never fill)."""
SHAPE_ANY = ("vocab_size", "hidden_size", "intermediate_size", "n_embd", "d_model", "dim", "hidden_dim", "d_ff",
             "n_inner", "ffn_dim")
"""Sizes that, without their tensor above, must still be the length of some weight's dimension."""
SB_KEYS = {"transformer_task", "modality_config", "module_output_name", "processing_kwargs", "unpad_inputs",
           "query_length", "document_length", "query_expansion", "max_seq_length", "do_lower_case",
           "model_args", "model_kwargs", "tokenizer_args", "processor_kwargs", "config_args", "config_kwargs"}
SB_KWARGS = {"trust_remote_code": (False,), "attn_implementation": ("eager", "sdpa")}
"""The only loading options a folder's ``sentence_bert_config.json`` may pass to transformers."""
LEGACY_POOLING = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean", "pooling_mode_max_tokens": "max",
                  "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


def float32_kwargs() -> dict[str, Any]:
    """``model_kwargs`` that load a transformer in float32 whatever its ``config.json`` says
    (``dtype``/``torch_dtype``: transformers >= 5 otherwise follows it, a bfloat16 model would
    encode and train in bfloat16): ``dtype`` from transformers 4.56, ``torch_dtype`` before."""
    try:
        version = tuple(int(p) for p in re.findall(r"\d+", metadata.version("transformers"))[:2])
    except metadata.PackageNotFoundError:   # pragma: no cover - sentence-transformers needs transformers
        version = (5, 0)
    return {"dtype" if version >= (4, 56) else "torch_dtype": torch.float32}


def module_config(folder: Path, module_dir: Path, what: str) -> dict[str, Any]:
    """The ``config.json`` of the module ``what`` at ``module_dir`` (checked to be a JSON object)."""
    path = module_dir / "config.json"
    if not present(path):
        raise EncoderFolderError(f"{module_dir}: {what} has no config.json")
    raw = read_json(path, folder)
    if not isinstance(raw, dict):
        raise EncoderFolderError(f"{path}: expected a JSON object")
    return raw


def _check_sb_config(folder: Path, module_dir: Path, task: str, out_name: str, max_pos: int | None) -> None:
    for name in sorted(p.name for p in module_dir.glob("sentence_*_config.json")):
        path = module_dir / name
        raw = read_json(path, folder)
        if not isinstance(raw, dict):
            raise EncoderFolderError(f"{path}: expected a JSON object")
        extra = sorted(set(raw) - SB_KEYS)
        if extra:
            raise EncoderFolderError(f"{path}: unknown field(s) {extra}")
        if raw.get("transformer_task", task) != task or raw.get("module_output_name", out_name) != out_name:
            raise EncoderFolderError(f"{path}: fields 'transformer_task'/'module_output_name' must be "
                                     f"{task!r}/{out_name!r}, got {raw.get('transformer_task')!r}/"
                                     f"{raw.get('module_output_name')!r}")
        for key in ("model_args", "model_kwargs", "tokenizer_args", "processor_kwargs", "config_args", "config_kwargs"):
            kw = raw.get(key, {})
            if not isinstance(kw, dict):
                raise EncoderFolderError(f"{path}: field {key!r} must be an object")
            for k, v in kw.items():
                if k not in SB_KWARGS or v not in SB_KWARGS[k]:
                    raise EncoderFolderError(f"{path}: field '{key}.{k}' = {v!r} is not accepted: the only loading "
                                             f"options a received folder may set are {SB_KWARGS}")
        msl = raw.get("max_seq_length")
        if msl is not None and (isinstance(msl, bool) or not isinstance(msl, int) or
                                not 1 <= msl <= (max_pos or 1 << 20)):
            raise EncoderFolderError(f"{path}: field 'max_seq_length' must be an integer in [1, {max_pos or 1 << 20}] "
                                     f"(config.json's max_position_embeddings), got {msl!r}")
        if not isinstance(raw.get("do_lower_case", False), bool):
            raise EncoderFolderError(f"{path}: field 'do_lower_case' must be true or false")


def check_transformer(folder: Path, rel: str, *, task: str = "feature-extraction",
                      out_name: str = "token_embeddings") -> dict[str, Any]:
    """Check the Transformer module at ``folder / rel`` before it loads (module docstring);
    returns its ``config.json``."""
    module_dir = folder / rel
    config = module_config(folder, module_dir, "the Transformer")
    path = module_dir / "config.json"
    for key in CONFIG_LOADING_OPTIONS:
        if key in config:
            raise EncoderFolderError(f"{path}: field {key!r} is not accepted: a received folder may not choose how "
                                     "the model loads (a hierarchy encoder is a float32 model of plain weights)")
    for name in CONFIG_JSONS[1:]:
        if present(module_dir / name):
            read_json(module_dir / name, folder)
    for name in BIG_JSONS:
        if present(module_dir / name):
            read_json(module_dir / name, folder, limit=64 << 20)
    tok = read_json(module_dir / "tokenizer_config.json", folder) if present(module_dir / "tokenizer_config.json") else {}
    mml = tok.get("model_max_length", 1) if isinstance(tok, dict) else None
    if isinstance(mml, bool) or not isinstance(mml, (int, float)) or not mml >= 1:
        raise EncoderFolderError(f"{module_dir / 'tokenizer_config.json'}: expected a JSON object whose field "
                                 f"'model_max_length' is a positive number, got {mml!r}")
    if not present(module_dir / "tokenizer.json"):
        raise EncoderFolderError(f"{module_dir}: no tokenizer.json (transformers would build another tokenizer "
                                 "from the vocabulary, which places text elsewhere)")
    for key in SIZE_FIELDS:
        v = config.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 24):
            raise EncoderFolderError(f"{path}: field {key!r} must be an integer in [1, {1 << 24}], got {v!r}")
    files, header = weights_header(folder, module_dir, "the Transformer")
    layers = {int(m.group(1)) for k in header for m in [_LAYER_KEY.search(k)] if m}
    held = max(layers) + 1 if layers else 0
    for key in LAYER_FIELDS:
        v = config.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (layers and v != held) or v > 256:
            raise EncoderFolderError(f"{path}: field {key!r} is {v!r} but {files[0].name} holds {held} layers")
    _check_shapes(config, path, files[0].name, header)
    max_pos = config.get("max_position_embeddings")
    _check_sb_config(folder, module_dir, task, out_name, max_pos if isinstance(max_pos, int) else None)
    return config


def _check_shapes(config: dict[str, Any], path: Path, weights: str, header: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """Refuse a size of ``config.json`` (:data:`SHAPE_ROLES`, :data:`SHAPE_ANY`) that the weights'
    header does not hold, naming the field, its tensor and ``weights`` (the file)."""
    dims = {d for _, shape in header.values() for d in shape}
    for key in sorted(set(SHAPE_ROLES) | set(SHAPE_ANY)):
        v = config.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1 << 24:
            raise EncoderFolderError(f"{path}: field {key!r} must be an integer in [1, {1 << 24}], got {v!r}")
        pattern, axis = SHAPE_ROLES.get(key, (None, 0))
        named = [(k, shape) for k, (_, shape) in header.items()
                 if pattern and re.search(pattern, k) and len(shape) > axis]
        if key in ("hidden_size", "d_model") and "embedding_size" in config:
            named = []   # ALBERT: the word embeddings are embedding_size wide
        if named and named[0][1][axis] != v:
            raise EncoderFolderError(f"{path}: field {key!r} is {v} but {weights}'s {named[0][0]!r} has shape "
                                     f"{list(named[0][1])} (nothing is built from a size the weights do not hold)")
        if not named and key in SHAPE_ANY and v not in dims:
            raise EncoderFolderError(f"{path}: field {key!r} is {v} but no tensor of {weights} has a dimension of "
                                     "that size (nothing is built from a size the weights do not hold)")


def check_pooling(folder: Path, rel: str, width: Any) -> None:
    """``1_Pooling/config.json``: mean pooling (HiT's construction) over ``width`` (config.json's
    ``hidden_size``), every field known."""
    path = folder / rel / "config.json"
    raw = module_config(folder, folder / rel, "the Pooling module")
    extra = sorted(set(raw) - {"embedding_dimension", "word_embedding_dimension", "pooling_mode", "include_prompt",
                               *LEGACY_POOLING})
    if extra:
        raise EncoderFolderError(f"{path}: unknown field(s) {extra}")
    dim_key = "embedding_dimension" if "embedding_dimension" in raw else "word_embedding_dimension"
    dim = raw.get(dim_key)
    if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 1 << 16:
        raise EncoderFolderError(f"{path}: field {dim_key!r} must be an integer in [1, {1 << 16}], got {dim!r}")
    if isinstance(width, int) and dim != width:
        raise EncoderFolderError(f"{path}: field {dim_key!r} is {dim} but config.json's hidden_size is {width}")
    mode = raw.get("pooling_mode")
    if mode is None:
        if not all(isinstance(raw.get(k, False), bool) for k in LEGACY_POOLING):
            raise EncoderFolderError(f"{path}: the pooling_mode_* fields must be true or false")
        modes = [m for k, m in LEGACY_POOLING.items() if raw.get(k)] or ["mean"]
    else:
        modes = [mode] if isinstance(mode, str) else mode
    if modes != ["mean"] or any(k in raw and raw[k] is not (v == "mean") for k, v in LEGACY_POOLING.items()):
        raise EncoderFolderError(f"{path}: field 'pooling_mode' must be 'mean' (a hierarchy encoder mean-pools its "
                                 f"tokens), got {mode if mode is not None else modes!r}")
    if not isinstance(raw.get("include_prompt", True), bool):
        raise EncoderFolderError(f"{path}: field 'include_prompt' must be true or false")


def check_loaded_weights(folder: Path, module_dir: Path, model: Any, *, head_may_be_new: bool = False) -> None:
    """Refuse a loaded transformers ``model`` whose tensors are not exactly those of its
    ``safetensors`` files (``head_may_be_new``: the tensors outside the base model, a new
    cross-encoder head, may be missing)."""
    files, header = weights_header(folder, module_dir, "the Transformer")
    state = model.state_dict()
    prefix = getattr(model, "base_model_prefix", "") or ""

    buffers = {n for n, _ in model.named_buffers()}   # non-persistent (position_ids): transformers skips them
    known = set(state) | buffers

    def norm(k: str) -> str:
        if k in known:
            return k
        if prefix and f"{prefix}.{k}" in known:
            return f"{prefix}.{k}"
        if prefix and k.startswith(prefix + ".") and k[len(prefix) + 1:] in known:
            return k[len(prefix) + 1:]
        return k

    held = {norm(k): shape for k, (_, shape) in header.items()}
    ptrs = {state[k].data_ptr() for k in held if k in state}
    missing = sorted(k for k in state if k not in held and state[k].data_ptr() not in ptrs)   # tied: shared
    if head_may_be_new:
        missing = [k for k in missing if prefix and k.startswith(prefix + ".")]
    ignore = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_unexpected", None) or []]
    unexpected = sorted(k for k in held if k not in state and k not in buffers and not any(p.search(k) for p in ignore))
    wrong = sorted(k for k in held if k in state and tuple(state[k].shape) != tuple(held[k]))
    name = files[0].name if len(files) == 1 else "model.safetensors.index.json"
    for what, keys in (("lacks the tensors", missing), ("holds tensors the model does not use", unexpected),
                       ("holds tensors of another shape than config.json declares", wrong)):
        if keys:
            raise EncoderFolderError(f"{module_dir / name}: {what} {keys[:3]}{' ...' if len(keys) > 3 else ''} "
                                     f"({len(keys)} in all) for config.json's model; they would be left random or "
                                     "ignored")
