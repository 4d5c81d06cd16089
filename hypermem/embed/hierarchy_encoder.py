r"""A text encoder whose output is a point of a Poincaré ball (or, for its twin, of R^d).

Hierarchy Transformers (HiT: He, Yuan, Chen & Horrocks, "Language Models as Hierarchy
Encoders", NeurIPS 2024, arXiv 2401.11374) re-train a sentence encoder so that the
geometry of its outputs carries a hierarchy: a parent lies near its children and nearer
the origin.  The construction, kept here:

* a sentence-transformers model of a transformer and a **mean pooling, no normalisation**;
* its output ``x in R^d`` read as a point of the Poincaré ball of curvature ``-c``,
  ``c = 1/d``: the ball of radius ``sqrt(d)`` circumscribes the output space (all-MiniLM-L6-v2's
  mean-pooled outputs have Euclidean norms 6-8, well inside ``sqrt(384) = 19.6``); a point
  on or beyond the boundary is pulled back inside (:func:`hypermem.geometry.poincare.project`);
* "``c`` is-a ``p``" scored by ``-(d_c(c, p) + lambda (d_c(0, p) - d_c(0, c)))``
  (:func:`hypermem.geometry.subsumption.hit_subsumption_score`), ``lambda`` and a decision
  threshold chosen on validation data.

``geometry="euclidean"`` is the twin: the same model, the same pooling, the point read in
R^d and scored by ``-(||c - p|| + lambda (||p|| - ||c||))``; trained by
:func:`hypermem.hierarchy.fit_hierarchy_encoder` with the same data, negatives, budget and the
Euclidean analogues of the losses, it answers whether the ball itself helps.

The encoder is an :class:`~hypermem.embed.Embedder` (``dim`` and ``embed``), so a store
accepts it.  It saves itself as a sentence-transformers folder with one extra file
(:mod:`hypermem.embed.encoder_folder`), and loads folders written by the
``hierarchy-transformers`` package.

Example::

    >>> enc = HierarchyEncoder.from_pretrained("all-MiniLM-L6-v2")   # doctest: +SKIP
    >>> x = enc.encode(["dog", "animal"])                              # doctest: +SKIP
    >>> enc.subsumption_scores(x[:1], x[1:])                           # doctest: +SKIP
    tensor([-7.8911])
    >>> enc.subsumption_scores(x[:, None], x[None, :]).shape           # doctest: +SKIP
    torch.Size([2, 2])
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..geometry.poincare import project
from ..geometry.subsumption import geometry_distance, geometry_norm, score_from_terms
from .base import check_texts
from .encoder_folder import (
    CONFIG_FILE,
    GEOMETRIES,
    EncoderFolderError,
    EncoderSettings,
    check_folder,
    not_an_encoder_folder,
    read_settings,
)
from .file_modes import give_normal_modes
from .folder_files import drop_stale_module_dirs, present, save_folder, saved_module_dirs
from .module_checks import check_loaded_weights, float32_kwargs, load_errors
from .progress import interactive
from .sentence_transformer import load_sentence_transformer, quiet_loading

__all__ = ["HierarchyEncoder", "EncoderFolderError", "check_save_folder"]


def _sentence_transformers():
    try:
        import sentence_transformers
    except ImportError as exc:
        raise ImportError('HierarchyEncoder needs sentence-transformers: pip install "hypermem-torch[embed]"') from exc
    return sentence_transformers


def _st_module(name: str):
    """The sentence-transformers module class ``name`` (``Pooling``, ``Dense``)."""
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer import modules
    except ImportError:  # 3.x - 5.x
        from sentence_transformers import models as modules
    return getattr(modules, name)


def check_save_folder(path: str | os.PathLike) -> Path:
    """The folder :meth:`HierarchyEncoder.save` may write: new, empty, or an encoder folder (one
    holding :data:`CONFIG_FILE`) that it saves over; a file, or a folder holding other files,
    raises ``FileExistsError`` (checked again before a training run that will save there)."""
    return save_folder(path, CONFIG_FILE, "hypermem encoder")


class HierarchyEncoder:
    """A sentence encoder into the Poincaré ball (``geometry="poincare"``) or R^d (its twin).

    Build one with :meth:`from_pretrained` (an untrained base model), :meth:`load` (a saved
    folder, hypermem's or HiT's) or :func:`hypermem.hierarchy.fit_hierarchy_encoder`.

    Attributes: ``model`` (the :class:`sentence_transformers.SentenceTransformer`, an
    ``nn.Module``), ``geometry``, ``dim``, ``curvature`` (``1/dim`` in the ball, ``None`` in
    R^d), ``centripetal_weight`` (the score's ``lambda``), ``threshold`` (the score above which
    :meth:`predict` says "is-a"; ``None`` until chosen on validation), ``ranking_weight`` (the
    ``lambda`` that ranks candidate parents best, chosen on validation by mean reciprocal rank;
    ``None``: ``centripetal_weight``; :attr:`ranking_lambda` is the one in use), ``max_length`` (tokens
    kept per text), ``metrics`` (the validation figures recorded at training).
    """

    returns_fresh_tensors = True

    def __init__(self, model, geometry: str = "poincare", *, centripetal_weight: float = 1.0,
                 threshold: float | None = None, max_length: int = 32, batch_size: int = 128,
                 base: str = "", metrics: dict[str, float] | None = None,
                 config: dict[str, Any] | None = None, ranking_weight: float | None = None) -> None:
        if geometry not in GEOMETRIES:
            raise ValueError(f"geometry must be one of {GEOMETRIES}, got {geometry!r}")
        self.model = model
        self.geometry = geometry
        self._dim = int(self._pooled_dim(model))
        self.curvature = 1.0 / self._dim if geometry == "poincare" else None
        self.centripetal_weight = float(centripetal_weight)
        self.threshold = None if threshold is None else float(threshold)
        self.ranking_weight = None if ranking_weight is None else float(ranking_weight)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.base = base
        self.metrics = dict(metrics or {})
        self.config = dict(config or {})
        self.source: str | None = None

    @staticmethod
    def _pooled_dim(model) -> int:
        getdim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return getdim()

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, base: str = "all-MiniLM-L6-v2", geometry: str = "poincare", *,
                        device: str | torch.device | None = None, max_length: int = 32,
                        dim: int | None = None, **kwargs: Any) -> HierarchyEncoder:
        """An untrained encoder on ``base``: its transformer and pooling, mean pooling
        forced, any normalisation dropped (HiT's construction).

        ``dim`` (default: the base's width) adds a trained head ``tanh(W x + b)`` to ``dim``
        coordinates (a sentence-transformers ``Dense`` module): its outputs lie in the cube
        ``[-1, 1]^dim``, which the ball of curvature ``1/dim`` (radius ``sqrt(dim)``)
        circumscribes, as HiT's ball does the base's outputs.  A small ``dim`` is where a
        tree is known to fit a ball better than R^d (Nickel & Kiela 2017; Sala et al. 2018)."""
        st = _sentence_transformers()
        with quiet_loading():
            # strictly local (a folder, the bundled MiniLM, the local cache): an unknown name fails at once
            source = load_sentence_transformer(base, "base", device=str(device or "cpu"),
                                               model_kwargs=float32_kwargs())
        transformer = source[0]
        pooling = _st_module("Pooling")(cls._pooled_dim(source), pooling_mode="mean")
        transformer.max_seq_length = int(max_length)
        modules = [transformer, pooling]
        if dim is not None:
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
                raise ValueError(f"dim must be an integer >= 2 (or None for the base's width), got {dim!r}")
            modules.append(_st_module("Dense")(cls._pooled_dim(source), dim, activation_function=torch.nn.Tanh()))
        model = st.SentenceTransformer(modules=modules, device=str(device or "cpu"))
        return cls(model, geometry, max_length=max_length, base=str(base), **kwargs)

    @classmethod
    def load(cls, path: str | os.PathLike, *, device: str | torch.device | None = None) -> HierarchyEncoder:
        """Load a folder written by :meth:`save` or by the ``hierarchy-transformers`` package.

        The folder is checked first (:mod:`hypermem.embed.encoder_folder`: only
        sentence-transformers Transformer and Pooling modules and a Dense head, ``safetensors`` weights, every
        field of ``hypermem_encoder.json``); nothing in it runs code, nothing is written.  The model
        is float32 whatever ``config.json``'s ``dtype`` says; a HiT folder keeps its own max length."""
        folder = Path(path)
        hint = not_an_encoder_folder(folder)
        if hint:
            raise EncoderFolderError(hint)
        if not folder.is_dir():
            raise FileNotFoundError(f"no such encoder folder: {str(path)!r}")
        modules, rels, config = check_folder(folder)
        if "Normalize" in modules and not present(folder / CONFIG_FILE):
            raise EncoderFolderError(f"{folder}: a sentence-transformers model that normalises its output, "
                                     "not a hierarchy encoder; start one from it with "
                                     "HierarchyEncoder.from_pretrained(path)")
        st = _sentence_transformers()
        with quiet_loading():
            try:
                model = st.SentenceTransformer(str(folder), device=str(device or "cpu"), trust_remote_code=False,
                                               local_files_only=True, model_kwargs=float32_kwargs())
            except load_errors() as exc:
                if isinstance(exc, EncoderFolderError):
                    raise
                raise EncoderFolderError(f"{folder}: the model does not load from its files ({type(exc).__name__}: "
                                         f"{str(exc)[:300]})") from None
        check_loaded_weights(folder, folder / rels[0], model[0].auto_model)
        if "Normalize" in modules:
            model = st.SentenceTransformer(modules=[model[0], model[1]], device=str(device or "cpu"))
        s = read_settings(folder, cls._pooled_dim(model), config.get("max_position_embeddings"),
                          model[0].max_seq_length)
        enc = cls(model, s.geometry, centripetal_weight=s.centripetal_weight, threshold=s.threshold,
                  max_length=s.max_length, base=s.base, metrics=s.metrics, config=s.config,
                  ranking_weight=s.ranking_weight)
        enc.curvature = s.curvature   # as saved (1/dim unless the file says otherwise)
        model[0].max_seq_length = enc.max_length
        enc.source = str(folder.resolve())
        return enc

    def settings(self) -> EncoderSettings:
        """What :meth:`save` writes to ``hypermem_encoder.json``."""
        return EncoderSettings(self.geometry, self.dim, self.curvature, self.centripetal_weight, self.threshold,
                               self.max_length, self.base, self.metrics, self.config, self.ranking_weight)

    @property
    def ranking_lambda(self) -> float:
        """The ``lambda`` for ranking candidate parents: :attr:`ranking_weight` when chosen,
        else :attr:`centripetal_weight`."""
        return self.centripetal_weight if self.ranking_weight is None else self.ranking_weight

    def save(self, path: str | os.PathLike) -> str:
        """Write the encoder to the folder ``path`` (created; the sentence-transformers layout
        plus ``hypermem_encoder.json``); returns the folder's path.  An existing encoder folder
        (one holding ``hypermem_encoder.json``) is saved over, as sentence-transformers does, and
        the module folders of the earlier save that the new one does not use are removed
        (:func:`~hypermem.embed.folder_files.drop_stale_module_dirs`); a
        file, or a folder holding other files, is refused (``FileExistsError``): nothing mixes.
        Every file gets ``0o666`` less the umask, the weights too (:mod:`~hypermem.embed.file_modes`)."""
        import json

        folder = check_save_folder(path)
        earlier = saved_module_dirs(folder) if present(folder / CONFIG_FILE) else []
        folder.mkdir(parents=True, exist_ok=True)
        with quiet_loading():
            self.model.save(str(folder), safe_serialization=True)
        drop_stale_module_dirs(folder, earlier)
        tmp = folder / (CONFIG_FILE + ".tmp")
        tmp.write_text(json.dumps(self.settings().to_json(), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, folder / CONFIG_FILE)
        give_normal_modes(folder)   # safetensors' weights file arrives 0o600 (a renamed mkstemp file)
        self.source = str(folder.resolve())  # a store placed by this encoder records where it lives
        return str(folder)

    # -- the embedder protocol ------------------------------------------------------------
    @property
    def dim(self) -> int:
        return self._dim

    @property
    def device(self) -> torch.device:
        return self.model.device

    def __repr__(self) -> str:
        c = f", curvature={self.curvature:.4g}" if self.curvature is not None else ""
        t = "None" if self.threshold is None else f"{self.threshold:.4g}"
        return (f"HierarchyEncoder(geometry={self.geometry!r}, dim={self.dim}{c}, "
                f"centripetal_weight={self.centripetal_weight:.3g}, threshold={t}, base={self.base!r})")

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """The model's input features for ``texts`` (truncated to ``max_length`` tokens)."""
        tok = self.model.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt")
        return {k: v.to(self.device) for k, v in tok.items()}

    def to_manifold(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled output as a point: pulled inside the ball (``poincare``), as is in R^d."""
        return project(x, self.curvature) if self.geometry == "poincare" else x

    def forward_features(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Points of tokenised inputs, with gradients (the training path)."""
        return self.to_manifold(self.model(dict(features))["sentence_embedding"])

    @torch.no_grad()
    def encode(self, texts: Sequence[str], *, batch_size: int | None = None,
               show_progress_bar: bool | None = None) -> torch.Tensor:
        """Points of ``texts``: a float32 tensor ``(n, dim)`` on the model's device, in
        batches (sorted by length inside, as sentence-transformers does); a progress bar
        only when there is more than one batch and standard error is a terminal or this is a
        notebook (:func:`hypermem.embed.progress.interactive`)."""
        texts = check_texts(texts)
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer (None: {self.batch_size}), got {batch_size!r}")
        bs = int(batch_size or self.batch_size)
        if show_progress_bar is None:
            show_progress_bar = len(texts) > bs and interactive()
        was = self.model.training
        self.model.eval()
        try:
            x = self.model.encode(texts, batch_size=bs, convert_to_tensor=True, show_progress_bar=show_progress_bar,
                                  normalize_embeddings=False)
        finally:
            self.model.train(was)
        if len(texts) == 0:
            return torch.zeros(0, self.dim, device=self.device)
        return self.to_manifold(x.float())

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """:meth:`encode` as an :class:`~hypermem.embed.Embedder`: float64 on the CPU."""
        return self.encode(texts).to(device="cpu", dtype=torch.float64)

    # -- scoring ---------------------------------------------------------------------------
    @staticmethod
    def _as_tensor(x) -> torch.Tensor | None:
        """``x`` as points when it is a tensor or a numeric NumPy array (``encode(...).numpy()``),
        else None (texts)."""
        if isinstance(x, torch.Tensor):
            return x
        if isinstance(x, np.ndarray) and x.dtype.kind in "fiu":
            return torch.from_numpy(x)
        return None

    def _points(self, x) -> torch.Tensor:
        t = self._as_tensor(x)
        if t is not None:
            x = t
            if x.shape[-1] != self.dim:
                raise ValueError(f"points must have {self.dim} coordinates in their last dimension, "
                                 f"got shape {tuple(x.shape)}")
            if not bool(torch.isfinite(x).all()):
                raise ValueError("points must be finite: got NaN or infinite coordinates")
            if self.curvature is not None:
                norm = float(x.detach().double().norm(dim=-1).max()) if x.numel() else 0.0
                if norm * math.sqrt(self.curvature) >= 1.0:
                    raise ValueError(f"points must lie inside the ball of radius {1 / math.sqrt(self.curvature):.4g} "
                                     f"(sqrt(dim)): one has norm {norm:.4g}; encode() gives points inside, "
                                     "hypermem.geometry.poincare.project pulls others in")
            return x
        return self.encode(x)

    def norms(self, points: torch.Tensor) -> torch.Tensor:
        """Each point's distance from the origin (hyperbolic in the ball, Euclidean in R^d):
        the depth the centripetal term compares."""
        return geometry_norm(points, self.curvature)

    def score_terms(self, child: torch.Tensor, parent: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(d(c, p), h(c), h(p))`` of points (broadcast like :meth:`subsumption_scores`): the
        score is ``-(d + lambda (h(p) - h(c)))`` for any ``lambda``
        (:func:`hypermem.geometry.subsumption.score_from_terms`)."""
        return geometry_distance(child, parent, self.curvature), self.norms(child), self.norms(parent)

    def subsumption_scores(self, child: Iterable[str] | torch.Tensor | np.ndarray,
                           parent: Iterable[str] | torch.Tensor | np.ndarray,
                           centripetal_weight: float | None = None) -> torch.Tensor:
        """How likely "``child`` is-a ``parent``" is; higher is likelier.

        ``child`` and ``parent`` are lists of texts (scored pairwise, the same length; a single
        string is refused, as by :meth:`encode`) or
        points from :meth:`encode` (tensors, or their NumPy arrays), broadcast over leading dimensions: ``(n, 1, d)``
        against ``(1, m, d)`` gives ``(n, m)``.  The ball's score is HiT's
        ``-(d(c, p) + lambda (|p| - |c|))`` with hyperbolic norms, the twin's
        ``-(||c - p|| + lambda (||p|| - ||c||))`` (:mod:`hypermem.geometry.subsumption`);
        ``lambda`` is ``centripetal_weight`` (default: the one chosen on validation)."""
        # texts read once: a generator or any other iterable is listed before it is counted; a single
        # string is refused as encode() refuses it (its characters are not texts)
        child, parent = (x if self._as_tensor(x) is not None else check_texts(x) if isinstance(x, str) else list(x)
                         for x in (child, parent))
        if self._as_tensor(child) is None and self._as_tensor(parent) is None and len(child) != len(parent):
            raise ValueError(f"texts are scored pairwise: got {len(child)} children and {len(parent)} parents "
                             "(pass encoded points shaped (n, 1, d) and (1, m, d) for all pairs)")
        lam = self.centripetal_weight if centripetal_weight is None else centripetal_weight
        try:
            lam = float(lam)
        except (TypeError, ValueError):
            lam = math.nan
        if not math.isfinite(lam):
            raise ValueError(f"centripetal_weight must be a finite number, got {centripetal_weight!r}"
                             + ("" if centripetal_weight is not None else " (the encoder's centripetal_weight)"))
        c, p = self._points(child), self._points(parent)
        p = p.to(device=c.device, dtype=c.dtype)
        return score_from_terms(*self.score_terms(c, p), lam)

    def predict(self, child: Iterable[str] | torch.Tensor | np.ndarray,
                parent: Iterable[str] | torch.Tensor | np.ndarray) -> torch.Tensor:
        """``subsumption_scores(child, parent) > threshold`` (the threshold chosen on validation)."""
        if self.threshold is None:
            raise ValueError("this encoder has no threshold yet: choose one on validation data "
                             "(hypermem.hierarchy.encoder_eval.choose_operating_point) or train it with "
                             "fit_hierarchy_encoder, which does")
        return self.subsumption_scores(child, parent) > self.threshold
