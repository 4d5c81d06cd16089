r"""Data of the end-to-end RAG task: WordNet noun synsets with their glosses.

The task.  A memory holds WordNet noun synsets, each as the text ``"lemma: gloss"``
(``"dog: a member of the genus Canis ..."``), embedded by a frozen sentence encoder and
placed in the ball by the hierarchy.  A *query* is a held-out synset (same text form);
the answer is its hypernym.  Training uses one answer, the parent in the tree form of
:func:`hypermem.data.wordnet.build_hierarchy` (the deepest direct hypernym); evaluation
accepts *every* direct hypernym in memory (``*_targets``: the tree parent plus the minimal
elements of the query's ancestor set in the closure, i.e. its parents in the transitive
reduction of the WordNet DAG).  Held-out queries are leaves of the tree, removed from the
memory, so no held-out query is in memory and the tree of the rest stays whole.  There are
two held-out sets: the *test* leaves, and the *validation* leaves, carved out of the leaves
that would otherwise be training queries (drawn after the test leaves with their own
random stream, so the test set of a seed does not depend on ``n_val``).  Every choice
(steps, early stopping, options) is made on validation; test is scored once at the end.
Training queries are the leaves left in the memory, each with its own slot excluded from
the candidates (it cannot answer itself).

Slots are numbered in breadth-first order of the memory's tree, so a parent always comes
before its children (what :meth:`hypermem.store.Memory.add_many` needs).

Sentence embeddings are cached on disk (:func:`cached_embeddings`) under
``$HYPERMEM_CACHE`` or ``~/.cache/hypermem``, keyed by the model name and a hash of the
texts, so a rerun does not encode again.

Example::

    >>> from hypermem.embed import HashingEmbedder
    >>> data = build_rag_data("mammal.n.01", n_test=100, embedder=HashingEmbedder(dim=32), cache=False)
    >>> data.n_slots + data.n_test + data.n_val == 1180, data.n_test, data.n_val
    (True, 100, 100)
    >>> bool((data.slot_parent[data.test_target] >= -1).all())
    True
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from hypermem.data import wordnet
from hypermem.embed import SentenceTransformerEmbedder, embed_checked
from hypermem.hierarchy.tree import bfs_order, children_map, single_root

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def synset_lemma(name: str) -> str:
    """``"hot_dog.n.01" -> "hot dog"``: the lemma of an NLTK-style synset name."""
    parts = name.rsplit(".", 2)
    if len(parts) != 3 or parts[1] != "n":
        raise ValueError(f"not a noun synset name like 'dog.n.01': {name!r}")
    return parts[0].replace("_", " ")


def synset_text(name: str, gloss: str) -> str:
    """The text stored for a synset: ``"lemma: gloss"`` (just the lemma when there is no gloss)."""
    lemma = synset_lemma(name)
    return f"{lemma}: {gloss}" if gloss.strip() else lemma


# -- embedding cache ------------------------------------------------------------------------
def cache_dir(path: str | os.PathLike | None = None) -> Path:
    """Where cached arrays go: ``path``, else ``$HYPERMEM_CACHE``, else ``~/.cache/hypermem``."""
    return Path(path or os.environ.get("HYPERMEM_CACHE") or Path.home() / ".cache" / "hypermem")


def texts_key(model_name: str, texts: Sequence[str]) -> str:
    """Hex key of (model, texts): the first 16 hex digits of a SHA-256 over both."""
    h = hashlib.sha256(model_name.encode("utf-8"))
    for t in texts:
        h.update(b"\x00")
        h.update(t.encode("utf-8"))
    return h.hexdigest()[:16]


def _model_name(embedder) -> str:
    name = getattr(embedder, "model_name", None)
    if name:
        return str(name)
    return f"{type(embedder).__name__}-{getattr(embedder, 'dim', '?')}"


def cached_embeddings(texts: Sequence[str], embedder=None, cache: bool | str | os.PathLike = True,
                      chunk: int = 2048, log: Callable[[str], None] | None = None) -> torch.Tensor:
    """Embeddings ``(len(texts), dim)`` (float32, CPU) of ``texts``, read from the disk cache
    when present, else computed with ``embedder`` in chunks and saved.

    ``embedder`` defaults to :class:`~hypermem.embed.SentenceTransformerEmbedder` (the
    offline all-MiniLM-L6-v2), created only when the cache misses.  ``cache`` is ``True``
    (the default folder, see :func:`cache_dir`), a folder, or ``False`` (no cache).  The
    file is ``embeddings/<model>-<key>.npy`` with ``key = texts_key(model, texts)``.
    """
    texts = list(texts)
    model = _model_name(embedder) if embedder is not None else DEFAULT_MODEL
    file = None
    if cache is not False:
        folder = cache_dir(None if cache is True else cache) / "embeddings"
        slug = model.replace("/", "__")
        file = folder / f"{slug}-{texts_key(model, texts)}.npy"
        if file.is_file():
            arr = np.load(file)
            if arr.shape[0] == len(texts):
                return torch.from_numpy(arr.astype(np.float32, copy=False))
        found = _from_other_caches(folder, slug, texts)
        if found is not None:
            return found
    if embedder is None:
        embedder = SentenceTransformerEmbedder()
    out = np.zeros((len(texts), int(embedder.dim)), dtype=np.float32)
    t0 = time.perf_counter()
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        out[start:start + len(part)] = embed_checked(embedder, part).numpy()
        if log is not None:
            done = start + len(part)
            log(f"embedded {done}/{len(texts)} texts ({done / (time.perf_counter() - t0):.0f}/s)")
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(".tmp.npy")
        np.save(tmp, out)
        os.replace(tmp, file)
        meta = {"model": model, "count": len(texts), "dim": int(out.shape[1])}
        file.with_suffix(".json").write_text(json.dumps(meta))
        _write_texts(file.with_suffix(".texts.gz"), texts)
    return torch.from_numpy(out)


def _write_texts(path: Path, texts: Sequence[str]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for t in texts:
            fh.write(t.replace("\n", " ") + "\n")


def _from_other_caches(folder: Path, slug: str, texts: Sequence[str]) -> torch.Tensor | None:
    """Rows for ``texts`` from another cached file of the same model that holds them all
    (a subtree reuses the embeddings of all nouns)."""
    if not folder.is_dir():
        return None
    for tfile in sorted(folder.glob(f"{slug}-*.texts.gz")):
        with gzip.open(tfile, "rt", encoding="utf-8") as fh:
            rows = {line.rstrip("\n"): i for i, line in enumerate(fh)}
        try:
            take = [rows[t.replace("\n", " ")] for t in texts]
        except KeyError:
            continue
        arr = np.load(tfile.with_name(tfile.name[: -len(".texts.gz")] + ".npy"), mmap_mode="r")
        return torch.from_numpy(np.asarray(arr[take], dtype=np.float32))
    return None


# -- the task ---------------------------------------------------------------------------------
@dataclass
class RAGData:
    """The memory, the training queries and the held-out queries of the RAG task.

    Slots (rows of the memory) are in breadth-first order of the tree.

    Attributes
    ----------
    slot_names, slot_texts: the synsets in memory and their ``"lemma: gloss"`` texts.
    slot_parent: ``(M,)`` parent slot of each slot (``-1`` for the root).
    slot_level: ``(M,)`` depth in the tree (root 0).
    slot_emb: ``(M, dim)`` sentence embeddings of the slots (float32).
    train_slots: ``(T,)`` slots used as training queries (leaves of the memory); the
        answer of slot ``s`` is ``slot_parent[s]``, and ``s`` itself is excluded.
    test_names, test_texts, test_emb: the held-out queries.
    test_target: ``(Q,)`` slot of each held-out query's tree parent (its deepest direct
        hypernym).
    test_targets: ``(Q, m)`` every accepted answer (direct hypernyms in memory), ``-1``
        padded; column 0 is ``test_target``.
    val_names, val_texts, val_emb, val_target, val_targets: the same for the validation
        queries (held out of the memory like the test queries, drawn from the leaves that
        would otherwise train).
    """

    name: str
    slot_names: list[str]
    slot_texts: list[str]
    slot_parent: torch.Tensor
    slot_level: torch.Tensor
    slot_emb: torch.Tensor
    train_slots: torch.Tensor
    test_names: list[str]
    test_texts: list[str]
    test_emb: torch.Tensor
    test_target: torch.Tensor
    test_targets: torch.Tensor | None = None
    val_names: list[str] = field(default_factory=list)
    val_texts: list[str] = field(default_factory=list)
    val_emb: torch.Tensor | None = None
    val_target: torch.Tensor | None = None
    val_targets: torch.Tensor | None = None
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.test_targets is None:
            self.test_targets = self.test_target.view(-1, 1)
        if self.val_emb is None:
            self.val_emb = self.slot_emb[:0]
            self.val_target = self.test_target[:0]
        if self.val_targets is None:
            self.val_targets = self.val_target.view(-1, 1)

    @property
    def n_slots(self) -> int:
        return len(self.slot_names)

    @property
    def n_test(self) -> int:
        return len(self.test_names)

    @property
    def n_val(self) -> int:
        return len(self.val_names)

    @property
    def dim(self) -> int:
        return int(self.slot_emb.shape[1])

    def children(self) -> list[list[int]]:
        """``children[p]``: the slots whose parent is slot ``p``."""
        out: list[list[int]] = [[] for _ in range(self.n_slots)]
        for c, p in enumerate(self.slot_parent.tolist()):
            if p >= 0:
                out[p].append(c)
        return out

    def train_targets(self) -> torch.Tensor:
        """Answer slot of each training query."""
        return self.slot_parent[self.train_slots]

    def __repr__(self) -> str:
        return (f"RAGData({self.name!r}, slots={self.n_slots}, train={len(self.train_slots)}, "
                f"val={self.n_val}, test={self.n_test}, dim={self.dim})")


def load_hierarchy(root: str | None) -> wordnet.Hierarchy:
    """The WordNet hierarchy under ``root``: the shipped mammals for ``"mammal.n.01"`` when the
    database is not installed, else read from ``wordnet-base`` (``None``: all nouns)."""
    if root == wordnet.MAMMAL and not wordnet.available():
        return wordnet.load_mammals()
    return wordnet.build_hierarchy(root)


def accepted_answers(h: wordnet.Hierarchy, parent_of: dict[str, str]) -> dict[str, list[str]]:
    """Every direct hypernym of each node: its tree parent first, then the other minimal
    elements of its ancestor set (ancestors ``v`` of ``u`` with no other ancestor ``w`` of
    ``u`` below ``v``: the parents of ``u`` in the transitive reduction of the closure)."""
    anc: dict[str, set[str]] = {}
    for u, v in h.closure:
        anc.setdefault(u, set()).add(v)
    out: dict[str, list[str]] = {}
    for u, a in anc.items():
        below = set().union(*(anc.get(w, set()) for w in a))
        first = [parent_of[u]] if u in parent_of else []
        out[u] = first + sorted(v for v in a - below if v not in first)
    return out


def _padded(rows: Sequence[Sequence[int]]) -> torch.Tensor:
    m = max((len(r) for r in rows), default=1)
    return torch.tensor([list(r) + [-1] * (m - len(r)) for r in rows], dtype=torch.long).view(len(rows), m)


def build_rag_data(root: str | None = None, n_test: int = 2000, seed: int = 0, embedder=None,
                   cache: bool | str | os.PathLike = True, hierarchy: wordnet.Hierarchy | None = None,
                   log: Callable[[str], None] | None = None, n_val: int | None = None) -> RAGData:
    """Split a WordNet noun hierarchy into memory, training, validation and test queries.

    ``root``: the subtree (``None``: all 82,115 nouns; ``"mammal.n.01"``: the 1,180 shipped
    mammals).  ``n_test`` held-out leaves are drawn at random (``seed``) among the leaves
    whose parent is not the root; then ``n_val`` (default ``n_test``) validation leaves among
    the remaining ones (``random.Random(f"val-{seed}")``), also held out of the memory.
    Texts are embedded by ``embedder`` (default the offline MiniLM) through the disk cache
    (see :func:`cached_embeddings`).
    """
    h = hierarchy if hierarchy is not None else load_hierarchy(root)
    n_val = n_test if n_val is None else n_val
    for name, n, low in (("n_test", n_test, 1), ("n_val", n_val, 0)):
        if isinstance(n, bool) or not isinstance(n, int) or n < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {n!r}")
    children, roots = children_map(h.tree)
    top = single_root(roots, h.root if h.root in roots else None)
    order = bfs_order(children, top)
    leaves = [n for n in order if not children.get(n) and n != top]
    eligible = sorted(n for n in leaves if n not in set(children.get(top, ())))
    if n_test + n_val > len(eligible) // 2:
        raise ValueError(f"n_test + n_val = {n_test + n_val} is too large for {h.name}: {len(eligible)} "
                         f"eligible leaves (at most half of them are held out)")
    test = set(random.Random(seed).sample(eligible, n_test))
    val = set(random.Random(f"val-{seed}").sample([n for n in eligible if n not in test], n_val))
    slots = [n for n in order if n not in test and n not in val]
    row = {n: i for i, n in enumerate(slots)}
    parent_of = {c: p for p, cs in children.items() for c in cs}
    slot_parent = torch.tensor([row[parent_of[n]] if n in parent_of else -1 for n in slots], dtype=torch.long)
    level = torch.zeros(len(slots), dtype=torch.long)
    for i, p in enumerate(slot_parent.tolist()):
        if p >= 0:
            level[i] = level[p] + 1
    in_memory_children = torch.zeros(len(slots), dtype=torch.long)
    in_memory_children.index_add_(0, slot_parent.clamp_min(0), (slot_parent >= 0).long())
    train = torch.nonzero((in_memory_children == 0) & (slot_parent >= 0)).squeeze(1)
    test_names, val_names = sorted(test), sorted(val)
    answers = accepted_answers(h, parent_of)

    def targets(names):
        return _padded([[row[a] for a in answers.get(n, [parent_of[n]]) if a in row] for n in names])

    # Embed every node in the hierarchy's own (sorted) order, so the cache does not depend
    # on the split.
    nodes = sorted(order)
    texts = [synset_text(n, h.glosses.get(n, "")) for n in nodes]
    emb_all = cached_embeddings(texts, embedder, cache=cache, log=log)
    pos = {n: i for i, n in enumerate(nodes)}
    all_names = slots + test_names + val_names
    take = torch.tensor([pos[n] for n in all_names], dtype=torch.long)
    emb = emb_all[take]
    texts = [texts[i] for i in take.tolist()]
    m, q = len(slots), len(slots) + n_test
    test_t, val_t = targets(test_names), targets(val_names)
    return RAGData(
        name=h.name, slot_names=slots, slot_texts=texts[:m], slot_parent=slot_parent, slot_level=level,
        slot_emb=emb[:m], train_slots=train, test_names=test_names, test_texts=texts[m:q], test_emb=emb[m:q],
        test_target=test_t[:, 0].clone(), test_targets=test_t, val_names=val_names, val_texts=texts[q:],
        val_emb=emb[q:], val_target=val_t[:, 0].clone(), val_targets=val_t,
        meta={"root": h.root, "seed": seed, "n_test": n_test, "n_val": n_val,
              "model": _model_name(embedder) if embedder is not None else DEFAULT_MODEL},
    )


class RAGDataModule(L.LightningDataModule):
    """Batches of the RAG task for Lightning.

    Training batches are ``(features, answer slot, own slot)`` of the training queries
    (shuffled with ``seed``); validation batches are ``(features, accepted answers)`` of the
    *validation* queries (never the test queries: those are read once, by
    :meth:`test_queries`, after every choice is made).
    """

    def __init__(self, data: RAGData, batch_size: int = 256, eval_batch: int = 250, seed: int = 0):
        super().__init__()
        self.data = data
        self.batch_size = int(batch_size)
        self.eval_batch = int(eval_batch)
        self.seed = int(seed)

    def train_queries(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        d = self.data
        return d.slot_emb[d.train_slots].float(), d.train_targets(), d.train_slots

    def test_queries(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Test features and accepted answers ``(Q, m)`` (``-1`` padded)."""
        return self.data.test_emb.float(), self.data.test_targets

    def val_queries(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Validation features and accepted answers ``(V, m)`` (``-1`` padded)."""
        return self.data.val_emb.float(), self.data.val_targets

    def train_dataloader(self) -> DataLoader:
        g = torch.Generator().manual_seed(self.seed)
        return DataLoader(TensorDataset(*self.train_queries()), batch_size=self.batch_size, shuffle=True,
                          generator=g, drop_last=len(self.data.train_slots) > self.batch_size)

    def val_dataloader(self) -> DataLoader:
        X, y = self.val_queries()
        if len(X) == 0:
            raise ValueError("the data has no validation queries (build it with n_val >= 1)")
        return DataLoader(TensorDataset(X, y), batch_size=self.eval_batch)
