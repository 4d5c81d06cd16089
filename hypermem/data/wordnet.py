r"""The WordNet 3.0 noun hierarchy, read directly from the database files.

WordNet's ``data.noun`` (format: the ``wndb(5WN)`` manual page) holds one synset per
line::

    offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt
    [ptr_symbol offset pos source/target...] | gloss

The hypernym hierarchy uses the pointers ``@`` (hypernym) and ``@i`` (instance
hypernym).  Synsets are named the way NLTK names them, ``lemma.n.NN``: the first word
of the synset, lower-cased, and the synset's position in that lemma's sense list in
``index.noun`` (so ``dog.n.01`` is the domestic dog).

Nickel & Kiela ("Poincaré Embeddings for Learning Hierarchical Representations",
NeurIPS 2017) train on the *transitive closure* of the hierarchy, following both
pointer types: every pair ``(hyponym, hypernym)`` where the hypernym is reachable by
``@``/``@i`` steps.  For all nouns that is 82,115 synsets and 743,086 pairs; the
mammal subtree keeps the synsets that have ``mammal.n.01`` among their hypernyms (plus
``mammal.n.01`` itself) and the pairs between them, less the two non-taxonomic leaves
of :data:`MAMMAL_EXCLUDED` (1,180 synsets, 6,540 pairs).

Orientation conventions, used throughout :mod:`hypermem.hierarchy`:

* a **closure** is a list of ``(hyponym, hypernym)`` pairs ("u is a v"), as in Nickel &
  Kiela's data and their reconstruction protocol;
* a **tree** is a list of ``(parent, child)`` edges, one parent per node (the form the
  Sarkar construction needs).  :func:`noun_tree` keeps, for every synset, its deepest
  hypernym inside the hierarchy (listing order breaks ties), so the tree keeps as many
  closure pairs as possible.

The mammal hierarchy ships inside the package (:func:`load_mammals`, built by
``scripts/make_wordnet_data.py``); everything else needs the Debian package
``wordnet-base`` (``/usr/share/wordnet``, or the directory in ``$HYPERMEM_WORDNET``).

Example::

    >>> from hypermem.data.wordnet import load_mammals
    >>> m = load_mammals()
    >>> len(m.nodes), len(m.closure)
    (1180, 6540)
    >>> m.glosses["dog.n.01"][:40]
    'a member of the genus Canis (probably de'
"""

from __future__ import annotations

import gzip
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from .dag import hypernym_closure
from .hierarchy_tasks import EntityHierarchy

DEFAULT_WORDNET_DIR = "/usr/share/wordnet"
MAMMAL = "mammal.n.01"
ROOT = "entity.n.01"
MAMMAL_EXCLUDED = ("female_mammal.n.01", "tusker.n.01")
"""Two non-taxonomic leaves (a sex, a feature) left out of the mammal hierarchy, which
gives the 1,180 synsets and 6,540 pairs of Nickel & Kiela's mammal closure."""

NOUN_LEX_FILES = {
    3: "noun.Tops", 4: "noun.act", 5: "noun.animal", 6: "noun.artifact", 7: "noun.attribute", 8: "noun.body",
    9: "noun.cognition", 10: "noun.communication", 11: "noun.event", 12: "noun.feeling", 13: "noun.food",
    14: "noun.group", 15: "noun.location", 16: "noun.motive", 17: "noun.object", 18: "noun.person",
    19: "noun.phenomenon", 20: "noun.plant", 21: "noun.possession", 22: "noun.process", 23: "noun.quantity",
    24: "noun.relation", 25: "noun.shape", 26: "noun.state", 27: "noun.substance", 28: "noun.time",
}
"""The 26 noun lexicographer files (``lex_filenum`` -> name; WordNet's ``lexnames(5WN)``)."""

_HYPERNYM_POINTERS = ("@", "@i")
_SHIPPED = {
    "closure": "mammals_closure.tsv.gz",
    "tree": "mammals_tree.tsv.gz",
    "glosses": "mammals_glosses.tsv.gz",
}


@dataclass(frozen=True)
class Synset:
    """One noun synset: its NLTK-style name, database offset, lemmas, gloss and the
    names of its direct hypernyms (``@``) and instance hypernyms (``@i``)."""

    name: str
    offset: int
    lemmas: tuple[str, ...]
    gloss: str
    hypernyms: tuple[str, ...]
    instance_hypernyms: tuple[str, ...]
    lex_filenum: int = -1
    """The lexicographer file (``lex_filenum`` of ``data.noun``): 3-28, named in
    :data:`NOUN_LEX_FILES`; ``-1`` when unknown."""

    @property
    def parents(self) -> tuple[str, ...]:
        """Hypernyms followed by instance hypernyms (the edges of the hierarchy)."""
        return self.hypernyms + self.instance_hypernyms


