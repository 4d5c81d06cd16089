"""The ``hypermem demo``: hierarchical memories built, saved, inspected and searched.

Two demos (``hypermem demo --dataset NAME``):

* ``mammals`` (the default) — the WordNet mammal hierarchy (1,180 synsets, 6,540
  closure pairs, shipped in :mod:`hypermem.data`): trains Poincaré embeddings (Nickel &
  Kiela 2017) with the shipped Lightning config ``mammals_poincare`` (:mod:`hypermem.configs`)
  (TensorBoard logs under ``runs/``), loads the trained points into a
  :class:`~hypermem.store.Memory` with the synsets' glosses as text
  (:func:`embedding_to_memory`), reports the reconstruction MAP of the memory's points,
  runs a few hierarchical searches (subtree, ancestors, entailment cone) and writes the
  inspector (:func:`run_mammals_demo`);
* ``events`` — a small hand-written hierarchy of time-stamped events
  (:func:`build_events_memory`).

:func:`run_demo` dispatches on the name.  Each memory is saved (SQLite and JSON), checked
to load back equal, and written as an inspector page.

>>> mem = build_events_memory()
>>> len(mem), len(mem.roots())
(30, 4)
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .configs import config_path
from .embed.sentence_transformer import check_temp_folder
from .store.backends.sqlite_open import read_only_mount
from .train.export import embedding_to_memory  # noqa: F401  (re-exported: the demo's one-call export)

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


MAMMALS_CONFIG = "mammals_poincare"
"""The shipped Lightning config of the mammals demo (a name in :mod:`hypermem.configs`)."""

DEFAULT_DEMO = "mammals"
"""``hypermem demo`` without ``--dataset``."""

DEMOS: dict[str, Callable[..., Any]] = {}
"""Demo builders by name (``hypermem demo --dataset NAME``); filled below."""

DEMO_SEARCHES: dict[str, list[dict[str, Any]]] = {
    "events": [
        {"query": "the dog was sick", "k": 3},
        {"query": "index rebuild", "k": 2, "mode": "subtree", "root": "work"},
        {"query": None, "k": 3, "mode": "children", "root": "rex"},
        {"query": None, "k": 5, "mode": "ancestors", "root": "run-knee"},
        {"query": "booked", "k": 3, "mode": "subtree", "root": "travel"},
    ],
    # ``near``: the query is that memory's trained point (hyperbolic distance ranks).
    "mammals": [
        {"near": "dog.n.01", "k": 5},
        {"near": "lion.n.01", "k": 5, "mode": "subtree", "root": "feline.n.01"},
        {"near": "lion.n.01", "k": 10, "mode": "ancestors", "root": "lion.n.01"},
        # Nickel & Kiela's loss does not train entailment cones (Ganea et al.'s does:
        # configs/mammals_cones.yaml): after training, a deep node sits near the boundary with
        # an almost empty cone, while a general node near the origin has a half-space cone.
        {"near": "placental.n.01", "k": 8, "mode": "cone", "root": "placental.n.01"},
    ],
}
"""The searches each demo prints: :meth:`Memory.search` keyword arguments, plus ``query``
(text or None) or ``near`` (the id of a memory whose point is the query)."""


# ---------------------------------------------------------------------------- WordNet mammals
def find_config(config: str | Path | None = None) -> Path:
    """The config file: ``config`` (default :data:`MAMMALS_CONFIG`) as a path, or a config
    shipped in the package by name (see :func:`hypermem.configs.config_path`)."""
    return config_path(MAMMALS_CONFIG if config is None else config)


def _check_epochs(epochs: Any) -> int | None:
    if epochs is None:
        return None
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs must be an integer >= 1, got {epochs!r}")
    return epochs


def _scaled_burn_in(settings: Mapping[str, Any], epochs: int) -> list[str]:
    """Overrides that keep the config's burn-in the same share of a shorter (or longer) run:
    the mammals config burns in for 20 of 200 epochs, so ``--epochs 20`` alone was all burn-in
    (MAP 0.22) and the demo has no flag to lower it."""
    total = (settings.get("trainer") or {}).get("max_epochs")
    out = []
    for part in ("model", "data"):
        burn = (settings.get(part) or {}).get("burn_in")
        if isinstance(total, int) and total > 0 and isinstance(burn, int) and burn > 0:
            scaled = min(burn, round(burn * epochs / total))
            if scaled != burn:
                out.append(f"--{part}.burn_in={scaled}")
    return out


def train_mammals(config: str | Path | None = None, epochs: int | None = None, runs_dir: str | Path = "runs",
                  progress: bool = True, args: Sequence[str] = (), threads: int | None = 1):
    """Train the hierarchy embedding of ``config`` (default: the shipped mammals config)
    with the Lightning CLI of :mod:`hypermem.train.hierarchy_cli`, exactly as
    ``hypermem train --config ...`` does.

    ``epochs`` overrides ``trainer.max_epochs`` (and validates at the end when the
    config's ``check_val_every_n_epoch`` is larger); TensorBoard logs and checkpoints go
    under ``runs_dir``; ``progress=False`` hides Lightning's progress bar and model
    summary; ``args`` are more command-line overrides (``"--model.dim=5"``).
    ``threads``: torch threads while training (default 1: the batches are small and a
    thread pool costs more than it saves); None keeps torch's setting.
    Returns the ``LightningCLI`` (``.model``, ``.datamodule``, ``.trainer``).
    """
    import torch
    import yaml

    from .train.hierarchy_cli import main as train_main

    path = find_config(config)
    epochs = _check_epochs(epochs)
    argv = ["fit", "--config", str(path), f"--trainer.logger.init_args.save_dir={runs_dir}"]
    if epochs is not None:
        settings = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        every = (settings.get("trainer") or {}).get("check_val_every_n_epoch") or 1
        argv.append(f"--trainer.max_epochs={epochs}")
        if every > epochs:
            argv.append(f"--trainer.check_val_every_n_epoch={epochs}")
        argv += _scaled_burn_in(settings, epochs)
    if not progress:
        argv += ["--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return train_main(argv + list(args))
    finally:
        torch.set_num_threads(before)


def check_output_folders(folders: Mapping[str, str | Path], temp: bool = True) -> None:
    """Fail at once, before any training (Lightning's import alone takes 10 s or more), where
    the demo could not write: each folder of ``folders`` (keyed by the setting that names it,
    ``{"--out": ..., "--runs": ...}``), or the first part of its path that exists where it is
    still to be created, must be writable by this process (a read-only working folder refused
    ``runs/`` only after the import, and left ``--out`` created and empty); with ``temp``, a
    temporary folder must exist (torch, Lightning and matplotlib's cache ask for one when they
    are imported).  ``PermissionError`` / ``FileNotFoundError`` naming the setting and the remedy."""
    for setting, folder in folders.items():
        path = Path(folder).absolute()
        part = next((p for p in (path, *path.parents) if p.exists()), None)
        if part is not None and part.is_dir() and not os.access(part, os.W_OK | os.X_OK):
            why = "a read-only file system" if read_only_mount(str(part)) else "permission denied"
            where = "" if part == path else f" (where {path} would be created)"
            raise PermissionError(f"{setting} {folder}: this process may not write in {part}{where} ({why}): "
                                  f"give {setting} a writable folder")
    if temp:
        check_temp_folder("the mammals demo", "torch, Lightning and matplotlib's cache ask for one")


def synset_texts(nodes: Sequence[str], glosses: Mapping[str, str] | None,
                 echo: Callable[[str], Any] = print) -> dict[str, str]:
    """The memory text of each synset: its gloss (definition), or, where the gloss is
    missing, its lemma (``"killer_whale.n.01"`` -> ``"killer whale"``), saying so once.

    >>> synset_texts(["dog.n.01", "cat.n.01"], {"dog.n.01": "a member of the genus Canis"}, echo=print)
    1 of 2 synsets have no gloss (install Debian's wordnet-base for the definitions); using their lemma names
    {'dog.n.01': 'a member of the genus Canis', 'cat.n.01': 'cat'}
    """
    glosses = glosses or {}
    out = {n: glosses.get(n) or str(n).split(".", 1)[0].replace("_", " ") for n in nodes}
    missing = sum(1 for n in nodes if not glosses.get(n))
    if missing:
        echo(f"{missing} of {len(nodes)} synsets have no gloss (install Debian's wordnet-base for the "
             "definitions); using their lemma names")
    return out


def build_mammals_memory(config: str | Path | None = None, epochs: int | None = None, runs_dir: str | Path = "runs",
                         progress: bool = True, echo: Callable[[str], Any] = print):
    """Train the mammals embedding (:func:`train_mammals`) and load it into a memory
    (:func:`embedding_to_memory`, glosses as text).  Returns ``(memory, lightning_cli)``."""
    cli = train_mammals(config, epochs=epochs, runs_dir=runs_dir, progress=progress)
    module, data = cli.model, cli.datamodule
    nodes = list(module.nodes)
    texts = synset_texts(nodes, data.glosses, echo=echo)
    meta = {n: {"synset": n, "lemma": n.split(".", 1)[0]} for n in nodes}
    mem = embedding_to_memory(module.points_dict(), data.tree, texts, curvature=module.ball.curvature, t=DEMO_NOW,
                              meta=meta,
                              embedder=_text_query_embedder(module.hparams.dim))
    return mem, cli


def _text_query_embedder(dim: int):
    """The hashing embedder for text queries; below its smallest dimension (8), the first
    ``dim`` coordinates of an 8-d one.  Against learned points text queries mean little
    either way: the demo queries with memories' points."""
    from .embed import CallableEmbedder, HashingEmbedder

    if dim >= 8:
        return HashingEmbedder(dim=dim)
    hashing = HashingEmbedder(dim=8)
    return CallableEmbedder(lambda texts: hashing.embed(texts)[:, :dim], dim=dim)


def memory_reconstruction(mem, closure):
    """Nickel & Kiela's reconstruction (MAP, mean rank) of ``closure`` by the memory's
    points, hyperbolic distances in its ball (:func:`hypermem.hierarchy.reconstruction`).
    ``closure``: ``(hyponym, hypernym)`` id pairs, or a :class:`~hypermem.hierarchy.Relations`."""
    from .hierarchy import reconstruction

    points = mem.points
    return reconstruction({id_: points[i] for i, id_ in enumerate(mem.ids)}, closure, mem.ball)


DEMOS.update({"mammals": build_mammals_memory, "events": build_events_memory})


# ---------------------------------------------------------------------------- running a demo
def _describe(search: dict[str, Any]) -> str:
    if "near" in search:
        parts = [f"near {search['near']}"]
    else:
        parts = [repr(search["query"]) if search["query"] is not None else "(no query)"]
    parts += [f"{k}={v.date().isoformat() if isinstance(v, datetime) else v}" for k, v in search.items()
              if k not in ("query", "near")]
    return "search " + ", ".join(parts)


def _save_and_check(mem, out: Path, name: str, echo: Callable[[str], Any]) -> tuple[Path, Path]:
    """Save SQLite and JSON, and check the SQLite file loads back equal."""
    from .store import Memory

    db, js = out / f"{name}.db", out / f"{name}.json"
    mem.save(db)
    mem.to_json(js, indent=1)
    again = Memory.load(db, clock=mem.clock, embedder=mem.embedder)
    same = [r.to_dict() for r in again] == [r.to_dict() for r in mem] and bool((again.points == mem.points).all())
    if not same:
        raise RuntimeError("the saved demo memory did not load back equal")
    echo(f"  saved {db} (loads back equal, record by record and point by point) and {js}")
    return db, js


def _run_searches(mem, searches: list[dict[str, Any]], echo: Callable[[str], Any]) -> list[list[str]]:
    results = []
    for search in searches:
        kwargs = {k: v for k, v in search.items() if k not in ("query", "near")}
        query = mem.point(search["near"]) if "near" in search else search["query"]
        hits = mem.search(query, touch=False, **kwargs)
        echo("")
        echo(_describe(search))
        for h in hits:
            echo(f"  {h.score:8.3f}  time_weight={h.time_weight:.3f}  {h.text[:70]}  [{h.id}]")
        results.append([h.id for h in hits])
    return results


def run_demo(out_dir: str | Path = "out/hypermem-demo", dataset: str = DEFAULT_DEMO, inspector: bool = True,
             echo: Callable[[str], Any] = print, name: str | None = None, **options: Any) -> dict[str, Any]:
    """Run the ``dataset`` demo (``mammals``: :func:`run_mammals_demo`, which takes the
    ``options``; ``events``: :func:`run_events_demo`).  The files are ``out_dir/NAME.db``,
    ``.json`` and ``.html``, ``NAME`` the dataset's name unless ``name`` is given (``hypermem
    demo -o STEM`` passes ``STEM``'s folder and name).  Returns the paths written and the
    search results (ids)."""
    if dataset not in DEMOS:
        raise ValueError(f"unknown demo dataset {dataset!r}; choose one of {sorted(DEMOS)}")
    if name is not None and (not isinstance(name, str) or not name.strip() or Path(name).name != name):
        raise ValueError(f"name must be a plain file name (no folder), got {name!r}")
    if dataset == "mammals":
        return run_mammals_demo(out_dir, inspector=inspector, echo=echo, name=name, **options)
    if options:
        raise ValueError(f"the {dataset!r} demo takes no options {sorted(options)} (they are for the mammals demo)")
    return run_events_demo(out_dir, inspector=inspector, echo=echo, name=name)


def run_events_demo(out_dir: str | Path = "out/hypermem-demo", inspector: bool = True,
                    echo: Callable[[str], Any] = print, name: str | None = None) -> dict[str, Any]:
    """Build the events demo, save it (SQLite and JSON), check that it loads back equal,
    write the inspector, and print the tree, the stats and a few searches."""
    dataset = "events"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mem = build_events_memory()
    page = out / f"{name or dataset}.html"
    echo(f"hypermem demo '{dataset}': {len(mem)} memories, {len(mem.roots())} roots, decay {mem.decay!r}")
    db, js = _save_and_check(mem, out, name or dataset, echo)
    if inspector:
        mem.inspect(page, title=f"hypermem demo: {dataset}")
        echo(f"  inspector: {page.resolve().as_uri()}")
    echo("")
    echo(mem.tree())
    echo("")
    stats = mem.stats()
    echo("stats: " + json.dumps({k: stats[k] for k in ("count", "roots", "max_level", "levels", "depth_min",
                                                        "depth_max", "mean_time_weight")}))
    results = _run_searches(mem, DEMO_SEARCHES[dataset], echo)
    return {"db": db, "json": js, "html": page if inspector else None, "results": results}


def run_mammals_demo(out_dir: str | Path = "out/hypermem-demo", config: str | Path | None = None,
                     epochs: int | None = None, runs_dir: str | Path = "runs", progress: bool = True,
                     inspector: bool = True, echo: Callable[[str], Any] = print,
                     name: str | None = None) -> dict[str, Any]:
    """The WordNet mammals demo: train (:func:`train_mammals`; logs under ``runs_dir``),
    load the trained points into a memory with the glosses as text, report the
    reconstruction MAP and mean rank of the memory's points, save and check the memory,
    write the inspector, and print a subtree and the searches of
    ``DEMO_SEARCHES["mammals"]`` (for each cone search, how many memories the cone holds
    and how many of them are WordNet hyponyms of its root, in the closure).

    Returns the paths written (``db``, ``json``, ``html``, ``log_dir``), ``map`` and
    ``mean_rank`` (of the memory's points), ``val_map`` (Lightning's last ``val/map``, or
    None when no validation ran), ``seconds`` (training), ``results`` (ids per search run:
    those of ``DEMO_SEARCHES["mammals"]`` whose synsets are in the hierarchy),
    ``cone_precision`` (per cone search: the share of the cone's memories that are
    hyponyms of its root; NaN for an empty cone), ``memory`` and ``trained_points`` (node -> point).
    """
    import time

    epochs = _check_epochs(epochs)
    check_output_folders({"out_dir": out_dir, "runs_dir": runs_dir})
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    echo("hypermem demo 'mammals': Poincaré embeddings of the WordNet mammal hierarchy (Nickel & Kiela 2017)")
    echo(f"  training with {find_config(config)}" + (f", {epochs} epochs" if epochs else "")
         + f"; TensorBoard: tensorboard --logdir {runs_dir}")
    t0 = time.perf_counter()
    mem, cli = build_mammals_memory(config, epochs=epochs, runs_dir=runs_dir, progress=progress, echo=echo)
    seconds = time.perf_counter() - t0
    trainer, data = cli.trainer, cli.datamodule
    val_map = trainer.callback_metrics.get("val/map")
    val_map = None if val_map is None else float(val_map)
    rec = memory_reconstruction(mem, data.relations)
    log_dir = Path(trainer.log_dir) if trainer.log_dir else None
    echo("")
    echo(f"trained {trainer.current_epoch} epochs in {seconds:.1f} s; logs in {log_dir}")
    echo(f"{len(mem)} memories (synsets, glosses as text), dim {mem.dim}, curvature {mem.curvature:g}")
    echo(f"reconstruction of the {rec.n_pairs} closure pairs by the memory's points: MAP {rec.map:.4f}, "
         f"mean rank {rec.mean_rank:.3f}" + (f" (Lightning's last val/map: {val_map:.4f})" if val_map is not None
                                              else ""))
    db, js = _save_and_check(mem, out, name or "mammals", echo)
    page = out / f"{name or 'mammals'}.html"
    if inspector:
        mem.inspect(page, title="hypermem demo: WordNet mammals")
        echo(f"  inspector: {page.resolve().as_uri()}")
    if "big_cat.n.01" in mem:
        echo("")
        echo(mem.tree(root="big_cat.n.01", max_text=50))
    searches = [s for s in DEMO_SEARCHES["mammals"] if s.get("near") in mem and s.get("root", s["near"]) in mem]
    if len(searches) < len(DEMO_SEARCHES["mammals"]):
        echo(f"  ({len(DEMO_SEARCHES['mammals']) - len(searches)} searches skipped: their synsets are not in "
             "this hierarchy)")
    cone_precision = []
    nodes, pairs = data.relations.nodes, data.relations.pairs
    with warnings.catch_warnings():  # an empty cone is reported below, with its count: no second word
        warnings.filterwarnings("ignore", message="no memory lies inside the entailment cone")
        results = _run_searches(mem, searches, echo)
        for search in (s for s in searches if s.get("mode") == "cone"):
            root = search["root"]
            below = {nodes[u] for u in pairs[pairs[:, 1] == data.relations.index[root], 0].tolist()}
            inside = [h.id for h in mem.search(None, k=len(mem), mode="cone", root=root, touch=False)]
            hits = sum(i in below for i in inside)
            cone_precision.append(hits / len(inside) if inside else float("nan"))
            echo(f"  the cone of {root} holds {len(inside)} memories, {hits} of them among its {len(below)} "
                 "WordNet hyponyms")
    return {"db": db, "json": js, "html": page if inspector else None, "log_dir": log_dir, "map": rec.map,
            "mean_rank": rec.mean_rank, "val_map": val_map, "seconds": seconds, "results": results,
            "cone_precision": cone_precision, "memory": mem, "trained_points": cli.model.points_dict()}
