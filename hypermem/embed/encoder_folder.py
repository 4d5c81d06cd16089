"""The folder of a saved hierarchy encoder: what it must hold, checked before anything loads.

A :class:`~hypermem.embed.HierarchyEncoder` saves itself in the sentence-transformers
layout (``modules.json``, the transformer's ``config.json`` / ``model.safetensors`` /
tokenizer files, ``1_Pooling/config.json``) plus one file of its own,
``hypermem_encoder.json``::

    {"format": "hypermem-hierarchy-encoder", "version": 1,
     "geometry": "poincare" | "euclidean", "curvature": c (poincare, 1/dim by default) | null,
     "centripetal_weight": lambda, "ranking_weight": lambda_r | null (optional),
     "threshold": t | null, "dim": d, "max_length": tokens, "base": "...",
     "metrics": {...}, "config": {...},
     "versions": {"hypermem": ..., "torch": ..., "numpy": ..., "lightning": ...} (optional)}

``centripetal_weight`` and ``threshold`` are the operating point of the is-a decision (F1
on validation); ``ranking_weight`` is the ``lambda`` that ranks the candidate parents of a
new text best on validation (mean reciprocal rank), which a store uses to place text
(null: the centripetal weight).  ``versions`` records the packages that wrote the folder
(:func:`software_versions`; provenance only, not read back; older folders have none).

A folder written by the ``hierarchy-transformers`` package (HiT's own code) has no such
file: it is a sentence-transformers folder of a transformer and a mean pooling, read as a
Poincaré encoder of curvature ``1/dim`` (HiT's ball) that keeps the folder's own max length
(HiT's 256).  HiT's evaluator keeps its chosen
centripetal weight and threshold in a ``results.tsv``; when the folder has one, its
``validation`` row (else its last row) supplies them, otherwise ``lambda = 1`` and no
threshold.

Nothing in the folder runs code: ``modules.json`` may name only the sentence-transformers
modules of :data:`ALLOWED_MODULES`, each module's weights must be its own ``safetensors``
(a pickle file anywhere in the folder is refused), no file may be a symlink out of the folder
or a non-regular file, ``config_sentence_transformers.json`` may name no default prompt, every JSON file the libraries read is bounded in size and depth
(:mod:`hypermem.embed.folder_files`), the weights must match ``config.json`` and the Pooling
be mean pooling (:mod:`hypermem.embed.module_checks`), and every field of
``hypermem_encoder.json`` is checked for its type and range.  Loading never writes into the
folder.
"""

from __future__ import annotations

import csv
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .folder_files import (
    EncoderFolderError,
    inside,
    present,
    read_json,
    read_text,
    scan_folder,
    weights_header,
)
from .module_checks import check_pooling, check_transformer, module_config

CONFIG_FILE = "hypermem_encoder.json"
FORMAT = "hypermem-hierarchy-encoder"
VERSION = 1
GEOMETRIES = ("poincare", "euclidean")
CURVATURE_RANGE = (1e-3, 1e3)
"""A ball's saved curvature ``c`` must lie in ``[1e-3 / dim, 1e3 / dim]``: HiT's ``1/dim`` and the
trained choices (``fit_hierarchy_encoder(curvature=...)``, measured from ``0.0625/dim`` to ``4/dim``)
fall inside, a corrupt value not.  A saved ``c`` is what the folder's points were trained in, so
any value in the range is kept as it is (not compared with ``1/dim``)."""
ALLOWED_MODULES = {
    "Transformer": ("sentence_transformers.models.Transformer",
                    "sentence_transformers.base.modules.transformer.Transformer"),
    "Pooling": ("sentence_transformers.models.Pooling",
                "sentence_transformers.sentence_transformer.modules.pooling.Pooling"),
    "Dense": ("sentence_transformers.models.Dense",
              "sentence_transformers.base.modules.dense.Dense",
              "sentence_transformers.sentence_transformer.modules.dense.Dense"),
    "Normalize": ("sentence_transformers.models.Normalize",
                  "sentence_transformers.sentence_transformer.modules.normalize.Normalize",
                  "sentence_transformers.base.modules.normalize.Normalize"),
}
DENSE_ACTIVATIONS = ("torch.nn.modules.activation.Tanh", "torch.nn.modules.linear.Identity")
"""The head activations a folder may name (sentence-transformers imports the class it names)."""