@dataclass
class Hierarchy:
    """A hierarchy of named nodes: the transitive closure, a tree form and glosses.

    ``closure`` holds ``(hyponym, hypernym)`` pairs, ``tree`` holds ``(parent, child)``
    edges, ``glosses`` maps a node to its definition, ``nodes`` lists every node (sorted)
    and ``root`` is the top node.
    """

    name: str
    root: str
    nodes: list[str]
    closure: list[tuple[str, str]]
    tree: list[tuple[str, str]]
    glosses: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"Hierarchy({self.name!r}, root={self.root!r}, nodes={len(self.nodes)}, "
                f"closure={len(self.closure)}, tree={len(self.tree)})")


# -- locating and reading the database ---------------------------------------------------
def wordnet_dir(path: str | os.PathLike | None = None) -> Path:
    """The WordNet database directory: ``path``, else ``$HYPERMEM_WORDNET``, else
    ``/usr/share/wordnet``."""
    return Path(path or os.environ.get("HYPERMEM_WORDNET") or DEFAULT_WORDNET_DIR)


def available(path: str | os.PathLike | None = None) -> bool:
    """True when ``data.noun`` and ``index.noun`` exist in :func:`wordnet_dir`."""
    d = wordnet_dir(path)
    return (d / "data.noun").is_file() and (d / "index.noun").is_file()


def _require(path: str | os.PathLike | None) -> Path:
    d = wordnet_dir(path)
    if not available(d):
        raise FileNotFoundError(
            f"WordNet 3.0 noun files (data.noun, index.noun) not found in {d}; install the Debian "
            "package with `apt-get install -y wordnet-base`, or point $HYPERMEM_WORDNET at a copy. "
            "The mammal hierarchy ships with hypermem: use hypermem.data.wordnet.load_mammals().")
    return d


