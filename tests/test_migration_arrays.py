"""Coming from poincare-memory: any NumPy array ``np.asarray`` takes is accepted, reversed
views (negative strides) and read-only arrays included, copied only where torch needs it."""

import warnings

import numpy as np
import torch

from hypermem import CallableEmbedder, PoincareBall, cone_energy

RNG = np.random.default_rng(3)


def test_numpy_arrays_with_negative_strides_and_read_only_ones_are_accepted():
    B = PoincareBall()
    X = RNG.normal(size=(6, 3)) * 0.2
    R = X[::-1]
    want = B.distance(np.ascontiguousarray(R), X)
    torch.testing.assert_close(B.distance(R, X), want)
    torch.testing.assert_close(B.distance_to_origin(X[:, ::-1]), B.distance_to_origin(X[:, ::-1].copy()))
    torch.testing.assert_close(B.project(R), B.project(R.copy()))
    torch.testing.assert_close(B.expmap0(R), B.expmap0(R.copy()))
    torch.testing.assert_close(B.to_lorentz(R), B.to_lorentz(R.copy()))
    torch.testing.assert_close(cone_energy(R, X, B), cone_energy(R.copy(), X, B))
    ro = X.copy()
    ro.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "non-writable" warning from torch
        torch.testing.assert_close(B.distance_to_origin(ro), B.distance_to_origin(X))
    assert ro.flags.writeable is False


def test_contiguous_and_plain_strided_arrays_are_not_copied():
    from hypermem.geometry import as_tensor

    X = RNG.normal(size=(6, 4))
    assert as_tensor(X).data_ptr() == X.ctypes.data
    assert as_tensor(X[:, ::2]).data_ptr() == X.ctypes.data
    F = np.asfortranarray(X)
    assert as_tensor(F).data_ptr() == F.ctypes.data


def test_a_callable_embedder_returning_a_reversed_view():
    E = RNG.normal(size=(3, 8))
    emb = CallableEmbedder(lambda texts: E[: len(texts), ::-1], 8)
    torch.testing.assert_close(emb.embed(["a", "b"]), torch.as_tensor(E[:2, ::-1].copy()))


def test_a_store_takes_an_embedders_reversed_read_only_view():
    """An embedder whose `embed` hands back a flipped, read-only NumPy view (np.flip of a
    cached matrix) could not be stored: torch refused the negative strides."""
    from hypermem import Memory

    E = RNG.normal(size=(3, 8))
    E.flags.writeable = False

    class Flipped:
        dim = 8

        def embed(self, texts):
            return np.flip(E[: len(texts)], axis=1)

    mem = Memory(embedder=Flipped())
    mem.add("a", id="a")
    torch.testing.assert_close(mem.embeddings[0], torch.as_tensor(E[0, ::-1].copy()))
