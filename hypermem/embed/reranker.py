r"""A placement reranker: a cross-encoder that reads a text and a candidate parent together.

A store that holds a tree chooses the parent of a new text among the candidates of its
neighbours' vote by a rule (:mod:`hypermem.store.parent_choice`): the vote's share, the
memories the text names, the cosine, the candidate's children.  The rule sees the text only
through vectors and titles; most of its misses are a candidate of *another* thing the text
names ("bakery: a workplace where baked goods are produced" -> baked goods).  A cross-encoder
(Nogueira & Cho, "Passage re-ranking with BERT", arXiv 1901.04085, 2019) reads
``text [SEP] candidate`` in one transformer pass and can learn which named thing is the text's
kind.  With a reranker, the store re-scores the rule's best :attr:`PlacementReranker.candidates`
candidates ``c`` of a text ``t`` by::

    score(c) = rule(c) + w * ce(t, c)

where ``ce`` is the cross-encoder's logit and ``w`` :attr:`PlacementReranker.weight` (the rule's
order stands for the rest).  With the cross-encoder reading the text, the rule leans less on
the text's first named memory and its cosine: :attr:`PlacementReranker.rule` holds the rule's
``nu`` (``"first"``) and ``a`` (``"cos"``) that the store uses with this reranker
(:mod:`hypermem.store.parent_choice`); :data:`RULE` were chosen with ``w`` on WordNet's
validation nouns (the store's own 0.15 and 0.2 without a reranker).
:func:`hypermem.hierarchy.fit_placement_reranker` trains one on a store's own filed tree; on
WordNet's unseen test nouns it moved ``parent="auto"`` within 2 hops of the true parent from
0.566 to 0.653 (benchmarks/RESULTS.md, "a placement reranker in the store").

A saved reranker is a sentence-transformers ``CrossEncoder`` folder (``modules.json`` naming one
Transformer, ``config.json``, ``model.safetensors``, the tokenizer) plus
``hypermem_reranker.json``::

    {"format": "hypermem-placement-reranker", "version": 1, "weight": w, "candidates": n,
     "rule": {"first": nu, "cos": a}, "max_length": tokens, "base": "...", "config": {...}}

Loading checks every field, reads only ``safetensors`` weights, names only the activations of
:data:`ACTIVATIONS`, never runs code from the folder and never writes into it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .encoder_folder import EncoderFolderError, check_integer, check_modules, check_number, check_weight
from .file_modes import give_normal_modes
from .folder_files import present, read_json, save_folder, scan_folder
from .module_checks import check_loaded_weights, check_transformer, load_errors
from .sentence_transformer import local_minilm_path, quiet_loading

__all__ = ["ACTIVATIONS", "CANDIDATES", "CONFIG_FILE", "RULE", "WEIGHT", "PlacementReranker", "RerankerFolderError",
           "check_save_folder"]

CONFIG_FILE = "hypermem_reranker.json"
FORMAT = "hypermem-placement-reranker"
VERSION = 1
TRANSFORMER = ("sentence_transformers.base.modules.transformer.Transformer",
               "sentence_transformers.models.Transformer")
ACTIVATIONS = ("torch.nn.modules.activation.Sigmoid", "torch.nn.modules.linear.Identity")
"""The output activations a folder may name (sentence-transformers imports the class it names)."""
WEIGHT = 0.05
"""``w``: the cross-encoder's weight beside the rule, chosen on WordNet's validation nouns
(5-fold cross-validation chose 0.025-0.075; benchmarks/RESULTS.md)."""
CANDIDATES = 20
"""How many of the rule's best candidates the cross-encoder re-scores."""
RULE = {"first": 0.0, "cos": 0.1}
"""The rule's ``nu`` and ``a`` beside the reranker, chosen with ``w`` on WordNet's validation
nouns (a grid over ``mu``, ``nu``, ``a`` and ``w``: 0.634 -> 0.657 within 2 hops; 5-fold CV
0.649; benchmarks/RESULTS.md, "a placement reranker in the store")."""


