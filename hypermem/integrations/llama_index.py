"""LlamaIndex adapter: :class:`HypermemVectorStore`, a ``BasePydanticVectorStore`` over a
:class:`~hypermem.store.Memory`, and :class:`HypermemEmbedding`, a hypermem embedder as a
LlamaIndex ``BaseEmbedding``.

Install with ``pip install "hypermem-torch[llama-index]"``.  Example (no LLM)::

    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from hypermem import HashingEmbedder, Memory
    from hypermem.integrations.llama_index import HypermemEmbedding, HypermemVectorStore

    mem = Memory(embedder=HashingEmbedder(dim=128))
    store = HypermemVectorStore(mem)
    index = VectorStoreIndex([TextNode(text="dogs are loyal", id_="dog")],
                             storage_context=StorageContext.from_defaults(vector_store=store),
                             embed_model=HypermemEmbedding(mem.embedder))
    index.as_retriever(similarity_top_k=2).retrieve("loyal dogs")

A node's ``PARENT`` relationship becomes the memory's parent when that node is stored (or
comes in the same ``add``); ``t`` / ``valid_from`` / ``valid_until`` in a node's metadata
become the memory's times.  ``MetadataFilters`` (every operator, ``and`` / ``or`` / ``not``,
nested) become hypermem filters, which reach ``parent``, ``t`` and the validity window of every
memory and compare those times as instants.  ``query(..., mode=, root=, at_time=, ...)`` (LlamaIndex's
``vector_store_kwargs``) pass hypermem's search arguments (``mode="ancestors"`` without ``root``, on a
store whose embedder is a hierarchy encoder: the memories that subsume the query); similarities are
``min(1, exp(score))``.

A query ranks as ``Memory.search(query_str)`` does, the store's lexical (``hybrid``) term
included, when its ``query_embedding`` is the store embedder's vector of that very ``query_str``
(``embed_model=HypermemEmbedding(store.memory.embedder)``, or of another object of that model, which
keeps its latest query vectors, so knowing it costs no embedder call): the store gets ``query_str``.
Otherwise the store searches by ``query_embedding`` alone (no lexical term): another ``embed_model``
(the store's embedder would put the query in another space than the nodes), or an embedding of
other text than ``query_str`` (HyDE, ``custom_embedding_strs``: later queries are not affected).
The default mode is hybrid (weight ``vector_store_kwargs={"hybrid": w}``); ``mode="hybrid"`` and
``alpha`` are refused, naming it.
``HypermemVectorStore(mem, text_query=True)`` always passes the text (LlamaIndex then does not
embed the query: the store does, once); ``text_query=False`` always the embedding.  Re-adding a
node id replaces the memory and keeps its time unless the node's metadata gives ``t``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores.simple import DEFAULT_VECTOR_STORE, NAMESPACE_SEP
    from llama_index.core.vector_stores.types import (
        DEFAULT_PERSIST_DIR,
        DEFAULT_PERSIST_FNAME,
        BasePydanticVectorStore,
        FilterCondition,
        FilterOperator,
        MetadataFilters,
        VectorStoreQuery,
        VectorStoreQueryMode,
        VectorStoreQueryResult,
    )
    from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("hypermem.integrations.llama_index needs llama-index-core: "
                      "pip install 'hypermem-torch[llama-index]'") from exc

from ..embed import embed_checked
from ..embed.choice import EmbedderMissing
from ..store import Memory, MemoryRecord
from ..store.filters import RecordFilter, filter_keys
from . import _common as C
from . import _record_filters as RF
from ._llama_async import OffLoopEmbedding, OffLoopVectorStore

_OPS = {
    FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt", FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte", FilterOperator.IN: "$in", FilterOperator.NIN: "$nin",
    FilterOperator.ANY: "$any", FilterOperator.ALL: "$all", FilterOperator.CONTAINS: "$contains",
    FilterOperator.TEXT_MATCH: "$text_match", FilterOperator.TEXT_MATCH_INSENSITIVE: "$text_match_insensitive",
}


def filter_spec(filters: MetadataFilters | None) -> dict | None:
    """LlamaIndex ``MetadataFilters`` as a hypermem filter dict
    (:func:`hypermem.integrations._common.compile_filter`); ``not`` matches when none of its
    filters match, as in LlamaIndex's own stores."""
    if filters is None or not filters.filters:
        return None
    parts = []
    for f in filters.filters:
        if isinstance(f, MetadataFilters):
            sub = filter_spec(f)
            if sub is not None:
                parts.append(sub)
        elif f.operator == FilterOperator.IS_EMPTY:
            parts.append({f.key: {"$empty": True}})
        elif f.operator in _OPS:
            parts.append({f.key: {_OPS[f.operator]: f.value}})
        else:
            raise ValueError(f"unsupported filter operator {f.operator!r} for key {f.key!r}")
    cond = filters.condition or FilterCondition.AND
    if cond == FilterCondition.AND:
        return {"$and": parts}
    if cond == FilterCondition.OR:
        return {"$or": parts}
    if cond == FilterCondition.NOT:
        return {"$not": {"$or": parts}}
    raise ValueError(f"unsupported filter condition {cond!r}")


