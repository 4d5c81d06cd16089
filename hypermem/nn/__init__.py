"""Differentiable memory layers in the Poincaré ball (layer 3): models backprop through them.

* :class:`HyperbolicMemory` — keys on the ball (a geoopt ``ManifoldParameter``), values,
  full and exact top-k reads with gradients to queries, keys, values and temperature;
  built from and turned back into a :class:`hypermem.store.Memory`;
* :class:`ParentVote` — a hierarchy-aware readout: a slot scored as an answer from its
  own key and its children's keys;
* :class:`BallEncoder` — a learnable map from Euclidean features into the ball;
* :class:`HyperbolicRAG` — a retrieval model of the three: encoder, memory with trainable
  keys started at a store's placement, parent-vote readout (:mod:`~hypermem.nn.rag_model`);
* :class:`HyperbolicMemoryConfig`, :class:`BallEncoderConfig` — the layers' options as
  config objects a YAML file builds (``class_path``/``init_args``; :mod:`~hypermem.nn.config`);
* :func:`make_ball` — a ball with a fixed (buffer) or learnable curvature, shareable
  between layers (:mod:`~hypermem.nn.curvature`);
* :func:`clip_grad_norm_` — ``torch.nn.utils.clip_grad_norm_`` that also takes the sparse
  gradients of ``sparse_grad=True`` layers (:mod:`~hypermem.nn.grad_clip`);
* :mod:`~hypermem.nn.losses` — hyperbolic InfoNCE (over points or memory slots), the
  Nickel & Kiela ranking loss, the entailment-cone loss.
"""

from .config import BallEncoderConfig, HyperbolicMemoryConfig
from .curvature import make_ball
from .encoder import BallEncoder
from .grad_clip import clip_grad_norm_
from .hyperbolic_memory import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    HyperbolicMemory,
    Readout,
    all_distance,
    gathered_distance,
)
from .latent_reader import CosineKeys, LatentRetrievalReader, PairReader
from .losses import entailment_cone_loss, hyperbolic_info_nce, memory_info_nce, poincare_ranking_loss
from .rag_model import HyperbolicRAG
from .readout import ParentVote

__all__ = [
    "HyperbolicMemory",
    "HyperbolicMemoryConfig",
    "BallEncoderConfig",
    "make_ball",
    "MIN_TEMPERATURE",
    "MAX_TEMPERATURE",
    "Readout",
    "BallEncoder",
    "ParentVote",
    "HyperbolicRAG",
    "LatentRetrievalReader",
    "PairReader",
    "CosineKeys",
    "gathered_distance",
    "all_distance",
    "hyperbolic_info_nce",
    "memory_info_nce",
    "poincare_ranking_loss",
    "entailment_cone_loss",
    "clip_grad_norm_",
]