@contextlib.contextmanager
def _quiet():
    """No progress bar and no report of the new head's weights ("newly initialized": expected
    for a reranker made from an embedding model) while a cross-encoder loads or saves."""
    from transformers.utils import logging as hf_logging
    level, st_log = hf_logging.get_verbosity(), logging.getLogger("sentence_transformers")
    st_level = st_log.level
    hf_logging.set_verbosity_error()
    st_log.setLevel(logging.ERROR)   # "Converting SentenceTransformer model ... to CrossEncoder"
    try:
        with quiet_loading():
            yield
    finally:
        hf_logging.set_verbosity(level)
        st_log.setLevel(st_level)


def check_save_folder(path: str | os.PathLike) -> Path:
    """The folder :meth:`PlacementReranker.save` may write: new, empty, or a reranker folder (one
    holding :data:`CONFIG_FILE`) that it saves over, as the encoder's ``save`` does; a file, or a
    folder holding other files, raises ``FileExistsError`` (nothing of the user's is overwritten)."""
    return save_folder(path, CONFIG_FILE, "placement reranker")


class RerankerFolderError(EncoderFolderError):
    """A folder that is not a loadable placement reranker; the message names the file and field."""


def check_model_folder(folder: Path, *, base: bool = False) -> bool:
    """A cross-encoder folder that loads without running code: ``modules.json`` names one
    sentence-transformers Transformer at the root (``base``: or the modules of a sentence
    embedding model, :func:`~hypermem.embed.encoder_folder.check_folder`, whose Transformer a
    new reranker starts from), the activation is one of :data:`ACTIVATIONS`, the Transformer's
    files pass :func:`~hypermem.embed.module_checks.check_transformer` (``safetensors`` weights,
    no pickle file or symlink out of the folder anywhere); raises :class:`RerankerFolderError`
    naming the file and field.  Returns whether it is a cross-encoder's folder (else an
    embedding model's, whose new head is expected to be missing from its weights)."""
    try:
        return _check_model_folder(folder, base)
    except RerankerFolderError:
        raise
    except EncoderFolderError as exc:   # the shared checks raise the encoder folder's error
        raise RerankerFolderError(str(exc)) from None


def _check_model_folder(folder: Path, base: bool) -> bool:
    if not folder.is_dir():
        raise RerankerFolderError(f"{folder}: not a folder")
    scan_folder(folder)
    path = folder / "modules.json"
    if not present(path):
        raise RerankerFolderError(f"{folder}: no modules.json (not a sentence-transformers CrossEncoder folder)")
    modules = read_json(path, folder)
    if (not isinstance(modules, list) or len(modules) != 1 or not isinstance(modules[0], dict)
            or modules[0].get("type") not in TRANSFORMER or modules[0].get("path", "") != ""):
        if base and isinstance(modules, list) and len(modules) > 1:
            check_modules(folder)
            return False
        raise RerankerFolderError(f"{path}: a placement reranker holds exactly one sentence-transformers "
                                  "Transformer at the folder's root")
    st_path = folder / "config_sentence_transformers.json"
    st_conf = read_json(st_path, folder) if present(st_path) else {}
    if not isinstance(st_conf, dict) or st_conf.get("model_type", "CrossEncoder") != "CrossEncoder":
        raise RerankerFolderError(f"{st_path}: field 'model_type' must be 'CrossEncoder'")
    if st_conf.get("activation_fn", ACTIVATIONS[0]) not in ACTIVATIONS:
        raise RerankerFolderError(f"{st_path}: field 'activation_fn' must be one of {ACTIVATIONS}, "
                                  f"got {st_conf.get('activation_fn')!r}")
    check_transformer(folder, "", task="sequence-classification", out_name="scores")
    return True