def _check_dim(memory: Memory, embedding: Sequence[float] | None, what: str) -> None:
    """A clear error, with the fix, for an embedding of another dimension than the memory's."""
    if embedding is None or C.encoder_vector(memory, {}):
        return
    got = len(embedding)
    if got != memory.dim:
        raise ValueError(f"{what}: the embedding has shape ({got},) but the store's have shape ({memory.dim},) "
                         f"({type(memory.embedder).__name__}): use embed_model=HypermemEmbedding("
                         f"store.memory.embedder), or build the store for your embed_model's vectors: "
                         f"HypermemVectorStore(embedder=HashingEmbedder(dim={got})) (from hypermem import "
                         f"HashingEmbedder; any hypermem embedder of dim {got} does)")


def _field(rec: MemoryRecord, key: str) -> Any:
    """A field as a node shows it: :func:`~hypermem.integrations._common.meta_field` (``parent``,
    ``t`` and the validity window of any memory, written by LlamaIndex or by another adapter), but
    a ``parent`` in a node's own metadata is that metadata."""
    if key == "parent" and "parent" in rec.meta:
        return rec.meta["parent"]
    return C.meta_field(rec, key)


RECENT_QUERIES = 32
"""Query vectors :class:`HypermemEmbedding` keeps per hypermem embedder (the latest), so that the
store knows, without embedding the text again, whether a ``query_embedding`` is its ``query_str``'s."""

DIFFER_AFTER = 3
"""Store-embedder comparisons that must all say no (and none yes) before the store takes a
non-hypermem ``embed_model`` to differ and stops comparing: one HyDE query says no too."""

_recent: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # embedder -> OrderedDict(text -> float64 vector)
_recent_lock = threading.Lock()


def _remember_query(embedder: Any, text: str, vector: list[float]) -> None:
    try:
        with _recent_lock:
            seen = _recent.setdefault(embedder, OrderedDict())
            seen[text] = torch.as_tensor(vector, dtype=torch.float64)
            seen.move_to_end(text)
            while len(seen) > RECENT_QUERIES:
                seen.popitem(last=False)
    except TypeError:  # an embedder that cannot be a weak key (unhashable): the store asks its embedder
        pass


def _gave_any(memory: Memory, vectors: list[torch.Tensor], emb: Any, kwargs: dict) -> bool:
    """Whether ``emb`` is one of ``vectors`` as :func:`~._common.same_vector` compares them (whole
    where the vector goes to the store as it is, else by direction: ``cos >= 1 - 1e-5``), in one
    batched comparison."""
    v = torch.as_tensor(emb, dtype=torch.float64).detach().cpu()
    rows = [x for x in vectors if x.shape == v.shape]
    if not rows or v.dim() != 1:
        return False
    V = torch.stack(rows)
    if C.encoder_vector(memory, kwargs):
        return bool(((V - v).abs() <= 1e-6 + 1e-4 * V.abs()).all(dim=1).any())
    den = V.norm(dim=1) * v.norm()
    return bool(((den > 0) & (V @ v >= (1.0 - 1e-5) * den)).any())


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:   # an == that is no truth value
        return False


