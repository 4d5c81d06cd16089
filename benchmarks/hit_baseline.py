"""HiT trained by its own package (``hierarchy-transformers`` 0.1.1) on a task's training
edges, for a budget of CPU seconds: the "HiT at the same budget" system of
``bench_encoder.py --system hit``.

What the package's ``HierarchyTransformerTrainer`` would do per batch, reproduced because that
trainer fails on sentence-transformers 6 (its ``compute_loss`` override) and the plain
``SentenceTransformerTrainer`` sums the loss dictionary that ``HierarchyTransformerLoss``
returns (``loss`` + its two parts: twice the loss):

* data: HiT's triplets ``(child, parent, negative)``, ten per positive edge, every text of
  every triplet encoded by HiT's model (``HierarchyTransformer``: all-MiniLM-L6-v2, mean
  pooling, the Poincare ball of curvature ``1/d``); the negatives are drawn as hypermem's
  trainer draws them (5 siblings-first hard + 5 random non-ancestors per positive, by
  :class:`hypermem.data.hierarchy_tasks.NegativeSampler`);
* loss: ``HierarchyTransformerLoss`` with its defaults (clustering margin 5.0, centripetal
  0.5, weights 1 and 1): the ``"loss"`` entry alone is back-propagated;
* optimiser: AdamW at HiT's learning rate 1e-5 (weight decay 0.01), batches of 256 triplets
  (HiT's setting), linear warm-up over the first 5% of the budget then linear decay (HiT
  warms up over 500 steps of a 20-epoch run; under a budget of a few hundred steps the same
  fraction as hypermem's schedule is used);
* validation: :func:`hypermem.hierarchy.encoder_training.validate_encoder` on the same
  validation sample as hypermem's trainer, four times over the budget (its CPU counted in the
  budget, as in hypermem's runs); the best weights by validation F1 are kept, with the
  ``lambda`` and threshold chosen there.

The returned :class:`~hypermem.embed.hierarchy_encoder.HierarchyEncoder` wraps HiT's model, so
the benchmark evaluates it exactly as it evaluates the others.
"""

from __future__ import annotations

import random
import time

import torch

from hypermem.data.hierarchy_tasks import EntityHierarchy, NegativeSampler
from hypermem.embed.hierarchy_encoder import HierarchyEncoder
from hypermem.embed.sentence_transformer import local_minilm_path
from hypermem.hierarchy.encoder_step import lr_factor
from hypermem.hierarchy.encoder_training import validate_encoder, validation_pairs


def train_hit(task, *, cpu_budget_s: float, seed: int = 0, batch_triplets: int = 256, lr: float = 1e-5,
              val_size: int = 300, validations: int = 4, log=print) -> tuple[HierarchyEncoder, dict]:
    """Train HiT on ``task.train_edges`` for ``cpu_budget_s`` CPU seconds; returns the
    wrapped encoder and the run's record (steps, CPU, validation history)."""
    from hierarchy_transformers import HierarchyTransformer
    from hierarchy_transformers.losses import HierarchyTransformerLoss

    names = task.hierarchy.names
    edges = list(task.train_edges)
    val = validation_pairs(task.val.positives, edges + list(task.val.positives), names, 10, val_size, seed)
    sampler = NegativeSampler(EntityHierarchy(dict(names), edges), 5, seed)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    model = HierarchyTransformer.from_pretrained(local_minilm_path())
    model.train()
    loss_fn = HierarchyTransformerLoss(model)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    enc = HierarchyEncoder(model, "poincare", base="hierarchy-transformers 0.1.1 (HiT)")
    cpu0 = time.process_time()
    history: list[dict] = []
    best: tuple[float, dict, dict] | None = None
    marks = [cpu_budget_s * (i + 1) / validations for i in range(validations)]
    order = list(range(len(edges)))
    rng.shuffle(order)
    pos, step = 0, 0
    while True:
        used = time.process_time() - cpu0
        if used >= marks[0]:
            marks.pop(0)
            model.eval()
            with torch.no_grad():
                m = validate_encoder(enc, names, val)
            model.train()
            m.update({"step": float(step), "cpu_seconds": time.process_time() - cpu0})
            history.append(m)
            log(f"  HiT step {step}: val F1 {m['f1']:.3f} (random {m['f1_random']:.3f}, hard {m['f1_hard']:.3f}), "
                f"{m['cpu_seconds']:.0f} CPU-s", flush=True)
            if best is None or m["f1"] > best[0]:
                best = (m["f1"], {k: v.detach().clone() for k, v in model.state_dict().items()}, dict(m))
            if not marks:
                break
            continue
        trip = []
        while len(trip) < batch_triplets:
            c, p = edges[order[pos % len(order)]]
            pos += 1
            negs = sampler.hard(c, sampler.random(c))[:5] + sampler.random(c)[:5]
            trip += [(names[c], names[p], names[n]) for n in negs]
        trip = trip[:batch_triplets]
        for g in opt.param_groups:
            g["lr"] = lr * lr_factor(used / cpu_budget_s, 0.05)
        feats = [model.tokenize([t[k] for t in trip]) for k in range(3)]
        out = loss_fn(feats, torch.zeros(len(trip)))
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        opt.step()
        step += 1
    assert best is not None
    model.load_state_dict(best[1])
    model.eval()
    enc.centripetal_weight, enc.threshold = best[2]["lambda"], best[2]["threshold"]
    enc.metrics = {f"val_{k}": float(v) for k, v in best[2].items()}
    enc.config = {"steps": step, "history": history, "positives_seen": pos, "batch_triplets": batch_triplets,
                  "lr": lr, "cpu_budget_s": cpu_budget_s}
    return enc, {"steps": step, "history": history, "positives_seen": pos,
                 "train_cpu_s": time.process_time() - cpu0,
                 "config": {"batch_triplets": batch_triplets, "lr": lr, "cpu_budget_s": cpu_budget_s}}