def check_folder(folder: Path) -> dict[str, Any]:
    """The checked fields of ``hypermem_reranker.json`` after :func:`check_model_folder`;
    raises :class:`RerankerFolderError` naming the file and field."""
    check_model_folder(folder)
    path = folder / CONFIG_FILE
    if not present(path):
        raise RerankerFolderError(f"{folder}: no {CONFIG_FILE} (not saved by PlacementReranker.save)")
    try:
        raw = read_json(path, folder)
    except EncoderFolderError as exc:
        raise RerankerFolderError(str(exc)) from None
    if not isinstance(raw, dict):
        raise RerankerFolderError(f"{path}: expected a JSON object")
    extra = sorted(set(raw) - {"format", "version", "weight", "candidates", "rule", "max_length", "base", "config"})
    if extra:
        raise RerankerFolderError(f"{path}: unknown field(s) {extra}")
    if raw.get("format") != FORMAT or raw.get("version") != VERSION:
        raise RerankerFolderError(f"{path}: fields 'format'/'version' must be {FORMAT!r}/{VERSION}, got "
                                  f"{raw.get('format')!r}/{raw.get('version')!r}")
    if not isinstance(raw.get("base", ""), str) or not isinstance(raw.get("config", {}), dict):
        raise RerankerFolderError(f"{path}: field 'base' must be a string and 'config' an object")
    rule = raw.get("rule", RULE)
    if not isinstance(rule, dict) or sorted(rule) != sorted(RULE):
        raise RerankerFolderError(f"{path}: field 'rule' must be an object with the keys {sorted(RULE)}")
    try:   # the shared checkers raise the encoder folder's error: name the reranker's
        return {"rule": {k: check_number(v, f"{path}: field 'rule.{k}'") for k, v in rule.items()},
                "weight": check_weight(raw.get("weight"), f"{path}: field 'weight'"),
                "candidates": check_integer(raw.get("candidates"), f"{path}: field 'candidates'", 1, 1000),
                "max_length": check_integer(raw.get("max_length"), f"{path}: field 'max_length'", 8, 512),
                "base": raw.get("base", ""), "config": raw.get("config", {})}
    except EncoderFolderError as exc:
        raise RerankerFolderError(str(exc)) from None


def _transformer_path(folder: Path) -> str:
    """The Transformer's path in an embedding model's folder (checked by :func:`check_modules`)."""
    return read_json(folder / "modules.json", folder)[0].get("path", "")


