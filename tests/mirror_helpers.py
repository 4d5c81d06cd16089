"""A store of random embeddings for the search-mirror and ANN tests."""

from datetime import datetime, timedelta, timezone

import torch

from hypermem import HalfLife, HashingEmbedder, Memory

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=30)


def random_store(n: int, dim: int, seed: int = 0, hours: float = 600.0, **kw) -> Memory:
    """``n`` memories of random embeddings (a third children of an earlier one), times
    spread on ``hours``, HalfLife 72 h, the clock at :data:`NOW`."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, dim, generator=g, dtype=torch.float64)
    when = torch.rand(n, generator=g) * hours
    mem = Memory(embedder=HashingEmbedder(dim=dim), decay=HalfLife(72), clock=lambda: NOW, **kw)
    mem.add_many({"text": f"memory {i}", "id": f"m{i}", "embedding": emb[i], "t": T0 + timedelta(hours=float(when[i])),
                  **({"parent": f"m{i // 2}"} if i % 3 == 2 else {})} for i in range(n))
    return mem
