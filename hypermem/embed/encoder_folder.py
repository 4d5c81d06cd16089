"""The folder of a saved hierarchy encoder: what it must hold, checked before anything loads.

A :class:`~hypermem.embed.HierarchyEncoder` saves itself in the sentence-transformers
layout (``modules.json``, the transformer's ``config.json`` / ``model.safetensors`` /
tokenizer files, ``1_Pooling/config.json``) plus one file of its own,
``hypermem_encoder.json``::

    {"format": "hypermem-hierarchy-encoder", "version": 1,
     "geometry": "poincare" | "euclidean", "curvature": 1/dim (poincare) | null,
     "centripetal_weight": lambda, "ranking_weight": lambda_r | null (optional),
     "threshold": t | null, "dim": d, "max_length": tokens, "base": "...",
     "metrics": {...}, "config": {...}}

``centripetal_weight`` and ``threshold`` are the operating point of the is-a decision (F1
on validation); ``ranking_weight`` is the ``lambda`` that ranks the candidate parents of a
new text best on validation (mean reciprocal rank), which a store uses to place text
(null: the centripetal weight).

A folder written by the ``hierarchy-transformers`` package (HiT's own code) has no such
file: it is a sentence-transformers folder of a transformer and a mean pooling, read as a
Poincaré encoder of curvature ``1/dim`` (HiT's ball).  HiT's evaluator keeps its chosen
centripetal weight and threshold in a ``results.tsv``; when the folder has one, its
``validation`` row (else its last row) supplies them, otherwise ``lambda = 1`` and no
threshold.

Nothing in the folder runs code: ``modules.json`` may name only the sentence-transformers
modules of :data:`ALLOWED_MODULES`, the weights must be ``safetensors`` (no pickle), and
every field of ``hypermem_encoder.json`` is checked for its type and range.  Loading never
writes into the folder.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_FILE = "hypermem_encoder.json"
FORMAT = "hypermem-hierarchy-encoder"
VERSION = 1
GEOMETRIES = ("poincare", "euclidean")
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
_MAX_JSON_BYTES = 1 << 20
DENSE_ACTIVATIONS = ("torch.nn.modules.activation.Tanh", "torch.nn.modules.linear.Identity")
"""The head activations a folder may name (sentence-transformers imports the class it names)."""


class EncoderFolderError(ValueError):
    """A folder that is not a loadable hierarchy encoder; the message names the file and field."""


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
                "metrics": dict(self.metrics), "config": dict(self.config)}


def read_json(path: Path) -> Any:
    if path.stat().st_size > _MAX_JSON_BYTES:
        raise EncoderFolderError(f"{path}: larger than {_MAX_JSON_BYTES} bytes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise EncoderFolderError(f"{path}: not valid JSON ({exc})") from None


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


def check_modules(folder: Path) -> list[str]:
    """The short names (``Transformer``, ``Pooling``, ``Dense``, ``Normalize``) of ``modules.json``, in
    order; raises :class:`EncoderFolderError` for any other module or a malformed file."""
    path = folder / "modules.json"
    if not path.is_file():
        raise EncoderFolderError(f"{folder}: no modules.json (not a sentence-transformers folder)")
    modules = read_json(path)
    if not isinstance(modules, list) or not modules:
        raise EncoderFolderError(f"{path}: expected a non-empty list of modules")
    names = []
    for i, entry in enumerate(modules):
        kind = entry.get("type") if isinstance(entry, dict) else None
        short = next((k for k, full in ALLOWED_MODULES.items() if kind in full), None)
        if short is None:
            raise EncoderFolderError(f"{path}: module #{i} has type {kind!r}; a hierarchy encoder holds only "
                                     "a sentence-transformers Transformer, Pooling and Dense head")
        rel = entry.get("path", "")
        if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise EncoderFolderError(f"{path}: module #{i} has path {rel!r} outside the folder")
        names.append(short)
    if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"], ["Dense"]):
        raise EncoderFolderError(f"{path}: expected a Transformer, a Pooling module and at most a Dense head "
                                 f"or a Normalize, got {names}")
    if names[2:] == ["Dense"]:
        check_dense(folder / modules[2]["path"])
    if not list(folder.glob("*.safetensors")):
        raise EncoderFolderError(f"{folder}: no *.safetensors weights (pickled weights are not loaded: "
                                 "they could run code)")
    return names


def check_dense(folder: Path) -> None:
    """A ``Dense`` head's folder: every field of its ``config.json`` (sizes, bias, one of
    :data:`DENSE_ACTIVATIONS`, the sentence embedding in and out) and ``safetensors``
    weights; raises :class:`EncoderFolderError` naming the file and field."""
    path = folder / "config.json"
    if not path.is_file():
        raise EncoderFolderError(f"{folder}: the Dense head has no config.json")
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise EncoderFolderError(f"{path}: expected a JSON object")
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
    if not (folder / "model.safetensors").is_file():
        raise EncoderFolderError(f"{folder}: the Dense head has no model.safetensors (pickled weights are "
                                 "not loaded: they could run code)")


def read_settings(folder: Path, dim: int) -> EncoderSettings:
    """The checked settings of ``folder`` (``dim``: the pooled output size of its model)."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        return hit_settings(folder, dim)
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise EncoderFolderError(f"{path}: expected a JSON object")
    where = lambda key: f"{path}: field {key!r}"  # noqa: E731
    if raw.get("format") != FORMAT:
        raise EncoderFolderError(f"{where('format')} must be {FORMAT!r}, got {raw.get('format')!r}")
    if raw.get("version") != VERSION:
        raise EncoderFolderError(f"{where('version')}: version {raw.get('version')!r} is not supported "
                                 f"(this hypermem reads version {VERSION})")
    known = {"format", "version", "geometry", "dim", "curvature", "centripetal_weight", "ranking_weight",
             "threshold", "max_length", "base", "metrics", "config"}
    extra = sorted(set(raw) - known)
    if extra:
        raise EncoderFolderError(f"{path}: unknown field(s) {extra}")
    geometry = raw.get("geometry")
    if geometry not in GEOMETRIES:
        raise EncoderFolderError(f"{where('geometry')} must be one of {GEOMETRIES}, got {geometry!r}")
    stored_dim = check_integer(raw.get("dim"), where("dim"), 1, 1 << 16)
    if stored_dim != dim:
        raise EncoderFolderError(f"{where('dim')} is {stored_dim} but the model's output has {dim} dimensions")
    curvature = check_number(raw.get("curvature"), where("curvature"), positive=True, allow_none=geometry == "euclidean")
    if geometry == "euclidean" and curvature is not None:
        raise EncoderFolderError(f"{where('curvature')} must be null for a Euclidean encoder")
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
                           check_number(raw.get("centripetal_weight", 1.0), where("centripetal_weight")),
                           check_number(raw.get("threshold"), where("threshold"), allow_none=True),
                           check_integer(raw.get("max_length", 32), where("max_length"), 1, 8192), base, metrics, config,
                           check_number(raw.get("ranking_weight"), where("ranking_weight"), allow_none=True))


def hit_settings(folder: Path, dim: int) -> EncoderSettings:
    """Settings of a folder written by the ``hierarchy-transformers`` package: HiT's ball of
    curvature ``1/dim``, its evaluator's ``results.tsv`` when present."""
    lam, threshold = 1.0, None
    results = folder / "results.tsv"
    if results.is_file() and results.stat().st_size <= _MAX_JSON_BYTES:
        with open(results, encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        pick = next((r for r in rows if (r.get("") or "").strip() == "validation"), rows[-1] if rows else None)
        if pick is not None:
            try:
                lam = check_number(float(pick["centri_weight"]), f"{results}: centri_weight")
                threshold = check_number(float(pick["threshold"]), f"{results}: threshold")
            except (KeyError, TypeError, ValueError) as exc:
                raise EncoderFolderError(f"{results}: cannot read centri_weight/threshold ({exc})") from None
    return EncoderSettings("poincare", dim, 1.0 / dim, lam, threshold, base="hierarchy-transformers")
