"""Adapters for agent and RAG frameworks, each an optional extra imported on its own:

* :mod:`hypermem.integrations.langchain`: ``HypermemVectorStore``, a LangChain
  ``VectorStore`` (extra ``langchain``), and ``HypermemEmbeddings`` / ``LangChainEmbedder``;
* :mod:`hypermem.integrations.llama_index`: ``HypermemVectorStore``, a LlamaIndex
  ``BasePydanticVectorStore``, and ``HypermemEmbedding`` (extra ``llama-index``);
* :mod:`hypermem.integrations.langgraph`: ``HypermemStore``, a LangGraph ``BaseStore`` for
  long-term memory (extra ``langgraph``).

This package imports no framework; importing a submodule without its framework raises an
``ImportError`` that names the extra to install.
"""

__all__: list[str] = []
