"""Between :class:`~hypermem.nn.HyperbolicMemory` and :class:`hypermem.store.Memory`:
``from_memory`` and ``to_memory`` (a mixin of the layer)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

import torch

from ..embed import Embedder, HashingEmbedder
from ..store import Memory
from ..store.checks import embed_for_store
from ..store.frames import parents_first

_Layer = TypeVar("_Layer", bound="StoreBridge")


class StoreBridge:
    """``from_memory`` / ``to_memory`` of :class:`~hypermem.nn.HyperbolicMemory`."""

    @classmethod
    def from_memory(cls: type[_Layer], memory: Memory, learn_keys: bool = True, learn_values: bool = False,
                    temperature: float = 1.0, learn_temperature: bool = True, sparse_grad: bool = False,
                    dtype: torch.dtype | None = None) -> _Layer:
        """A layer holding the slots of a :class:`hypermem.store.Memory`.

        Keys are the store's points, values its raw embeddings, depth, timestamps, access
        counts and validity windows its records'; metric, curvature, base depth, score
        weights, temporal policy and clock are the store's.  ``ids`` are the store's ids.
        """
        state = memory.state
        with state.lock:
            if len(memory) == 0:
                raise ValueError("the memory is empty; a layer needs at least one slot")
            dt = memory.dtype if dtype is None else dtype
            n = len(memory)
            layer = cls(memory.points.to(dt), memory.embeddings.to(dt), curvature=memory.curvature,
                        metric=memory.metric, temperature=temperature, learn_temperature=learn_temperature,
                        learn_keys=learn_keys, learn_values=learn_values, depth=memory.depths.to(dt),
                        timestamps=state.time[:n], access_counts=state.access[:n],
                        valid_from=state.valid_from[:n], valid_until=state.valid_until[:n], decay=memory.decay,
                        time_coef=memory.time_coef, depth_bias=memory.depth_bias, base_depth=memory.base_depth,
                        ids=memory.ids, sparse_grad=sparse_grad, clock=memory.clock, dtype=dt,
                        device=memory.device)
            layer.records = [memory.get(i) for i in memory.ids]
            layer._store_config = {
                "embedder": memory.embedder, "curvature": memory.curvature, "decay": memory.decay,
                "base_depth": memory.base_depth, "depth_step": memory.depth_step, "inherit": memory.inherit,
                "cone_constrained": memory.cone_constrained, "cone_k": memory.cone_k, "metric": memory.metric,
                "time_coef": memory.time_coef, "depth_bias": memory.depth_bias, "clock": memory.clock,
                "dtype": memory.dtype, "device": memory.device,
            }
        return layer

    def to_memory(self, embedder: Embedder | None = None, texts: Sequence[str] | None = None,
                  parents: Sequence[str | None] | None = None) -> Memory:
        """A :class:`hypermem.store.Memory` holding the slots as they are now.

        Each slot becomes a memory at its key (``point``), with its value as the stored
        embedding when the value has the embedder's dimension.  Records (text, parent,
        time, metadata, validity, access counts) come from :meth:`from_memory` when the
        layer was built that way; otherwise ``texts`` (default the ids) and ``parents``
        (ids, default none) describe them.  ``embedder`` defaults to the source store's
        (or a :class:`~hypermem.embed.HashingEmbedder` of the keys' dimension; below its least
        dimension, 8, ``embedder=`` is needed and a ``ValueError`` says so).
        """
        cfg = dict(self._store_config or {})
        if embedder is not None:
            cfg["embedder"] = embedder
        if "embedder" not in cfg:
            try:
                cfg["embedder"] = HashingEmbedder(dim=self.dim)
            except ValueError as e:   # below the hashing embedder's least dimension
                raise ValueError(f"the layer's keys have dimension {self.dim}, too few for the default, a hashing "
                                 f"embedder ({e}): pass embedder= an embedder of dimension {self.dim} (an object "
                                 f"with dim and embed(texts), e.g. hypermem.embed.CallableEmbedder(fn, "
                                 f"dim={self.dim}))") from None
        if int(cfg["embedder"].dim) != self.dim:
            raise ValueError(f"the embedder has dimension {cfg['embedder'].dim}, the keys {self.dim}")
        cfg.update(curvature=self.curvature, metric=self.metric, base_depth=self.base_depth,
                   time_coef=self.time_coef, depth_bias=self.depth_bias, decay=self.decay, clock=self.clock)
        cfg.setdefault("dtype", self.keys.dtype)
        cfg.setdefault("device", self.keys.device)
        n = len(self)
        if texts is not None and len(texts) != n:
            raise ValueError(f"got {len(texts)} texts for {n} slots")
        if parents is not None and len(parents) != n:
            raise ValueError(f"got {len(parents)} parents for {n} slots")
        recs = self.records if self.records is not None else [None] * n
        K = self.keys.detach().to("cpu", torch.float64)
        V = None if self.values is None else self.values.detach().to("cpu", torch.float64)
        emb = self._export_embeddings(K, V, cfg["embedder"], texts, recs)
        items = []
        for i in range(n):
            rec = recs[i]
            item: dict[str, Any] = {"id": self.ids[i], "point": K[i]}
            if rec is not None and texts is None:
                item.update(text=rec.text, parent=rec.parent_id, t=rec.t, meta=dict(rec.meta),
                            valid_from=rec.valid_from, valid_until=rec.valid_until)
            else:
                item["text"] = texts[i] if texts is not None else self.ids[i]
                if parents is not None:
                    item["parent"] = parents[i]
                if self.timestamps is not None:
                    item["t"] = datetime.fromtimestamp(float(self.timestamps[i]), tz=timezone.utc)
            item["embedding"] = emb[i]
            items.append(item)
        mem = Memory(**cfg)
        ids = mem.add_many([items[i] for i in parents_first(items)])
        if self.access_counts is not None:
            acc = self.access_counts.detach().cpu().tolist()
            pos = {i: r for r, i in enumerate(self.ids)}
            with mem.state.lock:
                for id_ in ids:
                    r = pos[id_]
                    src = recs[r]
                    mem.state.set_access(id_, int(acc[r]), None if src is None else src.last_accessed)
        return mem

    def _export_embeddings(self, K: torch.Tensor, V: torch.Tensor | None, embedder: Embedder,
                           texts: Sequence[str] | None, recs: list) -> torch.Tensor:
        """The stored embedding of each slot in :meth:`to_memory` (float64, CPU ``K`` / ``V``):
        its value when that has the keys' dimension and a non-zero entry, else its key's
        direction; a key at the origin of the ball (a root: norm 0, a point like any other) has
        no direction, so it takes the embedding of its text, the store's own rule for a point at
        the origin (:func:`hypermem.store.placement.point_placement`).  Its distances do not
        depend on that direction under ``metric="hyperbolic"``; under ``"shell"`` the layer
        gives it one distance to every query, the store the distance of that direction.  A
        store refuses a zero embedding (its direction is the unit embedding), so a text the
        embedder maps to zero is refused here, naming the slot."""
        emb = K / torch.linalg.vector_norm(K, dim=1, keepdim=True).clamp_min(1e-300)
        if V is not None and V.shape[1] == self.dim:
            emb = torch.where(V.ne(0).any(1, keepdim=True), V, emb)
        origin = (~emb.ne(0).any(1)).nonzero().flatten().tolist()
        if not origin:
            return emb
        words = [texts[i] if texts is not None else recs[i].text if recs[i] is not None else self.ids[i]
                 for i in origin]

        def where(j: int) -> str:
            return f"slot #{origin[j]} (id {self.ids[origin[j]]!r})"

        try:
            emb[origin] = embed_for_store(embedder, words, where).to(emb.dtype)
        except ValueError as e:
            raise ValueError(f"{e}. Its key is the origin of the ball, which has no direction, so the store "
                             "takes it from the embedding of its text: pass texts= the embedder maps to a "
                             "non-zero vector, or values of the keys' dimension") from None
        return emb
