"""Overhead of the framework adapters against a direct ``Memory.search``.

Each row times one query path over the same memories (hashing embedder) against the
``Memory.search`` call the adapter itself makes (same query form, same ``filters``: the
store's dict / column filters), and prints the median milliseconds per query of each, then
the per-query paired overhead: the median of ``adapter - direct`` and the median of
``adapter / direct`` over the same queries (``statistics.median_low``: one query's value, so
the two agree in sign: a difference below 0 goes with a ratio below 1):

* LangChain: ``similarity_search`` and the retriever's ``invoke`` (``Memory.search(text)``), a
  metadata ``filter`` (``Memory.search(text, filters={"shard": 1})``, the dict as it is), MMR
  over 20 candidates (``Memory.search(text, k=20)``, the re-ranking is the adapter's);
* LlamaIndex: ``HypermemVectorStore.query`` with a query embedding, and a
  ``VectorIndexRetriever.retrieve`` (embeds the query, then the same vector search:
  ``Memory.search(query_point(embedding), query_depth=base_depth)``);
* LangGraph: ``HypermemStore.search`` with a query in a namespace prefix (``Memory.search(text,
  mode="subtree", root=<namespace>, filters=item_filter(...))``: the live indexed items, from the
  store's metadata columns, as ``HypermemStore._where`` builds it).

Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_integrations.py [--n 10000] [--queries 100] [--dim 256]``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone

import torch

from hypermem import HashingEmbedder, Memory

WORDS = ("apple river stone cloud engine garden violin harbor lantern meadow copper falcon winter "
         "pepper canyon ribbon marble tiger orbit velvet").split()


def _text(i: int) -> str:
    return " ".join(WORDS[(i * p) % len(WORDS)] for p in (1, 3, 7, 11)) + f" item {i}"


def _time_pair(direct: Callable[[str], object], adapter: Callable[[str], object],
               queries: list[str]) -> tuple[float, float, float, float]:
    """Median ms of each path, and the paired overhead of the same queries: the median of the
    per-query differences ``adapter - direct`` (ms) and of the ratios ``adapter / direct``,
    each ``median_low`` (one query's value, so that the difference is below 0 exactly when the
    ratio is below 1).  The two calls alternate query by query, so a busy machine slows both alike."""
    for q in queries[:5]:
        direct(q), adapter(q)
    d, a = [], []
    for q in queries:
        t0 = time.perf_counter()
        direct(q)
        t1 = time.perf_counter()
        adapter(q)
        t2 = time.perf_counter()
        d.append(t1 - t0)
        a.append(t2 - t1)
    diff = statistics.median_low(y - x for x, y in zip(d, a))
    ratio = statistics.median_low(y / x for x, y in zip(d, a))
    return statistics.median(d) * 1e3, statistics.median(a) * 1e3, diff * 1e3, ratio


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="memories")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    from langchain_core.documents import Document  # noqa: F401  (import cost outside the timings)
    from langgraph.store.base import PutOp
    from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from hypermem.integrations import _common as C
    from hypermem.integrations import _record_filters as RF
    from hypermem.integrations.langchain import HypermemVectorStore as LCStore
    from hypermem.integrations.langgraph import HypermemStore, namespace_id
    from hypermem.integrations.llama_index import HypermemEmbedding
    from hypermem.integrations.llama_index import HypermemVectorStore as LIStore

    n, k = args.n, args.k
    queries = [_text(i * 7919 + 13) for i in range(args.queries)]
    emb = HashingEmbedder(dim=args.dim)
    mem = Memory(embedder=emb)
    groups = max(1, n // 100)
    mem.add_many([{"text": f"topic {g}", "id": f"g{g}"} for g in range(groups)])
    mem.add_many([{"text": _text(i), "id": f"m{i}", "parent": f"g{i % groups}", "meta": {"shard": i % 4}}
                  for i in range(n - groups)])
    lc = LCStore(memory=mem)
    li = LIStore(mem)
    li_embed = HypermemEmbedding(emb)
    rows: list[tuple[str, float, float, float, float]] = []

    def row(name: str, direct: Callable, adapter: Callable) -> None:
        rows.append((name, *_time_pair(direct, adapter, queries)))

    row("LangChain similarity_search", lambda q: mem.search(q, k=k), lambda q: lc.similarity_search(q, k=k))
    retriever = lc.as_retriever(search_kwargs={"k": k})
    row("LangChain retriever.invoke", lambda q: mem.search(q, k=k), retriever.invoke)
    row("LangChain filter={'shard': 1}", lambda q: mem.search(q, k=k, filters={"shard": 1}),
        lambda q: lc.similarity_search(q, k=k, filter={"shard": 1}))
    row("LangChain MMR (fetch_k=20)", lambda q: mem.search(q, k=20),
        lambda q: lc.max_marginal_relevance_search(q, k=k, fetch_k=20))
    qvecs = {q: li_embed.get_query_embedding(q) for q in queries}
    row("LlamaIndex store.query (embedding)",
        lambda q: mem.search(C.query_point(mem, qvecs[q]), k=k, query_depth=mem.base_depth),
        lambda q: li.query(VectorStoreQuery(query_embedding=qvecs[q], similarity_top_k=k)))
    li_ret = VectorIndexRetriever(index=_index(li, li_embed), similarity_top_k=k, embed_model=li_embed)
    # the retriever embeds the query (no lexical term with the hashing embedder), then searches the vector
    row("LlamaIndex retriever.retrieve",
        lambda q: mem.search(C.query_point(mem, emb.embed([q])[0]), k=k, query_depth=mem.base_depth),
        li_ret.retrieve)

    # LangGraph: its own memory, items in 4 x groups/4 namespaces
    lg = HypermemStore(embedder=emb)
    lg.batch([PutOp(("users", f"u{i % 4}", f"g{i % groups}"), f"k{i}", {"text": _text(i)}) for i in range(n)])
    lmem = lg.memory
    root = namespace_id(("users", "u1"))
    # the adapter's search: the live indexed items under the namespace, by the store's columns
    row("LangGraph search(('users','u1'), query)",
        lambda q: lmem.search(q, k=k, mode="subtree", root=root,
                              filters=RF.item_filter(None, C.to_time(lmem.clock()), True)),
        lambda q: lg.search(("users", "u1"), query=q, limit=k))

    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"torch {torch.__version__}, 1 thread; n={n} memories, dim={args.dim}, k={k}, "
          f"{args.queries} queries, median ms/query, direct and adapter alternating; overhead: median "
          f"(low) over the queries of each query's adapter - direct and adapter / direct")
    print("| path | direct Memory.search (ms) | adapter (ms) | overhead, per query (ms) | adapter / direct, per query |")
    print("|---|---:|---:|---:|---:|")
    for name, d, a, diff, ratio in rows:
        print(f"| {name} | {d:.2f} | {a:.2f} | {diff:+.2f} | {ratio:.2f}x |")


def _index(store, embed_model):
    from llama_index.core import StorageContext, VectorStoreIndex

    return VectorStoreIndex([], storage_context=StorageContext.from_defaults(vector_store=store),
                            embed_model=embed_model)


if __name__ == "__main__":
    main()
