r"""An entity's other names as training variants of its text: aliases.

A hierarchy often names an entity more than one way: WordNet's synsets hold several lemmas
(``dog.n.01``: "dog", "domestic dog", "Canis familiaris"), a clinical terminology lists
synonyms, a product tree holds alternative titles.  The entity keeps one name -- the text that
validation, the saved encoder and every user call read -- and the others can train the
encoder's map from text to place: at each step an entity of the batch that has aliases is
shown by one of them, drawn uniformly, with probability ``rate``, and by its name otherwise.
The loss terms do not change; an entity's point in a step is the point of the text drawn.

Why it may help a text the encoder has never seen: trained on one text an entity, the upper
layers can place a known name by memorising it; several texts for one place ask them to place
by what the texts share (the idea of synonym substitution as data augmentation, Wei & Zou,
"EDA", EMNLP 2019, here with the hierarchy's own synonyms).  Whether it does is measured in
benchmarks/RESULTS.md ("aliases as training variants").

The draw uses torch's generator, which the trainer seeds per step
(:func:`~hypermem.hierarchy.encoder_step.step_seed`), so a run with the same seed draws the same texts.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import torch

from .encoder_inputs import checked_fraction

__all__ = ["TextVariants", "variant_texts", "check_aliases", "check_alias_rate", "distinct_aliases"]


def check_alias_rate(rate) -> float:
    """``alias_rate`` checked: a real number in [0, 1] (a NumPy or 0-d torch scalar too)."""
    return checked_fraction(rate, f"alias_rate must be a number between 0 and 1, got {rate!r}")


def _text_key(text: str) -> str:
    """A text as the comparison of aliases and names sees it: spaces collapsed, case folded
    (the uncased tokenisers of MiniLM-style bases read ``"Dog "`` as ``"dog"``)."""
    return " ".join(text.split()).casefold()


def _short(value, n: int = 3) -> str:
    items = list(value)[:n] if not isinstance(value, (str, bytes)) and hasattr(value, "__iter__") else None
    return f"{type(value).__name__} {items!r}..." if items is not None else f"{type(value).__name__} {value!r}"[:120]


def check_aliases(aliases, names: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """``aliases`` (a mapping ``id -> texts``, any ordered iterable of strings: a list, a tuple,
    a NumPy or pandas array; a pandas Series of lists too) with ids as text (``str(id)``), each
    id one of ``names``, each alias a non-blank string; an alias equal to its own entity's name
    (spaces collapsed, case folded) or repeated is dropped (:func:`distinct_aliases` drops the
    ones that name other entities).  Raises ``TypeError`` / ``ValueError`` naming the first bad
    item."""
    if not isinstance(aliases, Mapping):
        if not hasattr(aliases, "items") or isinstance(aliases, type):
            raise TypeError(f"aliases must be a mapping id -> list of texts, got {type(aliases).__name__}")
        aliases = dict(aliases.items())   # a pandas Series of lists
    raw: dict[str, list[str]] = {}
    keys: dict[str, object] = {}
    for key, texts in aliases.items():
        k = str(key.item() if getattr(key, "ndim", None) == 0 and hasattr(key, "item") else key)
        if k in keys:
            raise ValueError(f"aliases has two keys for the id {k!r}: {keys[k]!r} and {key!r} (ids are compared "
                             "as text, str(id))")
        keys[k] = key
        if k not in names:
            raise ValueError(f"aliases names the id {key!r}, which has no name in names")
        if isinstance(texts, (set, frozenset)):
            raise TypeError(f"aliases[{key!r}] is a {type(texts).__name__}, which has no order (a run draws "
                            "aliases by position): pass sorted(...) or a list")
        if isinstance(texts, (str, bytes, Mapping)) or not hasattr(texts, "__iter__"):
            raise TypeError(f"aliases[{key!r}] must be a list of texts, got {_short(texts)}")
        kept: list[str] = []
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"aliases[{key!r}] holds {_short(t)}: each alias must be a string")
            if not t.strip():
                raise ValueError(f"aliases[{key!r}] holds {t!r}: each alias must be a non-empty string")
            if _text_key(t) != _text_key(names[k]) and t not in kept:
                kept.append(t)
        if kept:
            raw[k] = kept
    return {e: tuple(texts) for e, texts in raw.items()}


def distinct_aliases(aliases: Mapping[str, Sequence[str]], names: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """``aliases`` of the entities of ``names`` (those a run trains on) less every alias that is
    another of those entities' name or an alias of several of them (compared with spaces
    collapsed and case folded): one text trained towards two places moves the point a name's
    text gets.  A ``UserWarning`` gives their counts and examples."""
    raw = {e: tuple(a) for e, a in aliases.items() if e in names}
    name_of = {_text_key(text) for text in names.values()}
    owners: dict[str, set[str]] = {}
    for e, texts in raw.items():
        for t in texts:
            owners.setdefault(_text_key(t), set()).add(e)
    named = [(e, t) for e, texts in raw.items() for t in texts if _text_key(t) in name_of]
    shared = [(e, t) for e, texts in raw.items() for t in texts
              if _text_key(t) not in name_of and len(owners[_text_key(t)]) > 1]
    if named or shared:
        warnings.warn(f"aliases: {len(named)} alias(es) that are another entity's name (e.g. {named[:2]}) and "
                      f"{len(shared)} that several entities share (e.g. {shared[:2]}) are left out: one text "
                      "trained towards two places moves the point of a name", UserWarning, stacklevel=3)
    drop = set(named) | set(shared)
    out = {e: tuple(t for t in texts if (e, t) not in drop) for e, texts in raw.items()}
    return {e: texts for e, texts in out.items() if texts}


def variant_texts(ids: Sequence[str], names: Mapping[str, str], aliases: Mapping[str, Sequence[str]]
                  ) -> tuple[list[str], list[list[int]]]:
    """The texts to tokenise -- every entity's name in ``ids`` order, then the aliases -- and,
    per entity, the rows of its aliases in that list (empty when it has none)."""
    texts = [names[e] for e in ids]
    rows: list[list[int]] = []
    for e in ids:
        extra = list(aliases.get(e, ()))
        rows.append(list(range(len(texts), len(texts) + len(extra))))
        texts.extend(extra)
    return texts, rows


class TextVariants:
    """``tokens`` (a :class:`~hypermem.hierarchy.encoder_step.TokenCache` or
    :class:`~hypermem.hierarchy.encoder_prefix.FrozenPrefix` over :func:`variant_texts`' list)
    answering ``points(encoder, entities)`` with each entity shown by a drawn text: one of its
    alias rows with probability ``rate`` when it has any, else its own row."""

    def __init__(self, tokens, alias_rows: Sequence[Sequence[int]], rate: float) -> None:
        self.tokens = tokens
        self.alias_rows = [list(r) for r in alias_rows]
        self.rate = check_alias_rate(rate)
        self.with_aliases = sum(1 for r in self.alias_rows if r)

    def __repr__(self) -> str:
        return (f"TextVariants({self.with_aliases} of {len(self.alias_rows)} entities with aliases, "
                f"rate={self.rate:g})")

    def rows(self, entities: Sequence[int]) -> list[int]:
        """The text row of each entity for this step (torch's generator draws)."""
        entities = [int(e) for e in entities]
        draw = torch.rand(len(entities)).tolist()
        pick = torch.rand(len(entities)).tolist()
        out = []
        for e, u, v in zip(entities, draw, pick):
            alias = self.alias_rows[e]
            out.append(alias[min(int(v * len(alias)), len(alias) - 1)] if alias and u < self.rate else e)
        return out

    def points(self, encoder, entities: Sequence[int]) -> torch.Tensor:
        """Points of ``entities``, each by its drawn text, with gradients."""
        return self.tokens.points(encoder, self.rows(entities))
