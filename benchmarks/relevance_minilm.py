"""The LangChain adapter's relevance (``min(1, exp(score))``) with MiniLM on a six-memory store:
the figures of docs/frameworks.md, "Relevance".

    python benchmarks/relevance_minilm.py
"""

from __future__ import annotations

import argparse

from hypermem import Memory, SentenceTransformerEmbedder
from hypermem.integrations.langchain import HypermemVectorStore

FACTS = ["Caroline went to an LGBTQ support group on Sunday.",
         "Melanie painted a sunrise over the lake last year.",
         "The car is parked on level 3 of the garage.",
         "The user prefers green tea in the morning.",
         "The quarterly report is due next Friday.",
         "Grandma's birthday party is at the lake house."]
QUERIES = [FACTS[0],
           "Caroline attended a support meeting for LGBTQ people at the weekend.",
           "When did Caroline go to the LGBTQ support group?",
           "Melanie made a painting of the sun rising above a lake.",
           "How do I change a flat tire on my bike?"]


def main() -> None:
    emb = SentenceTransformerEmbedder()
    print("| query | top hit | relevance, hybrid=0.3 | hybrid=0 |")
    print("|---|---|---:|---:|")
    store = HypermemVectorStore(memory=Memory(embedder=emb))
    store.add_texts(FACTS, ids=[f"f{i}" for i in range(len(FACTS))])
    for q in QUERIES:
        (doc, rel), = store.similarity_search_with_relevance_scores(q, k=1, touch=False)
        (_, rel0), = store.similarity_search_with_relevance_scores(q, k=1, touch=False, hybrid=0.0)
        print(f"| {q} | {doc.page_content} | {rel:.2f} | {rel0:.2f} |")
    floor = [r for _, r in store.similarity_search_with_relevance_scores(QUERIES[-1], k=6, touch=False)]
    print(f"unrelated query, every memory: {min(floor):.2f} to {max(floor):.2f}")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()   # --help, no options
    main()