@dataclass
class EncoderSettings:
    """What ``hypermem_encoder.json`` records (see the module docstring)."""

    geometry: str
    dim: int
    curvature: float | None
    centripetal_weight: float = 1.0
    threshold: float | None = None
    max_length: int = 32
    base: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    ranking_weight: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "geometry": self.geometry, "dim": self.dim,
                "curvature": self.curvature, "centripetal_weight": self.centripetal_weight,
                "ranking_weight": self.ranking_weight,
                "threshold": self.threshold, "max_length": self.max_length, "base": self.base,
                "metrics": dict(self.metrics), "config": dict(self.config), "versions": software_versions()}


PROVENANCE = ("hypermem", "torch", "numpy", "lightning")


def software_versions() -> dict[str, str]:
    """The installed versions of :data:`PROVENANCE` (a missing package is left out), for a saved
    encoder or checkpoint to say what wrote it.  hypermem run from a source tree (no installed
    metadata) gives its package's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in PROVENANCE:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            own = getattr(sys.modules.get(name), "__version__", None)
            if isinstance(own, str):
                out[name] = own
    return out


def check_number(value: Any, where: str, *, positive: bool = False, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise EncoderFolderError(f"{where} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise EncoderFolderError(f"{where} must be positive, got {value!r}")
    return float(value)


def check_integer(value: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise EncoderFolderError(f"{where} must be an integer in [{lo}, {hi}], got {value!r}")
    return value


def not_an_encoder_folder(path: Path) -> str | None:
    """What ``path`` is and what to load instead, when it is an existing file or a training run's
    folder rather than an encoder folder; ``None`` otherwise (a missing path, or a folder to check)."""
    take = "HierarchyEncoder.load takes the folder that HierarchyEncoder.save, fit_hierarchy_encoder(out=...) " \
           "or `hypermem train` (runs/<name>/version_<N>/encoder) wrote"
    if path.is_file():
        run = path.parent.parent if path.parent.name == "checkpoints" else None
        if path.suffix == ".ckpt":
            if run is not None and (run / "encoder" / CONFIG_FILE).is_file():
                return f"{path}: a Lightning checkpoint, not an encoder folder; load the encoder its run exported: " \
                       f"HierarchyEncoder.load({str(run / 'encoder')!r})"
            return f"{path}: a Lightning checkpoint, not an encoder folder; {take}"
        return f"{path}: a file, not an encoder folder; {take}"
    if not path.is_dir() or (path / "modules.json").is_file():
        return None
    exported = sorted(path.glob("version_*/encoder/" + CONFIG_FILE), key=lambda f: f.stat().st_mtime)
    if (path / "encoder" / CONFIG_FILE).is_file():
        return f"{path}: a training run's folder, not an encoder folder; load the encoder it exported: " \
               f"HierarchyEncoder.load({str(path / 'encoder')!r})"
    if (path / "checkpoints").is_dir() or (path / "hparams.yaml").is_file():
        return f"{path}: a training run's folder without an exported encoder (a run writes <run>/encoder when " \
               "it finishes); finish or resume the run with --ckpt_path=last"
    if exported:
        return f"{path}: a folder of training runs, not an encoder folder; load one run's encoder, e.g. the " \
               f"newest: HierarchyEncoder.load({str(exported[-1].parent)!r})"
    return None


def check_modules(folder: Path) -> list[str]:
    """The short names (``Transformer``, ``Pooling``, ``Dense``, ``Normalize``) of ``modules.json``, in
    order; raises :class:`EncoderFolderError` for any other module or a malformed file."""
    return check_folder(folder)[0]


def check_folder(folder: Path) -> tuple[list[str], list[str], dict[str, Any]]:
    """Every file of a sentence-transformers folder that will be read, before anything loads:
    no pickle file and no symlink out of it anywhere, ``modules.json`` (only the modules of
    :data:`ALLOWED_MODULES`, paths inside the folder), ``config_sentence_transformers.json``,
    the Transformer (:func:`~hypermem.embed.module_checks.check_transformer`: its JSON files,
    tokenizer and ``safetensors`` weights), the mean Pooling and a Dense head.  Returns the
    modules' short names, their paths and the transformer's ``config.json``."""
    scan_folder(folder)
    path = folder / "modules.json"
    if not present(path):
        raise EncoderFolderError(f"{folder}: no modules.json (not a sentence-transformers folder)")
    modules = read_json(path, folder)
    if not isinstance(modules, list) or not modules:
        raise EncoderFolderError(f"{path}: expected a non-empty list of modules")
    names, rels = [], []
    for i, entry in enumerate(modules):
        kind = entry.get("type") if isinstance(entry, dict) else None
        short = next((k for k, full in ALLOWED_MODULES.items() if kind in full), None)
        if short is None:
            raise EncoderFolderError(f"{path}: module #{i} has type {kind!r}; a hierarchy encoder holds only "
                                     "a sentence-transformers Transformer, Pooling and Dense head")
        rel = entry.get("path", "")
        if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise EncoderFolderError(f"{path}: module #{i} has path {rel!r} outside the folder")
        if present(folder / rel):
            inside(folder, folder / rel)
        elif short != "Normalize":
            raise EncoderFolderError(f"{path}: module #{i} has path {rel!r}, which the folder does not hold")
        names.append(short)
        rels.append(rel)
    if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"], ["Dense"]):
        raise EncoderFolderError(f"{path}: expected a Transformer, a Pooling module and at most a Dense head "
                                 f"or a Normalize, got {names}")
    st_path = folder / "config_sentence_transformers.json"
    st_conf = read_json(st_path, folder) if present(st_path) else {}
    if not isinstance(st_conf, dict) or st_conf.get("model_type", "SentenceTransformer") != "SentenceTransformer":
        raise EncoderFolderError(f"{st_path}: field 'model_type' must be 'SentenceTransformer' (a sentence "
                                 f"encoder), got {st_conf.get('model_type') if isinstance(st_conf, dict) else st_conf!r}")
    check_default_prompt(st_path, st_conf)
    config = check_transformer(folder, rels[0])
    width = config.get("hidden_size")
    check_pooling(folder, rels[1], width)
    if names[2:] == ["Dense"]:
        check_dense(folder / rels[2], folder, width)
    return names, rels, config


def check_default_prompt(path: Path, st_conf: dict[str, Any]) -> None:
    """Refuse a default prompt (``default_prompt_name`` naming a non-empty one of ``prompts``):
    sentence-transformers' ``encode`` would prepend it while the training path
    (:meth:`~hypermem.embed.HierarchyEncoder.tokenize`) does not, so training and inference would
    place the same text differently."""
    name, prompts = st_conf.get("default_prompt_name"), st_conf.get("prompts", {})
    if name is None:
        return
    if not isinstance(prompts, dict) or prompts.get(name) != "":
        raise EncoderFolderError(f"{path}: field 'default_prompt_name' is {name!r} (a prompt encode() would put "
                                 "before every text, which the training path does not); a hierarchy encoder takes "
                                 "no default prompt: set it to null")


def check_dense(folder: Path, root: Path | None = None, width: Any = None) -> None:
    """A ``Dense`` head's folder: every field of its ``config.json`` (sizes, bias, one of
    :data:`DENSE_ACTIVATIONS`, the sentence embedding in and out) and ``safetensors``
    weights; raises :class:`EncoderFolderError` naming the file and field."""
    root = folder if root is None else root
    path = folder / "config.json"
    raw = module_config(root, folder, "the Dense head")
    known = {"in_features", "out_features", "bias", "activation_function", "module_input_name",
             "module_output_name", "use_residual"}
    extra = sorted(set(raw) - known)
    if extra:
        raise EncoderFolderError(f"{path}: unknown field(s) {extra}")
    for key in ("in_features", "out_features"):
        check_integer(raw.get(key), f"{path}: field {key!r}", 1, 1 << 16)
    if not isinstance(raw.get("bias", True), bool) or raw.get("use_residual", False) is not False:
        raise EncoderFolderError(f"{path}: field 'bias' must be true or false and 'use_residual' false")
    if raw.get("activation_function") not in DENSE_ACTIVATIONS:
        raise EncoderFolderError(f"{path}: field 'activation_function' must be one of {DENSE_ACTIVATIONS}, "
                                 f"got {raw.get('activation_function')!r}")
    for key in ("module_input_name", "module_output_name"):
        if raw.get(key, "sentence_embedding") not in ("sentence_embedding", None):
            raise EncoderFolderError(f"{path}: field {key!r} must be 'sentence_embedding'")
    if isinstance(width, int) and raw["in_features"] != width:
        raise EncoderFolderError(f"{path}: field 'in_features' is {raw['in_features']} but the pooled output has "
                                 f"{width} dimensions")
    files, header = weights_header(root, folder, "the Dense head")
    out, inn = raw["out_features"], raw["in_features"]
    want = {"linear.weight": (out, inn), **({"linear.bias": (out,)} if raw.get("bias", True) else {})}
    got = {k: shape for k, (_, shape) in header.items()}
    if got != want:
        raise EncoderFolderError(f"{files[0]}: holds {got} but config.json declares {want} "
                                 "(in_features, out_features, bias)")


def read_settings(folder: Path, dim: int, max_positions: Any = None, tokens: Any = None) -> EncoderSettings:
    """The checked settings of ``folder`` (``dim``: the pooled output size of its model;
    ``max_positions``: its transformer's ``max_position_embeddings``, the most tokens it reads;
    ``tokens``: the max length sentence-transformers read from the folder, a HiT folder's own)."""
    path = folder / CONFIG_FILE
    top = max_positions if isinstance(max_positions, int) and not isinstance(max_positions, bool) else 8192
    if not present(path):
        return hit_settings(folder, dim, hit_max_length(tokens, min(top, 8192)))
    raw = read_json(path, folder)
    if not isinstance(raw, dict):
        raise EncoderFolderError(f"{path}: expected a JSON object")
    where = lambda key: f"{path}: field {key!r}"  # noqa: E731
    if raw.get("format") != FORMAT:
        raise EncoderFolderError(f"{where('format')} must be {FORMAT!r}, got {raw.get('format')!r}")
    if raw.get("version") != VERSION:
        raise EncoderFolderError(f"{where('version')}: version {raw.get('version')!r} is not supported "
                                 f"(this hypermem reads version {VERSION})")
    known = {"format", "version", "geometry", "dim", "curvature", "centripetal_weight", "ranking_weight",
             "threshold", "max_length", "base", "metrics", "config", "versions"}
    extra = sorted(set(raw) - known)
    if extra:
        raise EncoderFolderError(f"{path}: unknown field(s) {extra}")
    versions = raw.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in versions.items()):
        raise EncoderFolderError(f"{where('versions')} must be an object of version strings")
    geometry = raw.get("geometry")
    if geometry not in GEOMETRIES:
        raise EncoderFolderError(f"{where('geometry')} must be one of {GEOMETRIES}, got {geometry!r}")
    stored_dim = check_integer(raw.get("dim"), where("dim"), 1, 1 << 16)
    if stored_dim != dim:
        raise EncoderFolderError(f"{where('dim')} is {stored_dim} but the model's output has {dim} dimensions")
    curvature = check_number(raw.get("curvature"), where("curvature"), positive=True, allow_none=geometry == "euclidean")
    if geometry == "euclidean" and curvature is not None:
        raise EncoderFolderError(f"{where('curvature')} must be null for a Euclidean encoder")
    if geometry == "poincare" and not CURVATURE_RANGE[0] / dim <= curvature <= CURVATURE_RANGE[1] / dim:
        raise EncoderFolderError(f"{where('curvature')} must be between {CURVATURE_RANGE[0]:g}/dim and "
                                 f"{CURVATURE_RANGE[1]:g}/dim (1/dim = {1.0 / dim!r} is HiT's ball, of radius sqrt(dim)), "
                                 f"got {curvature!r}")
    metrics = raw.get("metrics", {})
    if not isinstance(metrics, dict) or not all(isinstance(k, str) for k in metrics):
        raise EncoderFolderError(f"{where('metrics')} must be an object of numbers")
    metrics = {k: check_number(v, f"{where('metrics')}[{k!r}]") for k, v in metrics.items()}
    config = raw.get("config", {})
    if not isinstance(config, dict):
        raise EncoderFolderError(f"{where('config')} must be an object")
    base = raw.get("base", "")
    if not isinstance(base, str):
        raise EncoderFolderError(f"{where('base')} must be a string")
    return EncoderSettings(geometry, dim, curvature,
                           check_weight(raw.get("centripetal_weight", 1.0), where("centripetal_weight")),
                           check_number(raw.get("threshold"), where("threshold"), allow_none=True),
                           check_integer(raw.get("max_length", 32), where("max_length") + " (at most config.json's "
                                         "max_position_embeddings)", 1, min(top, 8192)), base, metrics, config,
                           check_weight(raw.get("ranking_weight"), where("ranking_weight"), allow_none=True))


