"""The projection layout of a store without parents: a centred PCA of the directions spreads
similar texts around the disk (an uncentred one puts their mean direction on the first axis
and piles them up at one angle); the radii stay the exact depths."""

import math

import torch

from hypermem import HashingEmbedder, Memory
from hypermem.viz import projection_coordinates
from hypermem.viz.layout import _principal_angles


def flat_store():
    mem = Memory(embedder=HashingEmbedder(dim=64))
    topics = ["cats", "dogs", "tax", "cars"]
    mem.add_many([{"text": f"flat note {i} about {topics[i % 4]} and the weather today", "id": f"f{i}"}
                  for i in range(400)])
    return mem


def test_a_flat_store_spreads_over_the_circle_with_exact_radii():
    mem = flat_store()
    xy = projection_coordinates(mem)
    torch.testing.assert_close(xy.norm(dim=1), torch.tanh(math.sqrt(mem.curvature) * mem.depths.double() / 2))
    deg = torch.rad2deg(torch.atan2(xy[:, 1], xy[:, 0]))
    counts = torch.histc(deg, bins=12, min=-180, max=180)  # 30-degree sectors
    assert counts.max() / len(mem) < 0.35, counts.tolist()
    assert (counts > 0).sum() >= 6, counts.tolist()  # at least half the disk is used
    # The uncentred PCA (kept by disk_coordinates for points in a plane) piles them up.
    dirs = mem.directions.double()
    old = torch.rad2deg(_principal_angles(dirs))
    assert torch.histc(old, bins=12, min=-180, max=180).max() / len(mem) > 0.5


def test_centring_keeps_degenerate_inputs_finite():
    for n in (1, 2, 3):
        a = _principal_angles(torch.randn(n, 8, dtype=torch.float64), centred=True)
        assert a.shape == (n,) and torch.isfinite(a).all()
    assert _principal_angles(torch.zeros(0, 8), centred=True).shape == (0,)
