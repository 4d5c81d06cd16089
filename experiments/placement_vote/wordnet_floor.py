"""How many of WordNet's unseen nouns ("lemma: definition", seed 1) the nearest-neighbour floor
(``hypermem.store.nearest_floor``) would leave a root in the MiniLM store of the known nouns,
where the placement benchmark's figures are measured.

    python experiments/placement_vote/wordnet_floor.py [--cache DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_placement import encoded, load_task  # noqa: E402

import hypermem.store.nearest_floor as nf  # noqa: E402
from hypermem import SentenceTransformerEmbedder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", default="runs/wordnet-floor", help="where the MiniLM vectors are kept")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    task = load_task(1, "definition")
    h = task.hierarchy
    held = set(task.val_entities) | set(task.test_entities)
    known = sorted(e for e in h.names if e not in held)
    emb = SentenceTransformerEmbedder()
    K = torch.as_tensor(encoded(emb, [h.names[e] for e in known], cache / "known.pt")).double()
    nrm = K.norm(dim=1)
    for part, ents in (("val", sorted(task.val_entities)), ("test", sorted(task.test_entities))):
        X = torch.as_tensor(encoded(emb, [h.names[e] for e in ents], cache / f"{part}.pt")).double()
        near = ((X @ K.T) / (X.norm(dim=1, keepdim=True) * nrm[None])).max(dim=1).values
        for q in (0.01, 0.02, 0.05):
            f = nf.nearest_floor(len(known), lambda r: (K[r] @ K.T) / (nrm[r, None] * nrm[None]), q=q)
            print(f"{part} ({len(ents)} nouns): floor q={q} {f:.3f}: below it {float((near < f).double().mean()):.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