def _sense_names(index_file: Path) -> dict[int, str]:
    """offset -> ``lemma.n.NN`` for the first lemma of each synset (NLTK's naming)."""
    # index.noun: lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt offsets...
    senses: dict[tuple[str, int], int] = {}
    with open(index_file, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(" "):  # licence header
                continue
            parts = line.split()
            lemma, n_synsets, n_pointers = parts[0], int(parts[2]), int(parts[3])
            offsets = parts[4 + n_pointers + 2:]
            if len(offsets) != n_synsets:
                raise ValueError(f"{index_file}: malformed line for lemma {lemma!r}")
            for i, off in enumerate(offsets):
                senses[(lemma, int(off))] = i + 1
    return senses  # type: ignore[return-value]


@lru_cache(maxsize=4)
def _read_nouns_cached(directory: str) -> dict[str, Synset]:
    d = Path(directory)
    senses = _sense_names(d / "index.noun")
    raw: list[tuple[int, tuple[str, ...], list[int], list[int], str, int]] = []
    with open(d / "data.noun", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith(" "):
                continue
            head, _, gloss = line.partition(" | ")
            parts = head.split()
            offset = int(parts[0])
            n_words = int(parts[3], 16)
            words = tuple(parts[4 + 2 * i] for i in range(n_words))
            k = 4 + 2 * n_words
            n_ptr = int(parts[k])
            hyper: list[int] = []
            inst: list[int] = []
            for j in range(n_ptr):
                sym, off, pos = parts[k + 1 + 4 * j: k + 4 + 4 * j]
                if pos == "n" and sym == "@":
                    hyper.append(int(off))
                elif pos == "n" and sym == "@i":
                    inst.append(int(off))
            raw.append((offset, words, hyper, inst, gloss.strip(), int(parts[1])))
    names: dict[int, str] = {}
    for offset, words, *_ in raw:
        lemma = words[0].lower()
        sense = senses.get((lemma, offset))
        if sense is None:
            raise ValueError(f"synset {offset:08d} ({lemma}) is missing from index.noun")
        names[offset] = f"{lemma}.n.{sense:02d}"
    out: dict[str, Synset] = {}
    for offset, words, hyper, inst, gloss, lex in raw:
        name = names[offset]
        out[name] = Synset(name, offset, words, gloss, tuple(names[o] for o in hyper),
                           tuple(names[o] for o in inst), lex)
    return out


def read_nouns(path: str | os.PathLike | None = None) -> dict[str, Synset]:
    """Every noun synset of the WordNet database, by name (cached per directory)."""
    return _read_nouns_cached(str(_require(path).resolve()))


# -- closure and tree ----------------------------------------------------------------------
def _parents(synsets: Mapping[str, Synset]) -> dict[str, tuple[str, ...]]:
    return {n: s.parents for n, s in synsets.items()}


@lru_cache(maxsize=4)
def _ancestors_cached(directory: str) -> dict[str, frozenset[str]]:
    return {n: frozenset(a) for n, a in noun_ancestors(_read_nouns_cached(directory)).items()}


def noun_ancestors(synsets: Mapping[str, Synset]) -> dict[str, set[str]]:
    """Ancestors of every synset by Nickel & Kiela's rule.

    ``A(s) = H(s) ∪ ⋃_{i ∈ I(s)} ({i} ∪ H(i))`` where ``H`` follows hypernym (``@``)
    pointers transitively and ``I`` follows instance-hypernym (``@i``) pointers
    transitively (instance chains first, then hypernyms; an ``@i`` pointer met after an
    ``@`` step is not followed).  This is the closure of the
    authors' data files: 743,086 pairs over all nouns.
    """
    hyper = hypernym_closure({n: s.hypernyms for n, s in synsets.items()})
    inst = hypernym_closure({n: s.instance_hypernyms for n, s in synsets.items()})
    out: dict[str, set[str]] = {}
    for n in synsets:
        anc = set(hyper[n])
        for i in inst[n]:
            anc.add(i)
            anc |= hyper[i]
        out[n] = anc
    return out


def closure_pairs(ancestors: Mapping[str, Iterable[str]], nodes: Iterable[str] | None = None
                  ) -> list[tuple[str, str]]:
    """``(hyponym, hypernym)`` pairs, sorted, restricted to ``nodes`` when given."""
    keep = None if nodes is None else set(nodes)
    pairs = []
    for u, anc in ancestors.items():
        if keep is not None and u not in keep:
            continue
        for v in anc:
            if keep is None or v in keep:
                pairs.append((u, v))
    pairs.sort()
    return pairs


def subtree_nodes(ancestors: Mapping[str, Iterable[str]], root: str) -> list[str]:
    """``root`` and every node that has ``root`` among its ancestors, sorted."""
    if root not in ancestors:
        raise KeyError(f"unknown synset {root!r}")
    return sorted({root} | {u for u, anc in ancestors.items() if root in anc})


def tree_edges(parents: Mapping[str, Sequence[str]], nodes: Iterable[str], root: str
               ) -> list[tuple[str, str]]:
    """One ``(parent, child)`` edge per node of ``nodes`` except ``root``: the deepest
    parent inside ``nodes`` (depth = longest path from ``root``; listing order breaks
    ties)."""
    keep = set(nodes)
    depth: dict[str, int] = {}
    # longest-path depth by a topological pass restricted to the node set
    anc = hypernym_closure({n: [p for p in parents.get(n, ()) if p in keep] for n in keep})
    for n in sorted(keep, key=lambda m: len(anc[m])):
        ps = [p for p in parents.get(n, ()) if p in keep]
        depth[n] = 0 if not ps else 1 + max(depth[p] for p in ps)
    edges = []
    for n in sorted(keep):
        if n == root:
            continue
        ps = [p for p in parents.get(n, ()) if p in keep]
        if not ps:
            raise ValueError(f"{n!r} has no hypernym inside the hierarchy rooted at {root!r}")
        best = max(ps, key=lambda p: (depth[p], -ps.index(p)))
        edges.append((best, n))
    return edges


def noun_closure(root: str | None = None, path: str | os.PathLike | None = None
                 ) -> list[tuple[str, str]]:
    """Transitive closure of the noun hierarchy as ``(hyponym, hypernym)`` pairs.

    ``root=None`` gives all nouns (743,086 pairs); ``root="mammal.n.01"`` the mammal
    subtree (6,540 pairs; see :data:`MAMMAL_EXCLUDED`).
    """
    return build_hierarchy(root, path, with_glosses=False).closure


def noun_tree(root: str | None = None, path: str | os.PathLike | None = None) -> list[tuple[str, str]]:
    """Tree form of the noun hierarchy, ``(parent, child)`` edges, one parent per node."""
    return build_hierarchy(root, path, with_glosses=False).tree


def glosses(names: Iterable[str] | None = None, path: str | os.PathLike | None = None) -> dict[str, str]:
    """Definitions (glosses, with their example sentences) of noun synsets by name.

    ``names=None`` returns all 82,115.  Unknown names raise ``KeyError``.
    """
    return _synset_field("gloss", names, path)


def _synset_field(attr: str, names: Iterable[str] | None, path: str | os.PathLike | None) -> dict:
    """``{name: getattr(synset, attr)}`` for ``names`` (all nouns for ``None``); ``KeyError``
    naming an unknown synset."""
    synsets = read_nouns(path)
    if names is None:
        return {n: getattr(s, attr) for n, s in synsets.items()}
    out = {}
    for n in names:
        if n not in synsets:
            raise KeyError(f"unknown noun synset {n!r} (names look like 'dog.n.01')")
        out[n] = getattr(synsets[n], attr)
    return out


def build_hierarchy(root: str | None = None, path: str | os.PathLike | None = None,
                    with_glosses: bool = True, exclude: Iterable[str] | None = None) -> Hierarchy:
    """Closure, tree and glosses of the nouns under ``root`` (all nouns when ``None``).

    ``exclude`` drops nodes (and their pairs); it defaults to :data:`MAMMAL_EXCLUDED`
    for ``root="mammal.n.01"`` and to nothing otherwise.
    """
    directory = str(_require(path).resolve())
    synsets = _read_nouns_cached(directory)
    parents = _parents(synsets)
    ancestors = _ancestors_cached(directory)
    top = ROOT if root is None else root
    if top not in synsets:
        raise KeyError(f"unknown noun synset {top!r} (names look like 'mammal.n.01')")
    if exclude is None:
        exclude = MAMMAL_EXCLUDED if top == MAMMAL else ()
    drop = set(exclude)
    if top in drop:
        raise ValueError(f"cannot exclude the root {top!r}")
    nodes = sorted(synsets) if root is None else subtree_nodes(ancestors, top)
    nodes = [n for n in nodes if n not in drop]
    closure = closure_pairs(ancestors, None if (root is None and not drop) else nodes)
    tree = tree_edges(parents, nodes, top)
    g = {n: synsets[n].gloss for n in nodes} if with_glosses else {}
    return Hierarchy(name="nouns" if root is None else top.split(".")[0] + "s", root=top, nodes=nodes,
                     closure=closure, tree=tree, glosses=g)


def definition(gloss: str) -> str:
    """The definition part of a WordNet gloss: the text before its first quoted example
    (``'a member of the genus Canis ...; "the dog barked all night"'`` -> ``'a member of the
    genus Canis ...'``)."""
    return gloss.split('"', 1)[0].strip().rstrip(";").strip()


HIT_TEXTS = ("lemma", "definition")
"""What names an entity of :func:`hit_noun_hierarchy`: its first lemma, or lemma and definition."""


def hit_noun_hierarchy(path: str | os.PathLike | None = None, text: str = "lemma") -> EntityHierarchy:
    """WordNet's noun hierarchy as Hierarchy Transformers build it (He et al., NeurIPS 2024):
    the synsets joined by hypernym (``@``) pointers, instance pointers left out -- 74,401
    entities, 75,850 direct edges and 587,658 transitive pairs -- each entity named by its
    first lemma with underscores as spaces (``dog.n.01`` is ``"dog"``; names repeat across
    senses, as in HiT's data).  ``text="definition"`` names each entity ``"lemma: definition"``
    instead (``"dog: a member of the genus Canis ..."``; :func:`definition`), the kind of text a
    store's memory holds, with the same entities and edges.  Split it into tasks with
    :mod:`hypermem.data.hierarchy_tasks`."""
    if text not in HIT_TEXTS:
        raise ValueError(f"text must be one of {HIT_TEXTS}, got {text!r}")
    synsets = read_nouns(path)
    edges = [(n, p) for n, s in synsets.items() for p in s.hypernyms]
    nodes = {e for pair in edges for e in pair}
    names = {n: synsets[n].lemmas[0].replace("_", " ") for n in sorted(nodes)}
    if text == "definition":
        for n, lemma in names.items():
            d = definition(synsets[n].gloss)
            names[n] = f"{lemma}: {d}" if d else lemma
        return EntityHierarchy(names, edges, name="wordnet-nouns-definitions")
    return EntityHierarchy(names, edges, name="wordnet-nouns")


def hit_noun_aliases(path: str | os.PathLike | None = None) -> dict[str, list[str]]:
    """The other lemmas of each entity of :func:`hit_noun_hierarchy` (underscores as spaces,
    the first lemma and repeats left out; entities with one lemma absent): ``dog.n.01`` ->
    ``["domestic dog", "Canis familiaris"]``.  Training variants of the entities' texts
    (``fit_hierarchy_encoder(..., aliases=)``), not part of HiT's datasets."""
    synsets = read_nouns(path)
    nodes = {e for n, s in synsets.items() for p in s.hypernyms for e in (n, p)}   # hit_noun_hierarchy's entities
    out: dict[str, list[str]] = {}
    for n in sorted(nodes):
        lemmas = synsets[n].lemmas
        first = lemmas[0].replace("_", " ")
        other = [w for w in dict.fromkeys(x.replace("_", " ") for x in lemmas[1:]) if w != first]
        if other:
            out[n] = other
    return out


def lex_classes(names: Iterable[str] | None = None, path: str | os.PathLike | None = None) -> dict[str, int]:
    """The lexicographer file number (3-28, see :data:`NOUN_LEX_FILES`) of noun synsets by
    name (``names=None``: all 82,115).  Unknown names raise ``KeyError``."""
    return _synset_field("lex_filenum", names, path)


def sampled_hierarchy(n_sample: int, seed: int = 0, path: str | os.PathLike | None = None) -> Hierarchy:
    """``n_sample`` noun synsets drawn at random (``random.Random(seed)``) from all nouns,
    with every ancestor of each (so the hierarchy stays whole, rooted at ``entity.n.01``):
    closure, tree and glosses of those nodes, as :func:`build_hierarchy` gives for a subtree."""
    directory = str(_require(path).resolve())
    synsets = _read_nouns_cached(directory)
    ancestors = _ancestors_cached(directory)
    if isinstance(n_sample, bool) or not isinstance(n_sample, int) or not 1 <= n_sample <= len(synsets):
        raise ValueError(f"n_sample must be an integer in [1, {len(synsets)}], got {n_sample!r}")
    keep = set(random.Random(seed).sample(sorted(synsets), n_sample)) | {ROOT}
    for n in list(keep):
        keep |= ancestors[n]
    nodes = sorted(keep)
    return Hierarchy(name=f"nouns-sample{n_sample}-{seed}", root=ROOT, nodes=nodes,
                     closure=closure_pairs(ancestors, nodes), tree=tree_edges(_parents(synsets), nodes, ROOT),
                     glosses={n: synsets[n].gloss for n in nodes})


def load_nouns(path: str | os.PathLike | None = None) -> Hierarchy:
    """All WordNet nouns (needs ``wordnet-base``): 82,115 nodes, 743,086 closure pairs."""
    return build_hierarchy(None, path)


# -- shipped mammal data -----------------------------------------------------------------
def _read_tsv_gz(file) -> list[list[str]]:
    with gzip.open(file, "rt", encoding="utf-8") as fh:
        return [line.rstrip("\n").split("\t") for line in fh if line.strip()]


def write_tsv_gz(path: str | os.PathLike, rows: Iterable[Sequence[str]]) -> None:
    """Write rows as a gzipped TSV (tabs and newlines inside fields become spaces).

    The gzip header carries no timestamp, so the file is byte-for-byte reproducible."""
    text = "".join("\t".join(str(f).replace("\t", " ").replace("\n", " ") for f in row) + "\n"
                   for row in rows)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fh:
        fh.write(text.encode("utf-8"))


@lru_cache(maxsize=1)
def _load_mammals_cached() -> Hierarchy:
    pkg = resources.files("hypermem.data")
    closure = [(a, b) for a, b in _read_tsv_gz(pkg / _SHIPPED["closure"])]
    tree = [(a, b) for a, b in _read_tsv_gz(pkg / _SHIPPED["tree"])]
    gl = {row[0]: (row[1] if len(row) > 1 else "") for row in _read_tsv_gz(pkg / _SHIPPED["glosses"])}
    nodes = sorted({n for pair in closure for n in pair})
    return Hierarchy(name="mammals", root=MAMMAL, nodes=nodes, closure=closure, tree=tree, glosses=gl)


def load_mammals() -> Hierarchy:
    """The mammal.n.01 hierarchy shipped with hypermem (no system package needed):
    1,180 synsets, 6,540 closure pairs, a 1,179-edge tree and the glosses.

    Returns a fresh copy each call (the cached lists are not shared)."""
    h = _load_mammals_cached()
    return Hierarchy(h.name, h.root, list(h.nodes), list(h.closure), list(h.tree), dict(h.glosses))


def shipped_files() -> dict[str, str]:
    """Names of the data files inside :mod:`hypermem.data` (key -> file name)."""
    return dict(_SHIPPED)
