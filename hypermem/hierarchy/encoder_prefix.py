r"""Frozen lower layers computed once: training only a hierarchy encoder's upper layers.

A BERT-style encoder of ``L`` layers maps a text's token ids to hidden states

    h_0 = E(ids)                     (token, position and type embeddings)
    h_l = T_l(h_{l-1}, mask)         (l = 1 .. L, self-attention over the text's own tokens)

and the sentence point is the masked mean of ``h_L`` (mean pooling).  With ``E`` and
``T_1 .. T_k`` frozen, an entity's ``h_k`` depends on its own tokens and nothing that trains,
so it is a constant of the run: :class:`FrozenPrefix` computes it once for every entity (in
eval mode: no dropout in the frozen part) and keeps it as one flat ``(tokens, hidden)``
tensor with each entity's offset.  A training step then runs ``T_{k+1} .. T_L`` on the
cached ``h_k`` of the batch's entities, padded per chunk, and pools: about ``(L - k) / L``
of the transformer's forward and backward work, and no gradient kept for the frozen part.

Fine-tuning only the upper layers of a pre-trained transformer keeps most of full
fine-tuning's quality (Lee, Tang & Lin, "What Would Elsa Do? Freezing Layers During
Transformer Fine-Tuning", arXiv 1911.03090, 2019); whether it does for a hierarchy encoder
at a fixed CPU budget is measured in benchmarks/RESULTS.md.  The trained model is the whole
model: at inference nothing is cached and :meth:`HierarchyEncoder.encode
<hypermem.embed.HierarchyEncoder.encode>` runs every layer (the frozen ones unchanged), so
the points a step trains on are the points the encoder gives at inference (dropout apart).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .encoder_step import length_chunks
from .progress import progress_bar, show_progress

__all__ = ["FrozenPrefix", "freeze_lower_layers", "freeze_unused", "resolve_frozen_layers", "transformer_layers"]


def _transformer(encoder):
    return encoder.model[0].auto_model


def transformer_layers(encoder) -> int:
    """The number of transformer layers of ``encoder``'s base (6 for all-MiniLM-L6-v2); raises
    ``ValueError`` for a base that is not BERT-style (``embeddings`` and ``encoder.layer``)."""
    model = _transformer(encoder)
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if getattr(model, "embeddings", None) is None or layers is None:
        raise ValueError(f"frozen_layers needs a BERT-style base (embeddings and encoder.layer); "
                         f"{type(model).__name__} has none")
    return len(layers)


DEFAULT_TRAINED = 2
"""The top layers that train by default (``frozen_layers=None``), chosen on validation: one
trained layer stops improving on WordNet's mixed-hop task within the 2-hour CPU budget, two
keep learning (and raise the sibling-negative F1 most); on a short budget on another hierarchy
two layers rank parents as well as one (benchmarks/RESULTS.md, "two trained layers over the
whole budget")."""


def freeze_unused(encoder) -> None:
    """Stop the gradient of the parameters no point depends on: the base's pooler
    (``auto_model.pooler``, BERT's dense layer over the first token), which sentence-transformers'
    pooling module never reads (it pools the token embeddings).  Such a parameter gets no
    gradient, so AdamW leaves it unchanged either way; frozen, it is not handed to the optimizer
    and DDP does not wait for its gradient ("parameters that were not used in producing the loss")."""
    pooler = getattr(getattr(encoder.model[0], "auto_model", None), "pooler", None)
    if isinstance(pooler, torch.nn.Module):
        for p in pooler.parameters():
            p.requires_grad_(False)


def resolve_frozen_layers(encoder, setting: int | None) -> int:
    """The layer count a ``frozen_layers`` setting means for ``encoder``: ``None`` (the default)
    freezes every layer but the last two of a BERT-style base (4 of all-MiniLM-L6-v2's 6; a
    base of two layers or fewer trains them all) and none of any other base; an integer is
    taken as it is (0: every layer trains; checked by :func:`freeze_lower_layers` when
    positive).  Whatever the setting, the parameters no point depends on are frozen
    (:func:`freeze_unused`): both trainers call this before building their optimizer."""
    freeze_unused(encoder)
    if setting is None:
        try:
            return max(transformer_layers(encoder) - DEFAULT_TRAINED, 0)
        except ValueError:
            return 0
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 0:
        raise ValueError(f"frozen_layers must be None or an integer >= 0, got {setting!r}")
    return setting


def freeze_lower_layers(encoder, layers: int) -> None:
    """Stop the gradient of ``encoder``'s embeddings and its lowest ``layers`` transformer
    layers (``requires_grad = False``): an optimizer built afterwards over the parameters that
    require a gradient trains the rest.  ``layers`` is 1 .. the base's layer count less one
    (at least one layer trains)."""
    total = transformer_layers(encoder)
    if isinstance(layers, bool) or not isinstance(layers, int) or not 1 <= layers < total:
        raise ValueError(f"frozen_layers must be an integer from 0 to {total - 1} (the base has {total} "
                         f"layers; at least one trains), got {layers!r}")
    model = _transformer(encoder)
    for module in (model.embeddings, *model.encoder.layer[:layers]):
        for p in module.parameters():
            p.requires_grad_(False)


def _bidirectional_mask(model, hidden: torch.Tensor, mask: torch.Tensor):
    """The attention mask ``model``'s own forward would pass its layers (its attention
    implementation's form), from a ``(batch, tokens)`` 0/1 mask."""
    try:
        from transformers.masking_utils import create_bidirectional_mask
    except ImportError:  # pragma: no cover - transformers < 4.56: the additive 4-D mask
        return (1.0 - mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
    return create_bidirectional_mask(config=model.config, inputs_embeds=hidden, attention_mask=mask)


def _run(layers, hidden: torch.Tensor, attention) -> torch.Tensor:
    for layer in layers:
        out = layer(hidden, attention)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


class FrozenPrefix:
    """Every entity's hidden states after the frozen embeddings and lowest ``layers`` layers
    of ``encoder`` (module docstring), from the token ids of ``tokens``
    (:class:`~hypermem.hierarchy.encoder_step.TokenCache`).  :meth:`points` is the training
    step's encoding of a batch's rows, as ``TokenCache.points`` is without a frozen prefix.

    Memory: 4 bytes x hidden size per token (WordNet's 74,401 nouns, ~6 tokens each with
    the special ones, 384 wide: about 0.7 GB)."""

    def __init__(self, encoder, tokens, layers: int, *, chunk: int = 256, progress: bool | None = None) -> None:
        freeze_lower_layers(encoder, layers)
        self.layers = int(layers)
        model = _transformer(encoder)
        lengths = [len(s) for s in tokens.ids]
        self.lengths = torch.tensor(lengths, dtype=torch.long)
        self.offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
        torch.cumsum(self.lengths, 0, out=self.offsets[1:])
        dev = encoder.device
        hidden_size = int(model.config.hidden_size)
        self.states = torch.empty(int(self.offsets[-1]), hidden_size, dtype=torch.float32, device=dev)
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        bar = progress_bar(len(order), f"caching {layers} frozen layers", "text",
                           show_progress(progress) and len(order) > chunk)
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                for s in range(0, len(order), chunk):
                    rows = order[s:s + chunk]
                    feats = tokens.features(rows, dev)
                    kwargs = {"token_type_ids": feats["token_type_ids"]} if "token_type_ids" in feats else {}
                    hidden = model.embeddings(input_ids=feats["input_ids"], **kwargs)
                    hidden = _run(model.encoder.layer[:layers], hidden,
                                  _bidirectional_mask(model, hidden, feats["attention_mask"]))
                    for i, r in enumerate(rows):
                        a, b = int(self.offsets[r]), int(self.offsets[r + 1])
                        self.states[a:b] = hidden[i, : b - a].float()
                    if bar is not None:
                        bar.update(len(rows))
        finally:
            model.train(was)
            if bar is not None:
                bar.close()

    def __len__(self) -> int:
        return len(self.lengths)

    def __repr__(self) -> str:
        return (f"FrozenPrefix(entities={len(self)}, layers={self.layers}, tokens={self.states.shape[0]}, "
                f"bytes={self.states.numel() * self.states.element_size():,})")

    def _padded(self, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The cached states of ``rows`` padded to the longest: ``(b, w, hidden)`` and the
        ``(b, w)`` 0/1 mask."""
        r = torch.as_tensor(list(rows), dtype=torch.long)
        lengths = self.lengths[r]
        width = int(lengths.max())
        pos = torch.arange(width)
        mask = pos[None, :] < lengths[:, None]
        index = torch.where(mask, self.offsets[r][:, None] + pos[None, :], 0)
        dev = self.states.device
        hidden = self.states[index.to(dev)] * mask.to(dev)[..., None]
        return hidden, mask.long()

    def points(self, encoder, rows: Sequence[int], chunk: int = 64) -> torch.Tensor:
        """Points of the entities ``rows`` with gradients through the trained upper layers, in
        the order given (:func:`~hypermem.hierarchy.encoder_step.length_chunks`, as
        ``TokenCache.points``); pooled by the encoder's own pooling module (and its head)."""
        model = _transformer(encoder)
        upper, after = model.encoder.layer[self.layers:], list(encoder.model)[1:]  # pooling, a head

        def encode_chunk(part: list[int]) -> torch.Tensor:
            hidden, mask = self._padded(part)
            hidden, mask = hidden.to(encoder.device), mask.to(encoder.device)   # a cache built before a move
            features = {"token_embeddings": _run(upper, hidden, _bidirectional_mask(model, hidden, mask)),
                        "attention_mask": mask}
            for module in after:
                features = module(features)
            return encoder.to_manifold(features["sentence_embedding"])

        return length_chunks(rows, lambda r: int(self.lengths[r]), encode_chunk, chunk)
