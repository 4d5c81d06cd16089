"""The ``hypermem demo``: a small hierarchical memory of time-stamped events, saved,
inspected and searched.

Each demo is a builder in :data:`DEMOS` (name -> function returning a
:class:`~hypermem.store.Memory`); :func:`run_demo` saves it, writes the inspector page,
prints the tree and a few searches.  Add a builder (and a :data:`DEMO_SEARCHES` entry)
to get a new ``hypermem demo --dataset NAME``.

>>> mem = build_events_memory()
>>> len(mem), len(mem.roots())
(30, 4)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

DEMO_NOW = datetime(2025, 6, 1, 9, 0, tzinfo=timezone.utc)
"""The demo's fixed "now", so its output is the same on every run."""

# (key, parent key, text, days before DEMO_NOW, meta)
EVENTS: list[tuple[str, str | None, str, float, dict[str, Any]]] = [
    ("pets", None, "Alex's pets", 400, {"kind": "topic"}),
    ("rex", "pets", "Rex, a golden retriever", 380, {"kind": "entity"}),
    ("rex-vet", "rex", "Rex had a vet check-up; all vaccines are up to date", 20, {"kind": "event"}),
    ("rex-choc", "rex", "Rex ate chocolate and was sick overnight", 3, {"kind": "event", "urgent": True}),
    ("rex-fetch", "rex", "Rex learned to fetch the newspaper", 40, {"kind": "event"}),
    ("mimi", "pets", "Mimi, a grey cat", 300, {"kind": "entity"}),
    ("mimi-plant", "mimi", "Mimi knocked the basil plant off the window sill", 1, {"kind": "event"}),
    ("mimi-flea", "mimi", "Mimi's flea treatment is due in spring", 60, {"kind": "event"}),
    ("work", None, "Alex's work", 400, {"kind": "topic"}),
    ("atlas", "work", "project Atlas: a search engine for legal documents", 200, {"kind": "entity"}),
    ("atlas-demo", "atlas", "the Atlas demo to the client went well", 2, {"kind": "event"}),
    ("atlas-index", "atlas", "the Atlas index rebuild took nine hours", 15, {"kind": "event"}),
    ("atlas-bug", "atlas", "Atlas returned stale results after the index rebuild", 14, {"kind": "event"}),
    ("team", "work", "Alex's team", 365, {"kind": "entity"}),
    ("team-priya", "team", "Priya joined the team as a data engineer", 30, {"kind": "event"}),
    ("team-sync", "team", "the weekly team sync moved to Thursdays", 7, {"kind": "event"}),
    ("health", None, "Alex's health", 400, {"kind": "topic"}),
    ("running", "health", "running", 250, {"kind": "entity"}),
    ("run-10k", "running", "ran 10 km in 52 minutes along the river", 4, {"kind": "event"}),
    ("run-knee", "running", "knee pain after the long run", 2, {"kind": "event", "urgent": True}),
    ("diet", "health", "diet and coffee", 250, {"kind": "entity"}),
    ("diet-coffee", "diet", "trying to cut down on coffee, two cups a day at most", 10, {"kind": "event"}),
    ("diet-veg", "diet", "cooked a vegetable curry for the first time", 5, {"kind": "event"}),
    ("travel", None, "travel plans", 120, {"kind": "topic"}),
    ("lisbon", "travel", "a trip to Lisbon in June", 90, {"kind": "entity"}),
    ("lisbon-flight", "lisbon", "booked the flight to Lisbon for June 12", 12, {"kind": "event"}),
    ("lisbon-hotel", "lisbon", "booked a hotel near Alfama in Lisbon", 11, {"kind": "event"}),
    ("lisbon-tram", "lisbon", "wants to ride tram 28 in Lisbon", 6, {"kind": "event"}),
    ("berlin", "travel", "a conference in Berlin last autumn", 230, {"kind": "entity"}),
    ("berlin-talk", "berlin", "gave a talk about search quality in Berlin", 228, {"kind": "event"}),
]


def build_events_memory(now: datetime = DEMO_NOW):
    """A 30-memory hierarchy (topics -> entities -> events) with event times spread over
    the past year, a 60-day half-life and a clock frozen at ``now``."""
    from .store import Memory
    from .temporal import HalfLife

    mem = Memory(decay=HalfLife(hours=24 * 60), clock=lambda: now)
    mem.add_many([{"id": key, "parent": parent, "text": text, "t": now - timedelta(days=days), "meta": meta}
                  for key, parent, text, days, meta in EVENTS])
    return mem


DEMOS: dict[str, Callable[[], Any]] = {"events": build_events_memory}
"""Demo builders by name (``hypermem demo --dataset NAME``)."""

DEMO_SEARCHES: dict[str, list[dict[str, Any]]] = {
    "events": [
        {"query": "the dog was sick", "k": 3},
        {"query": "index rebuild", "k": 2, "mode": "subtree", "root": "work"},
        {"query": None, "k": 3, "mode": "children", "root": "rex"},
        {"query": None, "k": 5, "mode": "ancestors", "root": "run-knee"},
        {"query": "booked", "k": 3, "mode": "subtree", "root": "travel"},
    ],
}


def _describe(search: dict[str, Any]) -> str:
    parts = [repr(search["query"]) if search["query"] is not None else "(no query)"]
    parts += [f"{k}={v.date().isoformat() if isinstance(v, datetime) else v}" for k, v in search.items()
              if k != "query"]
    return "search " + ", ".join(parts)


def run_demo(out_dir: str | Path = "out/hypermem-demo", dataset: str = "events", inspector: bool = True,
             echo: Callable[[str], Any] = print) -> dict[str, Any]:
    """Build the ``dataset`` demo, save it (SQLite and JSON), check that it loads back
    equal, write the inspector, and print the tree, the stats and a few searches.
    Returns the paths written and the search results (ids)."""
    if dataset not in DEMOS:
        raise ValueError(f"unknown demo dataset {dataset!r}; choose one of {sorted(DEMOS)}")
    from .store import Memory

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mem = DEMOS[dataset]()
    db, js, page = out / f"{dataset}.db", out / f"{dataset}.json", out / f"{dataset}.html"
    mem.save(db)
    mem.to_json(js, indent=1)
    again = Memory.load(db, clock=mem.clock)
    same = [r.to_dict() for r in again] == [r.to_dict() for r in mem] and bool((again.points == mem.points).all())
    if not same:
        raise RuntimeError("the saved demo memory did not load back equal")
    echo(f"hypermem demo '{dataset}': {len(mem)} memories, {len(mem.roots())} roots, decay {mem.decay!r}")
    echo(f"  saved {db} (loads back equal, record by record and point by point) and {js}")
    if inspector:
        mem.inspect(page, title=f"hypermem demo: {dataset}")
        echo(f"  inspector: {page.resolve().as_uri()}")
    echo("")
    echo(mem.tree())
    echo("")
    stats = mem.stats()
    echo("stats: " + json.dumps({k: stats[k] for k in ("count", "roots", "max_level", "levels", "depth_min",
                                                        "depth_max", "mean_time_weight")}))
    results = []
    for search in DEMO_SEARCHES.get(dataset, []):
        kwargs = {k: v for k, v in search.items() if k != "query"}
        hits = again.search(search["query"], touch=False, **kwargs)
        echo("")
        echo(_describe(search))
        for h in hits:
            echo(f"  {h.score:8.3f}  w={h.time_weight:.3f}  {h.text}  [{h.id}]")
        results.append([h.id for h in hits])
    return {"db": db, "json": js, "html": page if inspector else None, "results": results}
