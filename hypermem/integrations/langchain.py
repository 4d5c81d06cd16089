"""LangChain adapter: :class:`HypermemVectorStore`, a ``langchain_core`` ``VectorStore`` over a
:class:`~hypermem.store.Memory`, and the embedder bridges :class:`HypermemEmbeddings` (a
hypermem embedder as LangChain ``Embeddings``) and :class:`LangChainEmbedder` (the reverse).

Install with ``pip install "hypermem-torch[langchain]"``.  Example::

    from datetime import datetime, timedelta, timezone
    from hypermem.integrations.langchain import HypermemVectorStore
    store = HypermemVectorStore()                       # a new Memory, hashing embedder
    [topic] = store.add_texts(["animals"])
    seen = datetime.now(timezone.utc) - timedelta(hours=3)   # or an ISO 8601 string
    store.add_texts(["dogs are loyal"], metadatas=[{"parent": topic, "t": seen}])
    store.as_retriever(search_kwargs={"k": 3, "mode": "subtree", "root": topic}).invoke("loyal")

Metadata keys ``parent``, ``t``, ``valid_from`` and ``valid_until`` are the store's
arguments (see :func:`hypermem.integrations._common.split_metadata`); returned documents
show ``parent`` and the validity window when set (ISO strings) and ``t`` with
``include_time=True``; re-adding an id replaces its text and metadata and keeps its time
unless the metadata gives ``t``.  A text query (``similarity_search*``, the retrievers,
``max_marginal_relevance_search``) ranks as :meth:`Memory.search` does with that text,
lexical ``hybrid`` term included; ``*_by_vector`` searches by the vector alone.  Scores are
hypermem's search scores (``-distance + depth_bias * depth + time_coef * log(time_weight)``
plus the lexical term, higher is better); relevance scores are ``min(1, exp(score))``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

try:
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import VectorStore
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("hypermem.integrations.langchain needs langchain-core: "
                      "pip install 'hypermem-torch[langchain]'") from exc

from ..embed import embed_checked
from ..store import Memory, SearchResult
from ..store.embedder_dim import check_dim_value
from . import _async_embed as AE
from . import _common as C
from . import _record_filters as RF
from . import _upserts as U

_ASYNC_FIX = "use the store's async methods (aput, asearch, abatch, ...), or give a sync embedding function"


class HypermemEmbeddings(Embeddings):
    """A hypermem embedder (anything with ``dim`` and ``embed(texts)``, e.g.
    :class:`~hypermem.HashingEmbedder`) as LangChain ``Embeddings``."""

    def __init__(self, embedder: Any):
        if not callable(getattr(embedder, "embed", None)) or not hasattr(embedder, "dim"):
            raise TypeError(f"expected a hypermem embedder (dim and embed(texts)), got {type(embedder).__name__}")
        self.embedder = embedder

    @property
    def dim(self) -> int:
        return int(self.embedder.dim)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return embed_checked(self.embedder, list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class LangChainEmbedder:
    """LangChain ``Embeddings`` as a hypermem embedder (``dim`` and ``embed(texts)``, which
    calls ``embed_documents``).  ``dim`` is measured by embedding one probe text when not given.
    Embeddings with an async path only (LangGraph's ``index={"embed": async_fn}``) are awaited
    from the sync code (:mod:`hypermem.integrations._async_embed`): they need the async API of
    the store (``aput``, ``asearch``, ...) inside an event loop, and ``dim`` when made there."""

    def __init__(self, embeddings: Embeddings, dim: int | None = None):
        if not isinstance(embeddings, Embeddings):
            raise TypeError(f"expected langchain_core Embeddings, got {type(embeddings).__name__}")
        self.embeddings = embeddings
        if dim is None:
            dim = len(self.embed_query("dimension probe", fix="give the dimension, index={'embed': ..., 'dims': N} "
                                       "(the dimension probe embeds one text when the store is made)"))
        self.dim = check_dim_value(dim, "the embeddings")  # an integer >= 2 (np.int64 too), else ValueError

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if AE.async_only(self.embeddings):
            return AE.run_async(lambda: self.embeddings.aembed_documents(list(texts)), _ASYNC_FIX)
        return self.embeddings.embed_documents(list(texts))

    def check_sync(self) -> None:
        """A ``RuntimeError`` now where :meth:`embed` would need to await async-only embeddings
        inside this thread's running event loop (before a caller takes its locks)."""
        if AE.async_only(self.embeddings):
            AE.check_no_loop(_ASYNC_FIX)

    def embed_query(self, text: str, fix: str | None = None) -> list[float]:
        """The embeddings' ``embed_query`` (``aembed_query`` awaited for async-only ones)."""
        if AE.async_only(self.embeddings):
            return AE.run_async(lambda: self.embeddings.aembed_query(text), fix or _ASYNC_FIX)
        return self.embeddings.embed_query(text)

    def __repr__(self) -> str:
        return f"LangChainEmbedder({type(self.embeddings).__name__}, dim={self.dim})"


def as_embedder(embedding: Any) -> Any:
    """A hypermem embedder from LangChain ``Embeddings`` (unwrapping :class:`HypermemEmbeddings`),
    or ``embedding`` itself when it already is one; ``None`` stays ``None`` (the default)."""
    if embedding is None or not isinstance(embedding, Embeddings):
        return embedding
    if isinstance(embedding, HypermemEmbeddings):
        return embedding.embedder
    return LangChainEmbedder(embedding)


def _parent_error(exc: KeyError, memory: Any, items: list[dict]) -> KeyError | None:
    """The store's ``unknown parent id`` error, saying which metadata dicts gave a ``parent`` that is
    neither stored nor among the texts' ids, and that ``parent`` is the adapter's reserved key for the
    memory's parent; None when no item has such a parent (another error)."""
    ids = {it["id"] for it in items if it.get("id") is not None}
    bad = [n for n, it in enumerate(items) if "parent" in it and it["parent"] not in ids and it["parent"] not in memory]
    if not bad:
        return None
    where = " and ".join(f"metadatas[{n}]['parent']" for n in bad)
    return KeyError(f"{exc.args[0] if exc.args else exc}: {where} {'is' if len(bad) == 1 else 'are'} this store's "
                    f"reserved key for the memory's parent (the id of a stored memory or of one earlier among the "
                    f"texts), not metadata; keep such a value under another key, e.g. "
                    f"{{'parent_name': {items[bad[0]]['parent']!r}}}")


class HypermemVectorStore(VectorStore):
    """A LangChain ``VectorStore`` backed by a hypermem :class:`~hypermem.store.Memory`.

    Parameters
    ----------
    embedding: LangChain ``Embeddings`` (or a hypermem embedder) for a new memory; default
        hypermem's :class:`~hypermem.HashingEmbedder`.
    memory: a ``Memory`` to wrap, or a path to a file written by :meth:`Memory.save` (loaded,
        or a new memory saved there by :meth:`save`).  Not together with ``embedding`` for a
        ``Memory``: its embedder is used.
    include_time: show each memory's time ``t`` (ISO string) in the returned metadata.
    memory_kwargs: ``Memory`` arguments for a new memory (``decay``, ``time_coef``, ...).

    Search keyword arguments (also as ``as_retriever(search_kwargs=...)``): ``k``, ``mode``
    (``nearest``, ``subtree``, ``children``, ``ancestors``, ``siblings``, ``cone``), ``root``
    (a memory id; ``mode="ancestors"`` without one, on a store whose embedder is a hierarchy encoder: the
    memories that subsume the query, :mod:`hypermem.store.suggest`), ``at_time`` (datetime, ISO string or POSIX seconds), ``filter`` (a dict of
    metadata values and operators, see :func:`~hypermem.integrations._common.compile_filter`,
    or a callable on the :class:`~hypermem.MemoryRecord`), and ``metric``, ``query_depth``,
    ``touch``, ``use_index``, ``oversample``, ``hybrid`` (the lexical weight of a text query;
    refused, when above 0, by the ``*_by_vector`` searches) and the other arguments of
    :meth:`Memory.search`.
    """

    def __init__(self, embedding: Any = None, memory: Memory | str | None = None, *, include_time: bool = False,
                 **memory_kwargs: Any):
        if "embedder" in memory_kwargs:  # the Memory spelling of embedding=
            if embedding is not None:
                raise ValueError("pass embedding= or embedder=, not both")
            embedding = memory_kwargs.pop("embedder")
        embedder = as_embedder(embedding)
        if isinstance(memory, Memory) and embedder is not None:
            raise ValueError("pass either memory=<Memory> (its embedder is used) or embedding=, not both")
        self.path = None if memory is None or isinstance(memory, Memory) else memory
        self.memory = C.open_memory(memory, embedder, server_ok=True, **memory_kwargs)
        self.include_time = bool(include_time)

    # ------------------------------------------------------------------ embeddings
    @property
    def embeddings(self) -> Embeddings:
        """The memory's embedder as LangChain ``Embeddings``."""
        e = self.memory.embedder
        return e.embeddings if isinstance(e, LangChainEmbedder) else HypermemEmbeddings(e)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return C.relevance

    # ------------------------------------------------------------------ writing
    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str | None] | None = None,
                  **kwargs: Any) -> list[str]:
        """Store texts (one embedding call for the new ones); an id that exists is replaced
        (its text, metadata, parent and validity window), and keeps its time ``t`` and its
        children unless the metadata gives a ``t`` (:meth:`Memory.update` changes one field).
        ``parent`` / ``t`` / ``valid_from`` / ``valid_until`` in a metadata dict become the
        store's arguments; a parent must exist or come earlier among ``texts``."""
        if kwargs:
            raise TypeError(f"add_texts got unexpected keyword arguments {sorted(kwargs)}")
        texts = list(texts)
        metadatas = [None] * len(texts) if metadatas is None else list(metadatas)
        ids = [None] * len(texts) if ids is None else list(ids)
        if len(metadatas) != len(texts) or len(ids) != len(texts):
            raise ValueError(f"got {len(texts)} texts, {len(metadatas)} metadatas and {len(ids)} ids; "
                             f"they must be as many")
        items = []
        for n, (text, meta, id_) in enumerate(zip(texts, metadatas, ids)):
            args, rest = C.split_metadata(meta, f"metadatas[{n}]")
            items.append({"text": text, "id": id_, "meta": rest, **args})
        self.memory.refresh()  # which ids exist: what other handles committed too (a no-op in process)
        try:
            return C.upsert(self.memory, items)
        except KeyError as exc:
            err = _parent_error(exc, self.memory, items)
            if err is None:
                raise
            raise err from None

    def delete(self, ids: list[str] | None = None, *, cascade: bool = False, **kwargs: Any) -> bool:
        """Remove the memories ``ids`` (unknown ids are ignored; ``None`` removes all).
        A removed memory's children move to its parent unless ``cascade`` removes them too."""
        if kwargs:
            raise TypeError(f"delete got unexpected keyword arguments {sorted(kwargs)}")
        self.memory.refresh()
        C.remove(self.memory, ids, cascade)
        return True

    def save(self, path: str | None = None) -> None:
        """Write the memory with :meth:`Memory.save` (to ``path`` or the file it was opened from)."""
        C.save_memory(self.memory, path, self.path)

    # ------------------------------------------------------------------ reading
    def _doc(self, rec: Any) -> Document:
        return Document(id=rec.id, page_content=rec.text, metadata=C.record_metadata(rec, self.include_time))

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        self.memory.refresh()  # a search catches up by itself; a lookup by id asks
        recs = (U.get_or_none(self.memory, i) for i in ids)   # None: unknown, or removed meanwhile by another process
        return [self._doc(r) for r in recs if r is not None]

    def _search(self, query: Any, k: int, filter: Any, vector: bool, kwargs: dict) -> list[SearchResult]:
        C.check_search_keys(kwargs, "search", ("k", "filter"))
        if not vector and not self._as_text(kwargs):
            query, vector = self.embeddings.embed_query(query), True
        return C.search(self.memory, query, k, RF.store_filter(self.memory, filter), vector=vector, **kwargs)

    def _as_text(self, kwargs: dict) -> bool:
        """Whether a text query goes to :meth:`Memory.search` as text, so that it ranks as the
        store does, lexical (``hybrid``) term included: always with a hypermem embedder (the
        store embeds the query as ``embed_query`` would); with LangChain ``Embeddings`` when the
        lexical term is on (the store then embeds the query with ``embed_documents``), else the
        vector of ``embed_query``."""
        return not isinstance(self.memory.embedder, LangChainEmbedder) or C.hybrid_weight(self.memory, kwargs) > 0

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Any = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """Documents with hypermem's search score (higher is better)."""
        return [(self._doc(r.record), r.score) for r in self._search(query, k, filter, False, kwargs)]

    def similarity_search(self, query: str, k: int = 4, filter: Any = None, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_by_vector_with_score(self, embedding: list[float], k: int = 4, filter: Any = None,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        return [(self._doc(r.record), r.score) for r in self._search(embedding, k, filter, True, kwargs)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, filter: Any = None,
                                    **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_by_vector_with_score(embedding, k, filter, **kwargs)]

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, filter: Any = None,
                                                **kwargs: Any) -> list[Document]:
        """The ``fetch_k`` best by score, then ``k`` of them by maximal marginal relevance
        (:func:`hypermem.integrations._common.mmr`, hyperbolic shell distances)."""
        return self._mmr(embedding, True, k, fetch_k, lambda_mult, filter, kwargs)

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      filter: Any = None, **kwargs: Any) -> list[Document]:
        """As :meth:`max_marginal_relevance_search_by_vector`, the candidates found as
        :meth:`similarity_search` finds them (the query text, hybrid term included)."""
        return self._mmr(query, False, k, fetch_k, lambda_mult, filter, kwargs)

    def _mmr(self, query: Any, vector: bool, k: int, fetch_k: int, lambda_mult: float, filter: Any,
             kwargs: dict) -> list[Document]:
        hits = self._search(query, max(k, fetch_k), filter, vector, kwargs)
        return [self._doc(r.record) for r in C.mmr(self.memory, hits, k, lambda_mult)]

    # ------------------------------------------------------------------ building
    @classmethod
    def from_texts(cls, texts: list[str], embedding: Any = None, metadatas: list[dict] | None = None, *,
                   ids: list[str] | None = None, memory: Memory | str | None = None,
                   **kwargs: Any) -> HypermemVectorStore:
        """A store over a new memory (or ``memory``) holding ``texts``."""
        store = cls(embedding=embedding, memory=memory, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store

    @classmethod
    def from_documents(cls, documents: list[Document], embedding: Any = None, **kwargs: Any) -> HypermemVectorStore:
        """A store over a new memory (or ``memory=``) holding ``documents`` (their ids, when they
        have any); ``embedding`` is optional, as for :meth:`from_texts`."""
        return super().from_documents(documents, embedding, **kwargs)

    @classmethod
    async def afrom_texts(cls, texts: list[str], embedding: Any = None, metadatas: list[dict] | None = None,
                          **kwargs: Any) -> HypermemVectorStore:
        return await super().afrom_texts(texts, embedding, metadatas, **kwargs)

    @classmethod
    async def afrom_documents(cls, documents: list[Document], embedding: Any = None,
                              **kwargs: Any) -> HypermemVectorStore:
        return await super().afrom_documents(documents, embedding, **kwargs)

    def __repr__(self) -> str:
        return f"HypermemVectorStore({self.memory!r})"
