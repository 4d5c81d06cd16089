r"""A store whose points a hierarchy encoder places, and the record of which encoder did.

With a :class:`~hypermem.embed.HierarchyEncoder` of ``geometry="poincare"`` as its embedder, a
:class:`~hypermem.store.Memory` lives in the encoder's own ball (curvature ``c = 1/d`` for
HiT's ball, whatever the encoder says) and a memory's point **is** the encoder's point
``x = enc(text)``: its direction ``u = x / ||x||`` and its depth, the hyperbolic distance from
the origin

``r = d_c(0, x) = (2 / sqrt(c)) artanh(sqrt(c) ||x||)``

(Nickel & Kiela 2017; :func:`hypermem.geometry.poincare.distance_to_origin`), so that a
general text sits nearer the origin than a specific one without anyone declaring a parent
(He et al., "Language Models as Hierarchy Encoders", NeurIPS 2024).  A declared ``parent=``
still links the memories (subtree, ancestors, the tree) but moves no point.  Such a store
searches with ``metric="hyperbolic"`` by default, a text query at its own point.  The
Euclidean twin (``geometry="euclidean"``) is an ordinary embedder to the store: directions
from its vectors, depths from the declared levels, as for any embedder.

**The encoder's record.**  Either geometry is recorded in the store's config (``save``,
``to_json``, ``Memory.open``: SQLite and PostgreSQL) as ``config["encoder"]``::

    {"geometry", "dim", "curvature", "centripetal_weight", "ranking_weight", "threshold",
     "folder": the folder it was loaded from (or null), "checksum": "sha256:<hex>"}

The checksum is the SHA-256 of what places a point: the geometry, the curvature, the token
limit, every tensor of the model's ``state_dict`` (names, dtypes, shapes, bytes) and, since
version 2 (``"sha256v2:<hex>"``), what has no tensor: each module's kind, the pooling mode,
the Dense head's activation, the prompts, and the tokenizer (its vocabulary and the token ids
of :data:`PROBE` texts, which differ when lower-casing, accents or splitting differ).  A copy
of the folder elsewhere has the same checksum and a re-trained encoder, or the same weights
under another pooling or tokenizer, another.  A store recorded with a version-1 checksum
(``"sha256:<hex>"``, weights only) is still compared by version 1, so it keeps loading; saving
it again records version 2.  Loading or opening such a store with a different encoder (or
with none, or with an encoder for a store recorded without one) is a ``ValueError`` naming both.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch

from ..embed.choice import StandIn
from ..embed.encoder_kind import is_hierarchy_encoder, places_points
from ..geometry import poincare as P
from .checks import max_depth
from .validation import MemoryFileError, short

__all__ = ["ENCODER_KEY", "PROBE", "check_encoder", "checksum_matches", "encoder_checksum", "encoder_placement", "encoder_record",
           "hierarchy_encoder", "is_hierarchy_encoder", "places_points", "store_defaults"]

ENCODER_KEY = "encoder"
"""The config key of the encoder's record."""


def hierarchy_encoder(memory: Any, what: str) -> Any:
    """The store's embedder when it is a hierarchy encoder, else a ``ValueError`` for ``what``."""
    enc = memory.embedder
    if not is_hierarchy_encoder(enc):
        raise ValueError(f"{what} needs a hierarchy encoder as the store's embedder "
                         f"(Memory(embedder=HierarchyEncoder.load(path))); this store embeds with "
                         f"{type(enc).__name__}")
    return enc


def store_defaults(embedder: Any, curvature: float | None, metric: str | None) -> tuple[float, str]:
    """The store's ``curvature`` and ``metric``: the encoder's ball and ``"hyperbolic"`` for a
    ball encoder (another curvature is refused), else ``1.0`` and ``"shell"`` unless given."""
    if not places_points(embedder):
        return (1.0 if curvature is None else curvature), ("shell" if metric is None else metric)
    c = float(embedder.curvature)
    if curvature is not None and not math.isclose(float(curvature), c, rel_tol=1e-9):
        raise ValueError(f"a store placed by a hierarchy encoder lives in the encoder's ball (curvature {c:.6g}); "
                         f"got curvature={curvature!r}: omit curvature=")
    return c, ("hyperbolic" if metric is None else metric)


