r"""One training step of a hierarchy encoder, shared by :func:`fit_hierarchy_encoder` and the
Lightning module (:mod:`hypermem.train.encoder_module`).

* :class:`TokenCache` tokenises every entity's text once (truncated to ``max_length``
  tokens, no padding) and pads a batch's rows on demand: no tokenizer call in the loop;
* :func:`batch_losses` encodes a batch's distinct entities once, maps them to the
  encoder's space and returns the losses of :mod:`hypermem.hierarchy.encoder_losses`;
* :func:`step_seed` makes dropout a function of ``(seed, step)``: a resumed run draws the
  same masks as an uninterrupted one;
* :func:`lr_factor` is the schedule: linear warm-up over the first ``warmup`` fraction of
  the run, then linear decay to 0, where the fraction is of the steps planned or of the
  time budget, whichever is further along;
* :class:`TimeBudget` decides whether one more step fits in ``max_minutes``: the step, then
  everything that runs after the last one (the final validation, the ranking ``lambda``'s
  choice, the save), each encoding's time modelled by :class:`EncodeCost`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .encoder_batches import EncoderBatch
from .encoder_losses import LossWeights, encoder_losses

__all__ = ["TokenCache", "encode_rows", "length_chunks", "batch_losses", "step_seed", "lr_factor", "EncodeCost", "TimeBudget",
           "TAIL_MARGIN", "TAIL_ALLOWANCE"]

TAIL_MARGIN = 1.15
"""The predicted encodings after the last step are reserved this many times over (timings of
one validation vary by 10-30% on a shared machine)."""
TAIL_ALLOWANCE = 2.0
"""Seconds reserved besides the encodings after the last step: the ranking's scoring (one
distance matrix of at most 500 x 5,000 pairs) and the save (0.3 s for all-MiniLM-L6-v2)."""


class TokenCache:
    """Token ids of ``texts`` under ``tokenizer``, padded per batch by :meth:`features`."""

    def __init__(self, tokenizer, texts: Sequence[str], max_length: int, chunk: int = 8192) -> None:
        self.ids: list[list[int]] = []
        for s in range(0, len(texts), chunk):
            enc = tokenizer(list(texts[s:s + chunk]), truncation=True, max_length=int(max_length), padding=False)
            self.ids.extend(enc["input_ids"])
        self.pad = int(tokenizer.pad_token_id or 0)
        self.uses_token_types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())

    def features(self, rows: Sequence[int], device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
        seqs = [self.ids[r] for r in rows]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
            mask[i, : len(s)] = 1
        out = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
        if self.uses_token_types:
            out["token_type_ids"] = torch.zeros_like(out["input_ids"])
        return out

    def points(self, encoder, rows: Sequence[int]) -> torch.Tensor:
        """Points of the entities ``rows`` with gradients (:func:`encode_rows`); a
        :class:`~hypermem.hierarchy.encoder_prefix.FrozenPrefix` answers the same call from
        its cached lower layers."""
        return encode_rows(encoder, self, rows)


def length_chunks(rows: Sequence[int], length, encode_chunk, chunk: int = 64) -> torch.Tensor:
    """``encode_chunk(chunk_rows)`` over ``rows`` sorted by token count (``length(row)``) in
    chunks of ``chunk``, the points put back in the order given.  Each chunk is padded to
    its own longest text: short names (WordNet's average 6 tokens with the special ones) are
    not padded to the batch's longest, which would about double the transformer's work."""
    order = sorted(range(len(rows)), key=lambda i: length(rows[i]))
    points = torch.cat([encode_chunk([rows[i] for i in order[s:s + chunk]]) for s in range(0, len(order), chunk)])
    inverse = torch.empty(len(order), dtype=torch.long)
    inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
    return points[inverse.to(points.device)]


def encode_rows(encoder, tokens: TokenCache, rows: Sequence[int], chunk: int = 64) -> torch.Tensor:
    """Points of the entities ``rows`` with gradients, in the order given (every layer, in
    :func:`length_chunks`)."""
    dev = encoder.device
    return length_chunks(rows, lambda r: len(tokens.ids[r]),
                         lambda part: encoder.forward_features(tokens.features(part, dev)), chunk)


def batch_losses(encoder, tokens, batch: EncoderBatch, weights: LossWeights) -> dict[str, torch.Tensor]:
    """Encode ``batch.entities`` once (``tokens.points``: a :class:`TokenCache`, or a
    :class:`~hypermem.hierarchy.encoder_prefix.FrozenPrefix` that runs only the trained upper
    layers) and return the loss terms and their sum ``"loss"``."""
    dev = encoder.device
    points = tokens.points(encoder, batch.entities)
    return encoder_losses(points, batch.child.to(dev), batch.parent.to(dev), batch.negatives.to(dev),
                          batch.candidates.to(dev) if weights.contrastive > 0 else None, encoder.curvature, weights,
                          batch.levels.to(dev) if weights.depth > 0 and batch.levels is not None else None)


def step_seed(seed: int, step: int) -> int:
    """The torch seed of optimizer step ``step`` (dropout masks)."""
    return (int(seed) * 1_000_003 + int(step)) % (2**63 - 1)


def lr_factor(progress: float, warmup: float) -> float:
    """Learning-rate multiplier at ``progress`` in [0, 1]: warm-up to 1, then linear to 0."""
    p = min(max(progress, 0.0), 1.0)
    if warmup > 0 and p < warmup:
        return max(p / warmup, 1e-3)
    return max(0.0, (1.0 - p) / max(1e-9, 1.0 - warmup))


@dataclass(frozen=True)
class EncodeCost:
    r"""Seconds of a validation that encodes ``n`` distinct texts: ``fixed + per_text * n``.

    A validation's cost is its encoding's (the scoring of its pairs is about 1% of it), and it
    encodes the distinct entities of its pairs, which grow slower than the pairs (on a
    2,938-entity tree, 64 positives with their 20 negatives each touch 1,039 texts, 142 touch
    1,798): timed on a sample and scaled by the pairs, a validation was predicted twice too
    long."""

    fixed: float
    per_text: float

    def seconds(self, texts: int) -> float:
        return self.fixed + self.per_text * max(0, int(texts))

    @classmethod
    def fit(cls, timings: Sequence[tuple[int, float]]) -> EncodeCost:
        """The line through ``(texts, seconds)`` timings: through the slowest timing of the
        fewest texts and the slowest of the most; one size gives ``fixed = 0`` (seconds per text);
        a line that falls (noise) gives ``per_text = 0`` and ``fixed`` the slowest timing."""
        if not timings:
            raise ValueError("no timing to fit an encoding cost to")
        lo, hi = min(n for n, _ in timings), max(n for n, _ in timings)
        t_lo = max(t for n, t in timings if n == lo)
        t_hi = max(t for n, t in timings if n == hi)
        if hi == lo:
            return cls(0.0, t_hi / max(1, hi))
        slope = (t_hi - t_lo) / (hi - lo)
        if slope <= 0:
            return cls(max(t_lo, t_hi), 0.0)
        return cls(max(0.0, t_lo - slope * lo), slope)


class TimeBudget:
    r"""Whether one more training step fits in ``seconds`` (``max_minutes``): it fits when

    ``elapsed + step_time + margin * (V + R) + allowance <= seconds``,

    ``V`` the final validation's seconds (the slowest one timed at its size ``val_texts``, or
    :class:`EncodeCost` fitted to the timings so far at that size), ``R`` the ranking ``lambda``'s
    encoding of the ``rank_texts`` texts that the validation did not encode (0 when none), the
    margin :data:`TAIL_MARGIN` and the allowance :data:`TAIL_ALLOWANCE` (the ranking's scoring and
    the save).  :meth:`observe` adds a timing: the samples timed at the start, then each
    validation of the run."""

    def __init__(self, seconds: float, val_texts: int, rank_texts: int, *, margin: float = TAIL_MARGIN,
                 allowance: float = TAIL_ALLOWANCE) -> None:
        self.seconds, self.val_texts, self.rank_texts = float(seconds), int(val_texts), int(rank_texts)
        self.margin, self.allowance = float(margin), float(allowance)
        self.timings: list[tuple[int, float]] = []

    def observe(self, texts: int, seconds: float) -> None:
        self.timings.append((int(texts), float(seconds)))

    def tail(self) -> float:
        """Seconds reserved after the last step (the allowance alone before any timing)."""
        if not self.timings:
            return self.allowance
        cost = EncodeCost.fit(self.timings)
        seen = [t for n, t in self.timings if n == self.val_texts]
        val = max(seen) if seen else cost.seconds(self.val_texts)
        rank = cost.seconds(self.rank_texts) if self.rank_texts else 0.0
        return self.margin * (val + rank) + self.allowance

    def fits(self, elapsed: float, step_time: float) -> bool:
        """Whether a step of ``step_time`` seconds started at ``elapsed`` leaves the tail its time."""
        return elapsed + step_time + self.tail() <= self.seconds
