"""The async API of the LlamaIndex adapter off the event loop.

``BasePydanticVectorStore``'s async methods call the sync ones on the event loop ("not
implemented for all vector stores"), and ``BaseEmbedding``'s async batch awaits one
``_aget_text_embedding`` per text.  A hypermem store and embedder are synchronous (embedding,
placement, a durable store's transaction), so :class:`OffLoopVectorStore` and
:class:`OffLoopEmbedding` run each sync call in a worker thread (``asyncio.to_thread``, which
copies the caller's context): the loop serves other tasks meanwhile, results are the sync
calls', and a batch is one embedder call, as in the sync path.  A cancelled call stops waiting;
the worker finishes its write (a store's writes are all or nothing).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["OffLoopEmbedding", "OffLoopVectorStore"]


class OffLoopVectorStore:
    """Async methods of a LlamaIndex vector store as its sync ones in a worker thread (a mixin
    before ``BasePydanticVectorStore``); ``delete_kwargs`` (``cascade=True``) reach the sync call."""

    async def async_add(self, nodes: Any, **add_kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **add_kwargs)  # type: ignore[attr-defined]

    async def aquery(self, query: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self.query, query, **kwargs)  # type: ignore[attr-defined]

    async def aget_nodes(self, node_ids: list[str] | None = None, filters: Any = None) -> list:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)  # type: ignore[attr-defined]

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)  # type: ignore[attr-defined]

    async def adelete_nodes(self, node_ids: list[str] | None = None, filters: Any = None,
                            **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)  # type: ignore[attr-defined]

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)  # type: ignore[attr-defined]


class OffLoopEmbedding:
    """Async embeddings of a LlamaIndex ``BaseEmbedding`` as its sync ones in a worker thread (a
    mixin before ``BaseEmbedding``): ``aget_text_embedding_batch`` makes one embedder call per
    ``embed_batch_size`` texts, as ``get_text_embedding_batch`` does."""

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)  # type: ignore[attr-defined]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)  # type: ignore[attr-defined]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)  # type: ignore[attr-defined]
