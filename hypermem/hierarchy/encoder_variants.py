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

The draw uses torch's generator, which the trainers seed per step
(:func:`~hypermem.hierarchy.encoder_step.step_seed`), so a resumed run draws the same texts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

__all__ = ["TextVariants", "variant_texts", "check_aliases", "check_alias_rate"]


def check_alias_rate(rate) -> float:
    """``alias_rate`` checked: a number in [0, 1]."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= float(rate) <= 1.0:
        raise ValueError(f"alias_rate must be a number between 0 and 1, got {rate!r}")
    return float(rate)


def check_aliases(aliases, names: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """``aliases`` (a mapping ``id -> sequence of texts``) with ids as text (``str(id)``), each
    id one of ``names``, each alias a non-blank string; aliases equal to the entity's name and
    repeats are dropped.  Raises ``TypeError`` / ``ValueError`` naming the first bad item."""
    if not isinstance(aliases, Mapping):
        raise TypeError(f"aliases must be a mapping id -> list of texts, got {type(aliases).__name__}")
    out: dict[str, tuple[str, ...]] = {}
    for key, texts in aliases.items():
        k = str(key.item() if getattr(key, "ndim", None) == 0 and hasattr(key, "item") else key)
        if k not in names:
            raise ValueError(f"aliases names the id {key!r}, which has no name in names")
        if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
            raise TypeError(f"aliases[{key!r}] must be a list of texts, got {type(texts).__name__} {texts!r}")
        kept: list[str] = []
        for t in texts:
            if not isinstance(t, str) or not t.strip():
                raise ValueError(f"aliases[{key!r}] holds {t!r}: each alias must be a non-empty string")
            if t != names[k] and t not in kept:
                kept.append(t)
        if kept:
            out[k] = tuple(dict.fromkeys((*out.get(k, ()), *kept)))
    return out


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
