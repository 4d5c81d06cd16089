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
  time budget, whichever is further along.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .encoder_batches import EncoderBatch
from .encoder_losses import LossWeights, encoder_losses

__all__ = ["TokenCache", "encode_rows", "length_chunks", "batch_losses", "step_seed", "lr_factor"]


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
