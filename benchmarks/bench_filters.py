"""Metadata filters in process: one search's median time with each filter, and right after a write.

A store of ``n`` memories (hashing embedder, dim 256) with metadata ``{"user": one of 100,
"kind": one of 2, "n": the row}``; ten queries a filter (``k=5``, ``hybrid=0``), each also
right after an ``add``; one thread.  Prints one JSON line of medians in ms.  ``--shares``
instead times filters that keep 1-60% of the rows (``{"p": {"$lt": X}}``, ``p`` one of 100),
then a removal and the filtered search right after it.  ``--adapters`` times the framework
adapters' filters that name more than metadata: a LangGraph ``BaseStore`` search (items, TTL,
value filter, namespace prefix; with a query and without; a page at offset 5,000; ``list_namespaces``),
a LangChain filter on ``parent`` and on ``t``, a LlamaIndex query with ``node_ids``, and the
listings without a search: LlamaIndex ``get_nodes`` / ``delete_nodes`` (on a fresh copy of the
store each time) by a filter on ``parent`` (1% of the nodes) and on ``kind`` with ``parent``, ``delete``
of a source document (1% of the nodes), and LangGraph's ``sweep_ttl`` (nothing expired; 10% expired,
once) and a delete of one item (then the pass that prunes emptied namespaces):

    OMP_NUM_THREADS=1 python benchmarks/bench_filters.py --n 100000 [--shares | --adapters]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from hypermem.embed import HashingEmbedder
from hypermem.store import Memory


def median_ms(times: list[float]) -> float:
    return round(sorted(times)[len(times) // 2] * 1000, 1)


def timed(fn, reps: int = 7) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return median_ms(times)


def shares(n: int) -> dict[str, float]:
    mem = Memory(embedder=HashingEmbedder(dim=256))
    mem.add_many([{"text": f"note {i} about topic {i % 977}", "meta": {"p": i % 100, "user": f"u{i % 100}",
                   "kind": "chat" if i % 3 else "fact", "tags": ["a"] if i % 3 == 0 else ["b"]}} for i in range(n)])
    q = "topic 5 note"
    out = {"none": timed(lambda: mem.search(q, k=5, touch=False, hybrid=0))}
    for pct in (1, 10, 25, 40, 49, 60):
        spec = {"p": {"$lt": pct}}
        mem.search(q, k=5, filters=spec, touch=False, hybrid=0)
        out[f"keep_{pct}%"] = timed(lambda spec=spec: mem.search(q, k=5, filters=spec, touch=False, hybrid=0))
    for spec in ({"user": "u3"}, {"kind": "fact"}, {"tags": {"$contains": "a"}}):
        mem.search(q, k=5, filters=spec, touch=False, hybrid=0)
    ids, removal, after = mem.ids, [], []
    for j in range(5):
        t = time.perf_counter()
        mem.remove(ids[1000 + 7 * j])
        removal.append(time.perf_counter() - t)
        t = time.perf_counter()
        mem.search(q, k=5, filters={"user": "u3"}, touch=False, hybrid=0)
        after.append(time.perf_counter() - t)
    out["remove"], out["filtered_search_after_remove"] = median_ms(removal), median_ms(after)
    return out


def adapters(n: int) -> dict[str, float]:
    from datetime import datetime, timedelta, timezone

    from langgraph.store.base import ListNamespacesOp, PutOp, SearchOp
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

    from hypermem.integrations.langchain import HypermemVectorStore as LangChainStore
    from hypermem.integrations.langgraph import HypermemStore
    from hypermem.integrations.llama_index import HypermemVectorStore as LlamaStore

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    out: dict[str, float] = {}
    clock = [t0]
    graph = HypermemStore(embedder=HashingEmbedder(dim=256), clock=lambda: clock[0])
    graph.batch([PutOp(("users", f"u{i % 100}"), f"k{i}", {"text": f"note {i} about topic {i % 977}",
                                                          "kind": "chat" if i % 3 else "fact"},
                       ttl=60 if i % 10 == 0 else None) for i in range(n)])
    for name, op in (("langgraph_query_filter", SearchOp((), {"kind": "fact"}, 5, 0, "topic 5 note", False)),
                     ("langgraph_query_prefix", SearchOp(("users", "u7"), None, 5, 0, "topic 5 note", False)),
                     ("langgraph_list_prefix", SearchOp(("users", "u7"), {"kind": "fact"}, 10, 0, None, False)),
                     ("langgraph_list_all", SearchOp((), {"kind": "fact"}, 10, 0, None, False)),
                     ("langgraph_list_offset_5000", SearchOp((), {"kind": "fact"}, 10, 5000, None, False)),
                     ("langgraph_list_namespaces", ListNamespacesOp(None, None, 100, 0))):
        graph.batch([op])
        out[name] = timed(lambda op=op, graph=graph: graph.batch([op]), reps=5)
    out["langgraph_sweep_ttl_none_expired"] = timed(graph.sweep_ttl, reps=5)
    keys = iter(range(1, n, 10))   # items without a TTL, one deleted a call: the namespaces are pruned after it
    out["langgraph_delete_one"] = timed(lambda graph=graph: graph.batch([PutOp(("users", f"u{(j := next(keys)) % 100}"),
                                                                   f"k{j}", None)]), reps=5)
    clock[0] = t0 + timedelta(minutes=61)   # the 10% with ttl=60 have expired
    t = time.perf_counter()
    swept = graph.sweep_ttl()
    out["langgraph_sweep_ttl_10%_expired"] = median_ms([time.perf_counter() - t])
    assert swept == len(range(0, n, 10)), swept
    del graph

    def store(docs: bool = False) -> Memory:
        mem = Memory(embedder=HashingEmbedder(dim=256))
        mem.add_many([{"text": f"topic {j}", "id": f"p{j}", "t": t0} for j in range(100)])
        mem.add_many([{"text": f"note {i} about topic {i % 977}", "id": f"m{i}", "parent": f"p{i % 100}",
                       "t": t0 + timedelta(seconds=i), "meta": {"kind": "chat" if i % 3 else "fact",
                                                                **({"ref_doc_id": f"d{i % 100}"} if docs else {})}}
                      for i in range(n)])
        return mem

    mem = store()
    parent7 = MetadataFilters(filters=[MetadataFilter(key="parent", value="p7")])
    kind7 = MetadataFilters(filters=[MetadataFilter(key="kind", value="fact"), MetadataFilter(key="parent", value="p7")])
    for name, flt in (("llama_get_nodes_parent", parent7), ("llama_get_nodes_kind_parent", kind7)):
        LlamaStore(mem).get_nodes(filters=flt)
        out[name] = timed(lambda flt=flt: LlamaStore(mem).get_nodes(filters=flt), reps=5)
    deletes = []
    for _ in range(3):   # each on a fresh store: the time of the call alone
        copy = LlamaStore(store())
        t = time.perf_counter()
        copy.delete_nodes(filters=parent7)
        deletes.append(time.perf_counter() - t)
        del copy
    out["llama_delete_nodes_parent"] = median_ms(deletes)
    docs, deletes = LlamaStore(store(docs=True)), []
    for j in range(3):   # a source document of 1% of the nodes; the store's rows are built before
        docs.delete("d-none")
        t = time.perf_counter()
        docs.delete(f"d{j}")
        deletes.append(time.perf_counter() - t)
    out["llama_delete_ref_doc"] = median_ms(deletes)
    del docs
    chain = LangChainStore(memory=mem)
    late = (t0 + timedelta(seconds=n - 1000)).isoformat()
    for name, flt in (("langchain_parent", {"parent": "p7"}), ("langchain_t", {"t": {"$gte": late}}),
                      ("langchain_parent_kind", {"parent": "p7", "kind": "fact"})):
        chain.similarity_search("topic 5 note", k=5, filter=flt, touch=False, hybrid=0)
        out[name] = timed(lambda flt=flt: chain.similarity_search("topic 5 note", k=5, filter=flt, touch=False,
                                                                  hybrid=0), reps=5)
    llama = LlamaStore(mem)
    q = VectorStoreQuery(query_str="topic 5 note", similarity_top_k=5, node_ids=[f"m{i}" for i in range(0, n, 97)])
    llama.query(q, touch=False, hybrid=0)
    out["llama_node_ids"] = timed(lambda: llama.query(q, touch=False, hybrid=0), reps=5)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--shares", action="store_true", help="filters keeping 1-60%% of the rows, then removals")
    ap.add_argument("--adapters", action="store_true", help="the LangGraph, LangChain and LlamaIndex filters")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    n = args.n
    if args.shares or args.adapters:
        print(json.dumps(shares(n) if args.shares else adapters(n)))
        return 0
    mem = Memory(embedder=HashingEmbedder(dim=256))
    mem.add_many([{"text": f"note {i} about topic {i % 977}",
                   "meta": {"user": f"u{i % 100}", "kind": "chat" if i % 3 else "fact", "n": i}} for i in range(n)])
    queries = [f"topic {j} note" for j in range(10)]
    filters = {"none": None, "user": {"user": "u7"}, "user_in": {"user": {"$in": ["u7", "u8"]}},
               "user_kind": {"user": "u7", "kind": "fact"}, "not_kind": {"$not": {"kind": "fact"}},
               "n_gt": {"n": {"$gt": n - 1000}},
               "n_in_200": {"n": {"$in": list(range(0, n, max(1, n // 200)))[:200]}}}   # a field of n values
    out = {}
    for name, spec in filters.items():
        mem.search(queries[0], k=5, filters=spec, touch=False, hybrid=0)   # a field's columns are built here
        alone, after_add = [], []
        for j, q in enumerate(queries):
            t = time.perf_counter()
            mem.search(q, k=5, filters=spec, touch=False, hybrid=0)
            alone.append(time.perf_counter() - t)
            mem.add(f"fresh {name} {j}", meta={"user": "u7", "kind": "fact", "n": n + j})
            t = time.perf_counter()
            mem.search(q, k=5, filters=spec, touch=False, hybrid=0)
            after_add.append(time.perf_counter() - t)
        out[name], out[name + "_after_add"] = median_ms(alone), median_ms(after_add)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
