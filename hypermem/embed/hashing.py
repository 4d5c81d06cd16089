"""A deterministic, dependency-free text embedder: word and character n-gram hashing."""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

_WORD_RE = re.compile(r"[\w']+", re.UNICODE)
_TOKEN_OR_SEP = re.compile(r"[\w']+|\x00", re.UNICODE)


@dataclass
class HashingEmbedder:
    """Deterministic text embedder by feature hashing (Weinberger et al., ICML 2009).

    Not a semantic model: a stable, fast stand-in that makes the library usable offline
    and in tests.  Algorithm (stable across versions and ports, and identical to the
    NumPy reference ``poincare-memory``):

    1. lower-case the text; tokens are the matches of ``[\\w']+``;
    2. features are ``"w:" + token`` and ``"c:" + g`` for every character n-gram ``g`` of
       ``"#" + token + "#"`` with length in ``ngram_range`` (inclusive);
    3. each feature is hashed with keyed BLAKE2b (8-byte digest, key = ``seed`` as 4
       little-endian bytes); index = first 4 bytes as a little-endian integer mod ``dim``;
       sign = +1 if the fifth byte is odd, else -1; the row adds ``sign`` at ``index``;
    4. each row is L2-normalised (an empty row stays zero).

    Tokens are hashed once and cached (up to ``cache_size`` distinct tokens), so a batch
    costs one dictionary look-up per token and one ``bincount``.

    Example::

        >>> e = HashingEmbedder(dim=64)
        >>> e.embed(["a cat", "a cat"]).shape
        torch.Size([2, 64])
    """

    dim: int = 256
    ngram_range: tuple[int, int] = (3, 5)
    seed: int = 0
    cache_size: int = 1_000_000
    _key: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 8:
            raise ValueError(f"HashingEmbedder.dim must be an integer >= 8, got {self.dim!r}")
        lo, hi = (int(v) for v in self.ngram_range)
        if lo < 1 or hi < lo:
            raise ValueError(f"ngram_range must be (lo, hi) with 1 <= lo <= hi, got {self.ngram_range!r}")
        self.ngram_range = (lo, hi)
        if not 0 <= int(self.seed) < 2**32:
            raise ValueError(f"seed must be in [0, 2**32), got {self.seed!r}")
        self._key = int(self.seed).to_bytes(4, "little", signed=False)
        self._reset_vocab()

    def __eq__(self, other):
        return (isinstance(other, HashingEmbedder) and self.dim == other.dim
                and self.ngram_range == other.ngram_range and self.seed == other.seed)

    def __hash__(self):
        return hash((self.dim, self.ngram_range, self.seed))

    def _hash(self, feature: str) -> tuple[int, float]:
        h = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, key=self._key).digest()
        return int.from_bytes(h[:4], "little") % self.dim, (1.0 if h[4] & 1 else -1.0)

    def token_features(self, token: str) -> list[tuple[int, float]]:
        """``(index, sign)`` of every feature of one (lower-case) token."""
        feats = [self._hash("w:" + token)]
        padded = f"#{token}#"
        lo, hi = self.ngram_range
        for n in range(lo, hi + 1):
            for i in range(len(padded) - n + 1):
                feats.append(self._hash("c:" + padded[i:i + n]))
        return feats

    def _reset_vocab(self) -> None:
        self._cache = {"\x00": -1}  # the text separator of embed(); never a token
        self._lens: list[int] = []
        self._idx_parts: list[np.ndarray] = []
        self._sgn_parts: list[np.ndarray] = []

    def _token_id(self, token: str) -> int:
        tid = self._cache.get(token)
        if tid is None:
            feats = self.token_features(token)
            tid = self._cache[token] = len(self._lens)
            self._lens.append(len(feats))
            self._idx_parts.append(np.fromiter((f[0] for f in feats), dtype=np.int64, count=len(feats)))
            self._sgn_parts.append(np.fromiter((f[1] for f in feats), dtype=np.float64, count=len(feats)))
        return tid

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """float64 tensor ``(len(texts), dim)`` of L2-normalised hashed features."""
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, got a single string")
        texts = list(texts)
        n = len(texts)
        if len(self._lens) > self.cache_size:
            self._reset_vocab()
        # One regex pass over all texts joined by NUL (not a token character; lower() maps
        # it to itself and treats it as a word boundary), then split at the separators.
        tokens = _TOKEN_OR_SEP.findall("\x00".join(texts).lower())
        get = self._cache.get
        tids = list(map(get, tokens))  # the separator maps to -1 (see _reset_vocab)
        if None in tids:
            for tok in set(tokens).difference(self._cache):
                self._token_id(tok)
            tids = list(map(get, tokens))
        arr = np.fromiter(tids, dtype=np.int64, count=len(tids))
        is_sep = arr < 0
        seps = np.flatnonzero(is_sep)
        if len(seps) == max(n - 1, 0):
            counts = np.diff(np.concatenate([[-1], seps, [len(arr)]])) - 1
            arr = arr[~is_sep]
        else:  # a text holds NUL itself: tokenise text by text
            per_text = [_WORD_RE.findall(t.lower()) for t in texts]
            counts = np.fromiter(map(len, per_text), dtype=np.int64, count=n)
            arr = np.fromiter((get(tok) for toks in per_text for tok in toks), dtype=np.int64,
                              count=int(counts.sum()))
        tids = arr
        if not tids.size:
            return torch.zeros(n, self.dim, dtype=torch.float64)
        # token -> dense feature row for the distinct tokens of this batch, then one
        # sparse (texts x tokens) @ (tokens x dim) product; sums of +-1 are exact in float64.
        # distinct token ids in order, and each token's position among them: by a sort for
        # few tokens, by a presence map over the vocabulary (no sort) for many
        if tids.size * 16 < len(self._lens):
            uniq, local = np.unique(tids, return_inverse=True)
        else:
            present = np.zeros(len(self._lens), dtype=bool)
            present[tids] = True
            uniq = np.flatnonzero(present)
            local = (np.cumsum(present) - 1)[tids]
        lens = np.fromiter((self._lens[u] for u in uniq), dtype=np.int64, count=len(uniq))
        rows = np.repeat(np.arange(len(uniq), dtype=np.int64), lens)
        cols = np.concatenate([self._idx_parts[u] for u in uniq])
        signs = np.concatenate([self._sgn_parts[u] for u in uniq])
        tok = np.bincount(rows * self.dim + cols, weights=signs,
                          minlength=len(uniq) * self.dim).reshape(len(uniq), self.dim)
        if n < 512:
            # Small batches: sum each text's token rows directly (a sparse product's thread
            # start-up costs more than the work here).
            Xn = np.zeros((n, self.dim), dtype=np.float64)
            has = counts > 0
            starts = (np.cumsum(counts) - counts)[has]
            Xn[has] = np.add.reduceat(tok[local], starts, axis=0)
            X = torch.from_numpy(Xn)
        else:
            crow = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts, out=crow[1:])
            # Every entry is a sum of +-1 over at most (all features of the batch) terms: while
            # that stays below 2**24 float32 holds it exactly, and its product is faster.
            exact32 = int(lens[local].sum()) < 2**24
            dt = torch.float32 if exact32 else torch.float64
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
                counts_matrix = torch.sparse_csr_tensor(
                    torch.from_numpy(crow), torch.from_numpy(local.astype(np.int64)),
                    torch.ones(len(local), dtype=dt), (n, len(uniq)), check_invariants=False)
            X = (counts_matrix @ torch.from_numpy(tok).to(dt)).to(torch.float64)
        # Integer-valued rows: the squared norm is an exact integer, so this matches any
        # other correctly rounded implementation bit for bit.
        norms = torch.linalg.vector_norm(X, dim=1, keepdim=True)
        norms[norms == 0] = 1.0
        return X.div_(norms)