def encoder_placement(points: torch.Tensor, c: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit directions ``x / ||x||`` and depths ``d_c(0, x)`` of encoder points ``x`` (float64)."""
    x = points.to(torch.float64)
    n = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    return x / n.clamp_min(1e-300), P.distance_to_origin(x, c).reshape(-1).clamp_max_(max_depth(c))


PROBE = ("Dog House", "ÉCOLE naïve CAFÉ", "a bird's-eye view: 3.14 - über", "中文 テキスト", "UPPER lower MiXeD ##x")
"""Texts whose token ids fingerprint a tokenizer's normalisation (lower-casing, accents, splitting)."""
CHECKSUM_VERSIONS = {1: "sha256:", 2: "sha256v2:"}


def encoder_checksum(encoder: Any, version: int = 2) -> str:
    """``"sha256v2:<hex>"`` of what places the encoder's points (module docstring);
    ``version=1``: ``"sha256:<hex>"`` of its geometry, curvature, token limit and weights only
    (the checksum of stores saved before version 2)."""
    h = hashlib.sha256()
    head = f"{encoder.geometry}|{encoder.curvature!r}|{getattr(encoder, 'max_length', None)!r}|"
    h.update(head.encode())
    model = getattr(encoder, "model", None)
    state = model.state_dict() if model is not None and hasattr(model, "state_dict") else {}
    for name in sorted(state):
        t = state[name].detach()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    if version >= 2:
        _hash_placement(h, model)
    return CHECKSUM_VERSIONS[version] + h.hexdigest()


def _hash_placement(h: Any, model: Any) -> None:
    """What places a point without a tensor: modules, pooling, activation, prompts, tokenizer."""
    for m in (list(model) if isinstance(model, torch.nn.Sequential) else []):
        act = getattr(m, "activation_function", None)
        parts = [type(m).__name__, getattr(m, "pooling_mode", None), getattr(m, "include_prompt", None),
                 getattr(m, "do_lower_case", None), None if act is None else type(act).__qualname__]
        h.update(("module|" + repr(parts) + "|").encode())
    h.update(f"prompts|{getattr(model, 'default_prompt_name', None)!r}|"
             f"{sorted((getattr(model, 'prompts', None) or {}).items())!r}|".encode())
    tok = getattr(model, "tokenizer", None)
    if tok is not None and callable(getattr(tok, "get_vocab", None)):
        h.update(("vocab|" + repr(sorted(tok.get_vocab().items())) + "|").encode())
        prep = getattr(model, "preprocess", None) or getattr(model, "tokenize", None)   # preprocess: s-t >= 6
        features = prep(list(PROBE)) if callable(prep) else tok(list(PROBE))
        ids = features["input_ids"]
        h.update(("probe|" + repr(ids.tolist() if hasattr(ids, "tolist") else ids)).encode())


def checksum_matches(stored: str, embedder: Any) -> bool:
    """Whether ``embedder`` has the ``stored`` checksum, computed by that checksum's version."""
    version = next((v for v, p in sorted(CHECKSUM_VERSIONS.items(), reverse=True) if stored.startswith(p)), 2)
    return encoder_checksum(embedder, version) == stored


def encoder_record(embedder: Any) -> dict[str, Any] | None:
    """The JSON record of a hierarchy encoder (module docstring), ``None`` for another embedder
    (a threshold of -inf, "always attach", is recorded as null: JSON has no infinities)."""
    if not is_hierarchy_encoder(embedder):
        return None
    thr = getattr(embedder, "threshold", None)
    cur = getattr(embedder, "curvature", None)
    rank = getattr(embedder, "ranking_weight", None)
    return {"geometry": embedder.geometry, "dim": int(embedder.dim), "curvature": None if cur is None else float(cur),
            "centripetal_weight": float(getattr(embedder, "centripetal_weight", 1.0)),
            "ranking_weight": None if rank is None else float(rank),
            "threshold": float(thr) if thr is not None and math.isfinite(thr) else None, "folder": getattr(embedder, "source", None),
            "checksum": encoder_checksum(embedder)}


def _named(record: dict[str, Any]) -> str:
    where = record.get("folder") or "a folder not recorded"
    return f"the {record.get('geometry')} hierarchy encoder at {where} ({str(record.get('checksum'))[:19]}...)"


def _check_record(stored: Any, where: str) -> None:
    """Refuse a malformed encoder record (``None``: no record) with a :class:`MemoryFileError` naming the field."""
    if stored is None:
        return
    if not isinstance(stored, dict):
        raise MemoryFileError(f"{where}: config field {ENCODER_KEY!r} must be an object (the encoder's record), "
                              f"got {short(stored)}")
    for key, kinds in (("checksum", (str,)), ("folder", (str, type(None))), ("geometry", (str, type(None)))):
        if not isinstance(stored.get(key), kinds):
            raise MemoryFileError(f"{where}: config field '{ENCODER_KEY}.{key}' is malformed (the encoder's record "
                                  f"needs {'a checksum, sha256v2:<hex>' if key == 'checksum' else 'a string or null'}), "
                                  f"got {short(stored.get(key))}")


def check_encoder(config: Any, embedder: Any, where: str) -> None:
    """Refuse to load or open a store (its stored ``config``) with ``embedder`` when the encoder
    recorded there is not the one passed (module docstring).  ``embedder=None`` on a store with
    an encoder is refused with the folder to load; a stand-in (a command that never embeds)
    passes."""
    stored = config.get(ENCODER_KEY) if isinstance(config, dict) else None
    _check_record(stored, where)
    if isinstance(embedder, StandIn):  # opened to read the structure, never to embed or place
        note = f" (this store was placed by {_named(stored)})" if isinstance(stored, dict) else ""
        embedder.placed_by = note.strip()   # which encoder to pass, for a caller that must name it
        if note and note not in embedder.hint:   # what to pass, should the reader embed after all
            embedder.hint += note
        return
    if stored is None:
        if places_points(embedder):
            raise ValueError(f"{where} was not placed by a hierarchy encoder (its points come from declared levels); "
                             f"it cannot be opened with {embedder!r}: pass the embedder it was made with")
        return
    folder = stored.get("folder")
    if embedder is None:
        hint = f"HierarchyEncoder.load({folder!r})" if folder else "HierarchyEncoder.load(<its folder>)"
        raise ValueError(f"{where} was placed by {_named(stored)}: pass embedder={hint}")
    if not is_hierarchy_encoder(embedder):
        raise ValueError(f"{where} was placed by {_named(stored)}; the embedder passed, {type(embedder).__name__}, "
                         f"is not a hierarchy encoder: pass that encoder")
    if not checksum_matches(stored["checksum"], embedder):
        got = encoder_record(embedder)
        raise ValueError(f"{where} was placed by {_named(stored)}, but the encoder passed is {_named(got)}: its points "
                         f"would not match the stored ones; pass the encoder that placed them")
