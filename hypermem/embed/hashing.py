"""A deterministic, dependency-free text embedder: word and character n-gram hashing."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

_WORD_RE = re.compile(r"[\w']+", re.UNICODE)
_TOKEN_OR_SEP = re.compile(r"[\w']+|\x00", re.UNICODE)
# For ASCII text, [\w']+ tokens are the runs of [A-Za-z0-9_']: every other byte becomes a
# space and a plain split finds the same tokens (NUL, the text separator, stays a token).
_ASCII_WORD = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_'"
_ASCII_TOKEN_TABLE = bytes(c if c in _ASCII_WORD or c == 0 else 32 for c in range(256))


def _tokens_and_separators(joined: str) -> list[str]:
    r"""The ``[\w']+`` tokens of ``joined`` and its NUL separators, in order (a byte
    translation and one split for ASCII text, the regular expression otherwise)."""
    if joined.isascii():
        return joined.encode("ascii").translate(_ASCII_TOKEN_TABLE).replace(b"\x00", b" \x00 ").decode(
            "ascii").split()
    return _TOKEN_OR_SEP.findall(joined)


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
    4. a non-empty text whose row is still zero (no token, as in ``"!!!"``, an emoji or
       ``"\u200b"``; or tokens whose features cancel) is hashed as one token: its whole
       lower-cased text, by the features of step 2 (``"w:" + text`` alone, should those
       cancel too), so every non-empty text gets a direction (only these texts differ from
       ``poincare-memory``, which gives them the zero vector);
    5. each row is L2-normalised (the empty text's row stays zero).

    Text written without spaces (Chinese, Japanese; Thai) is one token per clause
    (``我喜欢猫和狗``), whose n-grams are padded with ``#`` at the clause's ends only: a short
    query word (``猫``, ``東京``) shares few features with a sentence that holds it, so the
    sentence can rank below unrelated ones.  For CJK text use a real embedder (a multilingual
    sentence encoder), or turn the hybrid search on (``Memory(hybrid=0.3)``: its BM25 splits
    CJK into characters and bigrams, :mod:`hypermem.retrieval.bm25`).  The features stay as
    they are: saved stores' points depend on them.

    Tokens are hashed once and cached (up to ``cache_size`` distinct tokens), so a batch
    costs one dictionary look-up per token, one ``bincount`` for the distinct tokens'
    rows and one embedding bag summing them per text.  Every call returns a new tensor
    that nothing else holds (``returns_fresh_tensors``).

    One embedder may be shared by several stores and threads: concurrent ``embed`` calls
    return the same rows as one at a time, the token cache's reset included (a call reads one
    snapshot of the cache; new tokens are added under a lock).

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
    returns_fresh_tensors = True  # class attribute: see hypermem.embed.base.embed_checked

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
        self._lock = threading.Lock()
        self._reset_vocab()

    def __getstate__(self) -> dict:
        """Pickled and copied without the lock and the token cache (it is filled again as it is used)."""
        state = dict(self.__dict__)
        del state["_lock"], state["_vocab"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._reset_vocab()

    def __eq__(self, other):
        return (isinstance(other, HashingEmbedder) and self.dim == other.dim
                and self.ngram_range == other.ngram_range and self.seed == other.seed)

    def __hash__(self):
        return hash((self.dim, self.ngram_range, self.seed))

    def feature_names(self, token: str) -> list[str]:
        """The features of one (lower-case) token: ``"w:" + token`` and ``"c:" + g`` for
        every character n-gram ``g`` of ``"#" + token + "#"`` with length in ``ngram_range``."""
        feats = ["w:" + token]
        padded = f"#{token}#"
        lo, hi = self.ngram_range
        for n in range(lo, hi + 1):
            feats += ["c:" + padded[i:i + n] for i in range(len(padded) - n + 1)]
        return feats

    def hash_features(self, features: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(index, sign)`` arrays of ``features``: keyed BLAKE2b, 8-byte digest; index =
        the first 4 bytes as a little-endian integer mod ``dim``, sign = +1 when the fifth
        byte is odd, else -1.  Each distinct feature is hashed once."""
        distinct = list(dict.fromkeys(features))
        template = hashlib.blake2b(digest_size=8, key=self._key)
        digests = []
        for f in distinct:
            h = template.copy()
            h.update(f.encode("utf-8"))
            digests.append(h.digest())
        if len(digests) <= 64:  # a token or a few (an add()): the same integers, read in Python
            idx = np.array([int.from_bytes(d[:4], "little") % self.dim for d in digests], dtype=np.int64)
            sign = np.array([1.0 if d[4] & 1 else -1.0 for d in digests], dtype=np.float64)
        else:
            raw = np.frombuffer(b"".join(digests), dtype=np.uint8).reshape(-1, 8)
            idx = raw[:, :4].copy().view("<u4").ravel().astype(np.int64) % self.dim
            sign = np.where(raw[:, 4] & 1, 1.0, -1.0)
        if len(distinct) < len(features):
            where = dict(zip(distinct, range(len(distinct))))
            pos = np.fromiter(map(where.__getitem__, features), dtype=np.int64, count=len(features))
            idx, sign = idx[pos], sign[pos]
        return idx, sign

    def token_features(self, token: str) -> list[tuple[int, float]]:
        """``(index, sign)`` of every feature of one (lower-case) token."""
        idx, sign = self.hash_features(self.feature_names(token))
        return list(zip(idx.tolist(), sign.tolist()))

    # The token cache is one tuple ``(token -> id, lens, index parts, sign parts)``: an id ``i``
    # names entry ``i`` of the three lists.  An embed() reads the tuple once and uses only it, so
    # a reset (a new tuple swapped in) never changes what a call already reads; new tokens are
    # appended under ``_lock`` (list entries first, then the id), so a reader without the lock
    # finds every id it sees complete.  Threads sharing one embedder need no other care.
    def _reset_vocab(self, seen: tuple | None = None) -> tuple:
        """An empty token cache in place of ``seen`` (of the whole cache when ``None``), unless
        another thread replaced it first; returns the cache now in place."""
        with self._lock:
            if seen is None or self._vocab is seen:
                self._vocab = ({"\x00": -1}, [], [], [])  # NUL: the text separator of embed(); never a token
            return self._vocab

    def _vocab_with(self, tokens: Sequence[str], vocab: tuple) -> tuple:
        """A token cache holding every one of ``tokens``: ``vocab`` or the one that replaced it, the
        missing tokens added.  Hashing (the costly part) runs outside the lock; should a reset swap
        the cache meanwhile, the tokens still missing from the new one are hashed again."""
        while missing := list(set(tokens).difference(vocab[0])):
            names = [self.feature_names(t) for t in missing]
            idx, sign = self.hash_features([f for fs in names for f in fs])
            with self._lock:
                current = self._vocab
                cache, lens, idx_parts, sgn_parts = current
                start = 0
                for tok, fs in zip(missing, names):  # each token's run of features: views, as np.split gives
                    n = len(fs)
                    if tok not in cache:
                        lens.append(n)
                        idx_parts.append(idx[start:start + n])
                        sgn_parts.append(sign[start:start + n])
                        cache[tok] = len(lens) - 1  # last: a reader that finds the id finds its entries
                    start += n
            if current is vocab:  # not reset meanwhile: it held the other tokens already (none leave a cache)
                break
            vocab = current
        return vocab

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """float64 tensor ``(len(texts), dim)`` of L2-normalised hashed features."""
        if isinstance(texts, str):
            raise TypeError("embed takes a list of texts, got a single string")
        texts = list(texts)
        n = len(texts)
        vocab = self._vocab
        if len(vocab[1]) > self.cache_size:
            vocab = self._reset_vocab(vocab)
        # One tokenising pass over all texts joined by NUL (not a token character; lower()
        # maps it to itself and treats it as a word boundary), then split at the separators.
        tokens = _tokens_and_separators("\x00".join(texts).lower())
        get = vocab[0].get
        tids = list(map(get, tokens))  # the separator maps to -1 (see _reset_vocab)
        if None in tids:
            vocab = self._vocab_with(tokens, vocab)
            get = vocab[0].get
            tids = list(map(get, tokens))
        _, vlens, idx_parts, sgn_parts = vocab
        if n == 1 and tids and -1 not in tids:  # one text (an add()) without NUL: one bincount
            return self._normalised(self._one_row(tids, idx_parts, sgn_parts), texts)
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
            return self._normalised(torch.zeros(n, self.dim, dtype=torch.float64), texts)
        # token -> dense feature row for the distinct tokens of this batch, then one
        # sparse (texts x tokens) @ (tokens x dim) product; sums of +-1 are exact in float64.
        # distinct token ids in order, and each token's position among them: by a sort for
        # few tokens, by a presence map over the vocabulary (no sort) for many
        if tids.size <= 64:  # a text or a few (an add()): the sorted set and the inverse in Python
            tl = tids.tolist()
            order = sorted(set(tl))
            at = {u: j for j, u in enumerate(order)}
            uniq = np.array(order, dtype=np.int64)
            local = np.fromiter(map(at.__getitem__, tl), dtype=np.int64, count=len(tl))
        elif tids.size * 16 < len(vlens):
            uniq, local = np.unique(tids, return_inverse=True)
        else:
            present = np.zeros(len(vlens), dtype=bool)
            present[tids] = True
            uniq = np.flatnonzero(present)
            local = (np.cumsum(present) - 1)[tids]
        lens = np.fromiter((vlens[u] for u in uniq), dtype=np.int64, count=len(uniq))
        rows = np.repeat(np.arange(len(uniq), dtype=np.int64), lens)
        cols = np.concatenate([idx_parts[u] for u in uniq])
        signs = np.concatenate([sgn_parts[u] for u in uniq])
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
            # Each text's row is the sum of its tokens' rows: one embedding bag.  Every entry
            # is a sum of +-1 over at most (all features of the batch) terms: while that stays
            # below 2**24 float32 holds it exactly, and the float32 bag is faster.
            offsets = np.zeros(n, dtype=np.int64)
            np.cumsum(counts[:-1], out=offsets[1:])
            exact32 = int(lens[local].sum()) < 2**24
            weights = torch.from_numpy(tok).to(torch.float32 if exact32 else torch.float64)
            X = torch.nn.functional.embedding_bag(torch.from_numpy(local.astype(np.int64)), weights,
                                                  torch.from_numpy(offsets), mode="sum").to(torch.float64)
        return self._normalised(X, texts)

    def _one_row(self, tids: list[int], idx_parts: list, sgn_parts: list) -> torch.Tensor:
        """The unnormalised row ``(1, dim)`` of one text with token ids ``tids`` (of the cache whose
        parts are given): the signs of all its tokens' features summed by index.  Every entry is a
        sum of +-1, an integer that float64 holds exactly in any order, so this is the batch path's
        row bit for bit."""
        cols = np.concatenate([idx_parts[t] for t in tids])
        signs = np.concatenate([sgn_parts[t] for t in tids])
        return torch.from_numpy(np.bincount(cols, weights=signs, minlength=self.dim).reshape(1, self.dim))

    def _normalised(self, X: torch.Tensor, texts: list[str]) -> torch.Tensor:
        """Rows ``X`` divided by their norms; a non-empty text's zero row first hashed from its
        whole text (step 4 of the class docstring)."""
        # Integer-valued rows: the squared norm is an exact integer, so this matches any
        # other correctly rounded implementation bit for bit.
        norms = torch.linalg.vector_norm(X, dim=1, keepdim=True)
        if len(texts) == 1:  # one text (an add()): one read instead of a comparison and a nonzero
            zero = [0] if norms.item() == 0 else []
        else:
            zero = (norms[:, 0] == 0).nonzero().flatten().tolist()
        if zero:  # without a zero row there is no norm to replace
            for i in zero:
                if texts[i]:
                    X[i] = self.text_row(texts[i])
                    norms[i] = torch.linalg.vector_norm(X[i])
            norms[norms == 0] = 1.0
        return X.div_(norms)

    def text_row(self, text: str) -> torch.Tensor:
        """The unnormalised row of a text hashed as one token (its whole lower-cased text):
        the sum of the signs of its features; when they cancel, its ``"w:"`` feature alone."""
        token = text.lower()
        row = torch.zeros(self.dim, dtype=torch.float64)
        idx, sign = self.hash_features(self.feature_names(token))
        row.index_add_(0, torch.from_numpy(idx), torch.from_numpy(sign))
        if not bool(row.any()):
            i, sg = self.hash_features(["w:" + token])
            row[int(i[0])] = float(sg[0])
        return row