class HypermemEmbedding(OffLoopEmbedding, BaseEmbedding):
    """A hypermem embedder (``dim`` and ``embed(texts)``) as a LlamaIndex ``BaseEmbedding``:
    queries and documents get the same vectors.  The async methods embed in a worker thread,
    one embedder call per batch (:mod:`._llama_async`)."""

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Any = None, **kwargs: Any):
        from ..embed import HashingEmbedder

        embedder = HashingEmbedder() if embedder is None else embedder
        if not callable(getattr(embedder, "embed", None)) or not hasattr(embedder, "dim"):
            raise TypeError(f"expected a hypermem embedder (dim and embed(texts)), got {type(embedder).__name__}")
        kwargs.setdefault("model_name", f"hypermem-{type(embedder).__name__}")
        super().__init__(**kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "HypermemEmbedding"

    @property
    def embedder(self) -> Any:
        return self._embedder

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return embed_checked(self._embedder, list(texts)).tolist() if texts else []

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        vector = self._get_text_embedding(query)
        _remember_query(self._embedder, query, vector)
        return vector


class HypermemVectorStore(OffLoopVectorStore, BasePydanticVectorStore):
    """A LlamaIndex vector store backed by a hypermem :class:`~hypermem.store.Memory`.

    ``memory``: a ``Memory`` (``Memory.open("agent.db")`` for a durable store, written through
    on every call), the path of a snapshot file (:meth:`Memory.save`, or ``.json``:
    :meth:`Memory.to_json`; loaded, or a new in-process memory that :meth:`persist` writes
    there), or ``None`` (a new memory built with ``memory_kwargs``).  Node embeddings must have the memory's ``dim``; a node without one
    is embedded by the memory's embedder.  Each node is stored whole (LlamaIndex's
    ``node_to_metadata_dict``) in the memory's metadata, so queries return full nodes.  The async
    methods (``async_add``, ``aquery``, ``aget_nodes``, ``adelete``, ...) run the sync ones in a
    worker thread (:mod:`._llama_async`): the event loop runs meanwhile.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False
    text_query: bool | None = None
    _memory: Memory = PrivateAttr()
    _path: str | None = PrivateAttr(default=None)
    _differ: set = PrivateAttr(default_factory=set)  # encoder_vector(kwargs) of queries whose embed_model differs
    _votes: dict = PrivateAttr(default_factory=dict)  # encoder_vector(kwargs) -> (agreed, differed) of step 3
    _alike: weakref.WeakKeyDictionary = PrivateAttr(default_factory=weakref.WeakKeyDictionary)  # embedder -> bool

    def __init__(self, memory: Memory | str | None = None, *, text_query: bool | None = None, **memory_kwargs: Any):
        if text_query not in (None, True, False):
            raise TypeError(f"text_query must be None (auto), True or False, got {text_query!r}")
        # text_query=True: LlamaIndex need not embed the query, the store does (once)
        super().__init__(text_query=text_query, is_embedding_query=text_query is not True)
        self._memory = C.open_memory(memory, name="HypermemVectorStore (LlamaIndex)", **memory_kwargs)
        self._path = None if memory is None or isinstance(memory, Memory) else str(memory)

    @classmethod
    def class_name(cls) -> str:
        return "HypermemVectorStore"

    @property
    def client(self) -> Memory:
        """The :class:`~hypermem.store.Memory`."""
        return self._memory

    @property
    def memory(self) -> Memory:
        return self._memory

    # ------------------------------------------------------------------ writing
    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store the nodes; an existing node id is replaced and keeps its time unless the
        node's metadata gives ``t``.  Returns their ids."""
        mem = self._memory
        mem.refresh()  # which ids exist: what other handles committed too (a no-op in process)
        batch = {n.node_id for n in nodes}
        items = []
        for n in nodes:
            _check_dim(mem, n.embedding, f"node {n.node_id!r}")
            args, _ = C.split_metadata({k: n.metadata[k] for k in ("t", "valid_from", "valid_until")
                                        if k in n.metadata}, f"node {n.node_id!r} metadata")
            parent = n.relationships.get(NodeRelationship.PARENT)
            pid = getattr(parent, "node_id", None)
            if pid is not None and (pid in batch or pid in mem) and pid != n.node_id:
                args["parent"] = pid
            items.append({"id": n.node_id, "text": n.get_content(metadata_mode=MetadataMode.NONE),
                          "meta": node_to_metadata_dict(n, remove_text=True, flat_metadata=self.flat_metadata),
                          "embedding": n.embedding, **args})
        return C.upsert(mem, items)

    def _matching(self, node_ids: Sequence[str] | None, filters: MetadataFilters | None) -> list[str]:
        """The ids among ``node_ids`` (in their order; ``None``: every id, in the store's) whose
        node matches ``filters``: :meth:`Memory.select` of :func:`~._record_filters.node_filter`
        (the store's filter columns), the ids a node-by-node test of :func:`_field` keeps."""
        kept = self._memory.select(RF.node_filter(filter_spec(filters), node_ids))
        if node_ids is None:
            return kept
        keep = set(kept)
        return [i for i in node_ids if i in keep]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove every node of the source document ``ref_doc_id`` (children of a removed
        node that belong to another document move up to its parent): the memories whose metadata
        ``ref_doc_id`` equals it.  A ``str`` (every id LlamaIndex passes, and what it stores:
        ``node_to_metadata_dict`` writes the node's ``ref_doc_id`` or ``"None"``) is answered by the
        store's filter columns (:meth:`Memory.select`; equal to a str only a str of the same text);
        any other value keeps Python's ``==`` record by record (where ``True == 1``, ``None`` matches
        a missing field), which JSON equality would not give."""
        if type(ref_doc_id) is str:
            ids = self._memory.select(RecordFilter({"ref_doc_id": {"$eq": ref_doc_id}}))   # the adapter's key: no warning
        else:
            ids = self._memory.select(lambda r: r.meta.get("ref_doc_id") == ref_doc_id)
        C.remove(self._memory, ids, cascade=bool(delete_kwargs.get("cascade", False)))

    def delete_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None,
                     **delete_kwargs: Any) -> None:
        """Remove the nodes among ``node_ids`` (all when ``None``) that match ``filters``."""
        ids = self._matching(node_ids, filters)
        C.remove(self._memory, ids, cascade=bool(delete_kwargs.get("cascade", False)))

    def clear(self) -> None:
        self._memory.refresh()
        C.remove(self._memory, None)

    def persist(self, persist_path: str | None = None, fs: Any = None) -> None:
        """Write a snapshot of the memory to ``persist_path`` (or the file it was opened from):
        JSON (:meth:`Memory.to_json`) for a ``.json`` name, as ``StorageContext.persist`` asks
        (``<dir>/default__vector_store.json``; :meth:`from_persist_dir` reads it back), else one
        SQLite file (:meth:`Memory.save`).  A durable memory (:meth:`Memory.open`) has committed
        every write already: nothing is written (reopen it with ``Memory.open``)."""
        if self._memory.storage is not None:
            return
        if fs is not None and "file" not in getattr(fs, "protocol", ()):
            raise ValueError("HypermemVectorStore.persist writes local files only (fs must be None)")
        C.save_memory(self._memory, persist_path, self._path)

    @classmethod
    def from_persist_path(cls, persist_path: str, fs: Any = None, **memory_kwargs: Any) -> HypermemVectorStore:
        """The store :meth:`persist` wrote to ``persist_path`` (JSON or SQLite; a durable file is
        opened write-through); ``memory_kwargs`` as for a loaded memory (``embedder=`` for a
        custom embedder).  A missing file is a ``FileNotFoundError``, not a new store."""
        if fs is not None and "file" not in getattr(fs, "protocol", ()):
            raise ValueError("HypermemVectorStore reads local files only (fs must be None)")
        if not os.path.exists(persist_path):
            raise FileNotFoundError(f"no persisted HypermemVectorStore at {persist_path!r}")
        return cls(persist_path, **memory_kwargs)

    @classmethod
    def from_persist_dir(cls, persist_dir: str = DEFAULT_PERSIST_DIR, namespace: str = DEFAULT_VECTOR_STORE,
                         fs: Any = None, **memory_kwargs: Any) -> HypermemVectorStore:
        """The store ``StorageContext.persist(persist_dir=...)`` wrote (its file
        ``<namespace>__vector_store.json``), as LlamaIndex's ``SimpleVectorStore`` reads it."""
        path = os.path.join(persist_dir, f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}")
        return cls.from_persist_path(path, fs=fs, **memory_kwargs)

    # ------------------------------------------------------------------ reading
    def _node(self, rec: MemoryRecord) -> BaseNode:
        if "_node_content" in rec.meta:
            return metadata_dict_to_node(rec.meta, text=rec.text)
        # a memory stored without LlamaIndex: a TextNode of its text, metadata and parent
        node = TextNode(id_=rec.id, text=rec.text, metadata=C.record_metadata(rec))
        if rec.parent_id is not None:
            node.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id=rec.parent_id)
        return node

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        ids = self._matching(node_ids, filters)
        st = self._memory.state
        with st.lock:   # an id removed since the selection (another thread's refresh) is left out
            recs = st.records.at_rows([st.row[i] for i in ids if i in st.row])
        return [self._node(r) for r in recs]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Top ``similarity_top_k`` by hypermem's score, filters and non-empty ``node_ids`` /
        ``doc_ids`` applied before the cut; ``mode=MMR`` re-ranks ``mmr_prefetch_k`` (default 4k)
        candidates with ``lambda = mmr_threshold``: the query's, else ``kwargs["mmr_threshold"]``
        (``vector_store_kwargs``, as LlamaIndex's ``SimpleVectorStore`` reads it), else 0.5."""
        hint = (f"the default mode already adds the store's lexical (BM25) term to a text query: weigh it with "
                f"vector_store_kwargs={{'hybrid': w}} (this store's default {C.hybrid_weight(self._memory, {}):g}; "
                f"0 turns it off)")
        if "alpha" in kwargs or query.alpha is not None:
            raise TypeError(f"HypermemVectorStore takes no alpha (LlamaIndex's dense/sparse mix of its hybrid "
                            f"mode, which this store has not): {hint}")
        C.check_search_keys(kwargs, "query", ("mmr_prefetch_k", "mmr_threshold"))
        lam = kwargs.pop("mmr_threshold", None)  # vector_store_kwargs: LlamaIndex's retriever never sets the field
        if query.mode not in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.MMR):
            lexical = query.mode in (VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SPARSE,
                                     VectorStoreQueryMode.SEMANTIC_HYBRID)
            raise ValueError(f"HypermemVectorStore supports the default and mmr query modes, got {query.mode!r}"
                             + (f"; {hint}" if lexical else ""))
        spec = filter_spec(query.filters)
        if query.doc_ids:
            docs = {"ref_doc_id": {"$in": sorted(set(query.doc_ids), key=str)}}
            spec = docs if spec is None else {"$and": [spec, docs]}
        # an empty node_ids is no restriction: VectorStoreIndex passes [] for stores with text
        if query.node_ids or (spec is not None and filter_keys(spec) & set(C.STORE_KEYS)):
            filters = RF.node_filter(spec, query.node_ids or None)   # node fields and ids from the columns
        else:   # metadata alone: the store's filter columns (hypermem.store.meta_columns)
            filters = C.store_filter(spec)
        k = query.similarity_top_k
        mmr = query.mode == VectorStoreQueryMode.MMR
        fetch = max(k, int(kwargs.pop("mmr_prefetch_k", 4 * k))) if mmr else k
        q, vector = self._query_of(query, kwargs)
        hits = C.search(self._memory, q, fetch, filters, vector=vector, **kwargs)
        if mmr:
            lam = query.mmr_threshold if query.mmr_threshold is not None else 0.5 if lam is None else lam
            hits = C.mmr(self._memory, hits, k, lam)
        return VectorStoreQueryResult(nodes=[self._node(h.record) for h in hits],
                                      similarities=[C.relevance(h.score) for h in hits], ids=[h.id for h in hits])

    def _query_of(self, query: VectorStoreQuery, kwargs: dict) -> tuple[Any, bool]:
        """``(query, is a vector)``: ``query_str``, so that the store ranks it as
        :meth:`Memory.search` does (its lexical ``hybrid`` term included), where
        ``query_embedding`` is the store embedder's vector of that very ``query_str``; else the
        embedding (another ``embed_model``, or a vector of other text: HyDE,
        ``custom_embedding_strs``).  ``text_query`` decides: ``True`` always the text (the store
        embeds it), ``False`` always the embedding, ``None`` (auto) the text when there is no
        embedding, or the lexical term is on and :meth:`_is_embedding_of` the text."""
        emb, text = query.query_embedding, query.query_str
        if self.text_query is not False and text is not None and (emb is None or self.text_query or (
                C.hybrid_weight(self._memory, kwargs) > 0 and self._is_embedding_of(text, emb, kwargs))):
            return text, False
        _check_dim(self._memory, emb, "the query")
        return (text, False) if emb is None else (emb, True)

    def _is_embedding_of(self, text: str, emb: Any, kwargs: dict) -> bool:
        """Whether ``emb`` is the store embedder's vector of ``text``, in this order:

        1. a :class:`HypermemEmbedding` of the store's embedder, or of one that embeds alike
           (:meth:`_embeds_alike`: two objects of one model, the embedder a reload rebuilt),
           embedded ``text`` lately: compare with that vector (no embedder call);
        2. ``emb`` is a vector some :class:`HypermemEmbedding` gave another text lately (HyDE,
           ``custom_embedding_strs``, or another model's query): no, and nothing is concluded;
        3. else one store-embedder call compares (a non-hypermem ``embed_model``).  Only after
           :data:`DIFFER_AFTER` answers no and none yes for queries of this kind is the
           ``embed_model`` taken to differ, and later queries skip the call; a HyDE query
           (an embedding of other text) alone never concludes it."""
        mem = self._memory
        with _recent_lock:
            recent = [(e, dict(seen)) for e, seen in _recent.items()]
        for embedder, seen in recent:
            known = seen.get(text)
            if known is not None and self._embeds_alike(embedder, text, known):
                return C.same_vector(mem, known, emb, kwargs)
        if _gave_any(mem, [v for _, seen in recent for v in seen.values()], emb, kwargs):
            return False
        kind = C.encoder_vector(mem, kwargs)
        if kind in self._differ:
            return False
        try:
            same = C.embeds_as(mem, text, emb, kwargs)
        except EmbedderMissing:   # a store opened without its embedder: it cannot embed the text
            same = False
        yes, no = self._votes.get(kind, (0, 0))
        self._votes[kind] = (yes + same, no + (not same))
        if not yes and not same and no + 1 >= DIFFER_AFTER:
            self._differ.add(kind)
        return same

    def _embeds_alike(self, embedder: Any, text: str, vector: torch.Tensor) -> bool:
        """Whether ``embedder`` gives the store embedder's vectors: the same object, an equal one
        (``==``: a :class:`~hypermem.embed.HashingEmbedder` of the same settings), or (asked once
        per embedder object, one store-embedder call) one whose ``vector`` of ``text`` is the store
        embedder's, whole (``allclose``, rtol 1e-4, atol 1e-6): two objects of one model."""
        mem = self._memory
        if embedder is mem.embedder or _equal(embedder, mem.embedder):
            return True
        alike = self._alike.get(embedder)
        if alike is None:
            alike = False
            if getattr(embedder, "dim", None) == mem.dim:
                try:
                    mine = embed_checked(mem.embedder, [text])[0].to("cpu", torch.float64)
                    theirs = torch.as_tensor(vector, dtype=torch.float64).detach().cpu()
                    alike = mine.shape == theirs.shape and bool(torch.allclose(theirs, mine, rtol=1e-4, atol=1e-6))
                except EmbedderMissing:
                    pass
            self._alike[embedder] = alike
        return alike


__all__ = ["HypermemVectorStore", "HypermemEmbedding", "filter_spec"]