def check_weight(value: Any, where: str, *, allow_none: bool = False) -> float | None:
    """A score's ``lambda`` or a reranker's weight: a finite number in [0, 1000] (training
    chooses them in [0, 5))."""
    w = check_number(value, where, allow_none=allow_none)
    if w is not None and not 0 <= w <= 1000:
        raise EncoderFolderError(f"{where} must be in [0, 1000], got {value!r}")
    return w


def hit_max_length(tokens: Any, top: int) -> int:
    """A HiT folder's max length: what sentence-transformers read from it (``sentence_bert_config.json``'s
    ``max_seq_length``, else the tokenizer's ``model_max_length``, HiT's 256), at most ``top``
    (``max_position_embeddings``; transformers' "no limit", 1e30, becomes that)."""
    if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not tokens >= 1:
        return min(32, top)
    return int(min(tokens, top))


def hit_settings(folder: Path, dim: int, max_length: int = 32) -> EncoderSettings:
    """Settings of a folder written by the ``hierarchy-transformers`` package: HiT's ball of
    curvature ``1/dim``, the folder's own ``max_length``, its evaluator's ``results.tsv`` when
    present (a regular UTF-8 file of at most 1 MiB, else refused)."""
    lam, threshold = 1.0, None
    results = folder / "results.tsv"
    if present(results):
        text = read_text(folder, results)
        try:
            rows = list(csv.DictReader(text.splitlines(), delimiter="\t"))
        except csv.Error as exc:
            raise EncoderFolderError(f"{results}: not a readable TSV file ({exc})") from None
        pick = next((r for r in rows if (r.get("") or "").strip() == "validation"), rows[-1] if rows else None)
        if pick is not None:
            try:
                lam = check_weight(float(pick["centri_weight"]), f"{results}: centri_weight")
                threshold = check_number(float(pick["threshold"]), f"{results}: threshold")
            except (KeyError, TypeError, ValueError) as exc:
                if isinstance(exc, EncoderFolderError):
                    raise
                raise EncoderFolderError(f"{results}: cannot read centri_weight/threshold ({exc})") from None
    return EncoderSettings("poincare", dim, 1.0 / dim, lam, threshold, max_length, base="hierarchy-transformers")