class PlacementReranker:
    """A cross-encoder that re-scores a store's candidate parents (module docstring).

    >>> r = PlacementReranker()                       # all-MiniLM-L6-v2 with a new head: train it first
    >>> r.scores("kookaburra: a large kingfisher", ["kingfisher", "cry"]).shape
    torch.Size([2])

    ``model``: None (the offline all-MiniLM-L6-v2 with a new one-logit head), a folder (a
    CrossEncoder's, or a sentence embedding model's to start from; checked as :meth:`load`
    checks it) or a loaded ``sentence_transformers.CrossEncoder``.  Give it to a store that
    holds a tree (``mem.reranker = PlacementReranker.load(folder)``):
    ``suggest_parents`` and ``add(text, parent="auto")`` then re-score the rule's best
    ``candidates`` by ``rule + weight * ce``.
    """

    def __init__(self, model: Any = None, *, weight: float = WEIGHT, candidates: int = CANDIDATES,
                 rule: dict | None = None, max_length: int = 96, base: str = "", config: dict | None = None,
                 device: str | None = None):
        if model is None or isinstance(model, (str, os.PathLike)):
            try:
                from sentence_transformers.cross_encoder import CrossEncoder
            except ImportError as exc:
                raise ImportError('PlacementReranker needs sentence-transformers: pip install "hypermem-torch[embed]"'
                                  ) from exc
            source = local_minilm_path() if model is None else str(model)
            folder = Path(source)
            cross = check_model_folder(folder, base=True)   # a folder's own code is never run
            with _quiet():
                try:
                    model = CrossEncoder(source, num_labels=1, max_length=max_length, device=device or "cpu",
                                         trust_remote_code=False, local_files_only=True)
                except load_errors() as exc:
                    raise RerankerFolderError(f"{folder}: the model does not load from its files "
                                              f"({type(exc).__name__}: {str(exc)[:300]})") from None
            rel = "" if cross else _transformer_path(folder)
            try:
                check_loaded_weights(folder, folder / rel, model.model, head_may_be_new=not cross)
            except EncoderFolderError as exc:
                raise RerankerFolderError(str(exc)) from None
            base = base or source
        self.model = model
        self.weight = float(check_weight(weight, "weight"))
        self.candidates = check_integer(candidates, "candidates", 1, 1000)
        rule = dict(RULE if rule is None else rule)
        if sorted(rule) != sorted(RULE):
            raise ValueError(f"rule must have the keys {sorted(RULE)}, got {sorted(rule)}")
        self.rule = {k: float(check_number(v, f"rule[{k!r}]")) for k, v in rule.items()}
        self.max_length = check_integer(max_length, "max_length", 8, 512)
        self.base = str(base)
        self.config = dict(config or {})
        self._checksum: tuple | None = None   # (the settings it was computed with, the checksum)

    def __repr__(self) -> str:
        return (f"PlacementReranker(weight={self.weight}, candidates={self.candidates}, rule={self.rule}, "
                f"max_length={self.max_length}, base={self.base!r})")

    @torch.inference_mode()
    def scores(self, text: str, candidates: Sequence[str], batch_size: int = 32) -> torch.Tensor:
        """The cross-encoder's logit ``ce(text, c)`` of each candidate text, ``(m,)`` float64
        (higher: ``c`` is more likely ``text``'s parent)."""
        if not isinstance(text, str) or not all(isinstance(c, str) for c in candidates):
            raise TypeError("a reranker scores a text against candidate texts (str)")
        if not candidates:
            return torch.zeros(0, dtype=torch.float64)
        net, tok = self.model.model, self.model.tokenizer
        was = net.training
        net.eval()
        device = next(net.parameters()).device
        out = []
        try:
            for s in range(0, len(candidates), batch_size):
                part = list(candidates[s:s + batch_size])
                enc = tok([text] * len(part), part, truncation=True, max_length=self.max_length, padding=True,
                          return_tensors="pt").to(device)
                out.append(net(**enc).logits.reshape(-1).to("cpu", torch.float64))
        finally:
            net.train(was)
        return torch.cat(out)

    @property
    def checksum(self) -> str:
        """``"sha256:<hex>"`` of the weights, ``weight``, ``candidates``, ``rule`` and token limit
        (hashed once per setting: every ``add(parent="auto")`` records it; :meth:`save` and
        :func:`~hypermem.hierarchy.fit_placement_reranker` hash the weights afresh)."""
        key = (self.weight, self.candidates, tuple(sorted(self.rule.items())), self.max_length)
        known = self._checksum   # read once: another thread's forget_checksum() may set it to None
        if known is None or known[0] != key:
            h = hashlib.sha256(repr(key).encode())
            for name, p in sorted(self.model.model.state_dict().items()):
                h.update(name.encode())
                h.update(p.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes())   # any dtype
            known = self._checksum = (key, "sha256:" + h.hexdigest())
        return known[1]

    def forget_checksum(self) -> None:
        """Hash the weights afresh at the next :attr:`checksum` (after training them in place)."""
        self._checksum = None

    def save(self, path: str | os.PathLike) -> Path:
        """Write the reranker to folder ``path`` (module docstring); returns the folder.  An existing
        reranker folder (one holding ``hypermem_reranker.json``) is saved over; a file, or a folder
        holding other files, is refused (``FileExistsError``, :func:`check_save_folder`).  Every file
        gets ``0o666`` less the umask, the weights too (:mod:`~hypermem.embed.file_modes`)."""
        folder = check_save_folder(path)
        folder.mkdir(parents=True, exist_ok=True)
        with _quiet():
            self.model.save(str(folder), safe_serialization=True)
        conf = {"format": FORMAT, "version": VERSION, "weight": self.weight, "candidates": self.candidates,
                "rule": self.rule, "max_length": self.max_length, "base": self.base, "config": self.config}
        (folder / CONFIG_FILE).write_text(json.dumps(conf, indent=2) + "\n", encoding="utf-8")
        give_normal_modes(folder)   # safetensors' weights file arrives 0o600 (a renamed mkstemp file)
        self.forget_checksum()
        return folder

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | None = None) -> PlacementReranker:
        """A reranker saved by :meth:`save`, checked field by field before anything loads."""
        folder = Path(path)
        conf = check_folder(folder)
        return cls(folder, device=device, **conf)
