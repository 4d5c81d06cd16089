r"""Approximate nearest directions in bands of a key: one HNSW graph per band of, say, time.

The store's score is ``-g(s) + b`` (``g`` the shell distance of the cosine ``s``, ``b`` the
query-independent bias: time and depth terms).  One graph over every memory ranks by ``s``
alone, so the candidates of a query must be grown until ``s`` falls below
``g^{-1}(b_max - t_k)`` (``t_k`` the k-th re-scored score, ``b_max`` the largest bias of *any*
memory): when the bias spans a wide range, as a time decay over months does, that asks for
thousands of candidates.  Cut the memories into bands of a key that the bias follows (their
time), give each band its own graph and its own bias bound ``b_max^{(j)}``: within a band the
range is narrow, each band's candidates stop early, and a band whose bound is below ``t_k``
is not searched at all (``-g(s) + b <= b`` since ``g >= 0`` on the shell).  This is the
partitioned filtering of Wei et al., "AnalyticDB-V" (VLDB 2020) and of the time-sliced
vector indexes of log stores, applied to a score bound rather than a filter.

Bands are cut at quantiles of the key when the index is built; an appended row goes to the
band its key falls in, and once the newest band holds twice its share of the rows (and at
least :data:`BAND_MIN_ROWS`) a new band opens at its largest key, so a store that grows with
time keeps bands of comparable size without a rebuild.  Each band also keeps the largest and smallest value of named columns of its rows
(:meth:`extremes`), from which the store bounds the bias of a band.

Rows removed or moved (a point re-placed) are not rebuilt either: :meth:`relocate` leaves
their graph entries as tombstones (:meth:`~hypermem.index.ann.DirectionIndex.remove`: walked
through, never returned), renumbers the rest and adds each moved row as a new entry, as an
append is.  The caller rebuilds once the tombstones pass a share of the entries
(:attr:`tombstone_share`), so a store that removes as it grows pays one rebuild per that share
of its size, not one per removal (the deferred deletion of Malkov & Yashunin's HNSW and of
hnswlib's ``mark_deleted``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import repeat

import numpy as np
import torch

from .ann import DirectionIndex

BAND_MIN_ROWS = 50_000
"""The smallest band ``bands="auto"`` cuts (a graph's search costs about the same from 50k rows down)."""

COMPARE_ROWS = 32_768
"""Rows whose stored and current directions :meth:`BandedDirectionIndex.relocate` compares at once."""


class BandedDirectionIndex:
    """``bands`` faiss HNSW graphs (:class:`~hypermem.index.ann.DirectionIndex`) over the
    unit directions ``(N, d)``, cut by a key ``(N,)`` (the store's time column).

    ``bands=1`` is one graph over everything; the graph settings are
    :class:`~hypermem.index.ann.DirectionIndex`'s.

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> x = torch.nn.functional.normalize(torch.randn(600, 8, generator=g), dim=1)
    >>> index = BandedDirectionIndex(bands=3).build(x, torch.arange(600.0), {"t": torch.arange(600.0)})
    >>> [index.band_size(b) for b in range(index.n_bands)], index.extremes("t")[0].tolist()
    ([200, 200, 200], [199.0, 399.0, 599.0])
    >>> cos, rows = index.search_band(2, x[450:451], 1)
    >>> rows.tolist()
    [[450]]
    """

    backend = "faiss"
    exact = False

    def __init__(self, hnsw_m: int = 32, ef_search: int = 64, ef_construction: int = 40, bands: int = 1):
        if isinstance(bands, bool) or not isinstance(bands, int) or bands < 1:
            raise ValueError(f"bands must be an integer >= 1, got {bands!r}")
        DirectionIndex(hnsw_m, ef_search, ef_construction)  # checks the graph settings and faiss
        self.hnsw_m, self.ef_construction, self.bands = hnsw_m, ef_construction, bands
        self._ef_search = ef_search
        self.edges = torch.empty(0, dtype=torch.float64)
        """The keys at which bands ``1 .. n_bands-1`` start (a row with key ``>= edges[j-1]`` and
        ``< edges[j]`` is in band ``j``)."""
        self.graphs: list[DirectionIndex] = []
        self.rows: list[torch.Tensor] = []
        """The store rows of each band, in the order its graph holds them (-1: a tombstone)."""
        self.band_of = torch.empty(0, dtype=torch.long)
        """The band of each indexed row."""
        self.entry_of = torch.empty(0, dtype=torch.long)
        """The position of each indexed row in its band's graph."""
        self.labels: list = []
        """What the caller names each indexed row by (the store's ids), in row order: how
        :meth:`relocate` finds a row again after rows were removed."""
        self.builds = 0
        """How many times :meth:`build` made the graphs (a rebuild counts; appends and
        :meth:`relocate` do not)."""
        self.min_band_rows = BAND_MIN_ROWS
        """A new band opens when the newest holds twice its share of the rows and at least this many."""
        self._max: dict[str, torch.Tensor] = {}
        self._min: dict[str, torch.Tensor] = {}
        self.recall_estimate: dict | None = None
        """The last :meth:`hypermem.Memory.index_recall` measurement (None until asked)."""

    @property
    def ef_search(self) -> int:
        """The search beam of every band's graph (at least twice the candidates asked for:
        :data:`~hypermem.index.ann.BEAM_PER_CANDIDATE`)."""
        return self._ef_search

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"ef_search must be an integer >= 1, got {value!r}")
        for g in self.graphs:
            g.ef_search = value
        self._ef_search = value

    @property
    def n_bands(self) -> int:
        return len(self.graphs)

    def __len__(self) -> int:
        return int(self.band_of.numel())

    def band_size(self, band: int) -> int:
        """The rows in ``band`` (its graph's live entries)."""
        return self.graphs[band].live

    @property
    def tombstone_share(self) -> float:
        """The share of the graphs' entries that are tombstones (0 after :meth:`build`)."""
        total = sum(len(g) for g in self.graphs)
        return sum(g.dead for g in self.graphs) / total if total else 0.0

    def build(self, directions: torch.Tensor, keys: torch.Tensor,
              columns: Mapping[str, torch.Tensor] | None = None, labels: Sequence | None = None) -> BandedDirectionIndex:
        """Fresh bands over ``directions`` ``(N, d)``, cut at quantiles of ``keys`` ``(N,)``;
        ``columns``: name -> ``(N,)`` values whose extremes each band keeps; ``labels``: the
        rows' names (:attr:`labels`; default their numbers). Returns ``self``."""
        if directions.dim() != 2 or keys.shape != directions.shape[:1]:
            raise ValueError(f"directions (N, d) and keys (N,) expected, got {tuple(directions.shape)} "
                             f"and {tuple(keys.shape)}")
        n = int(directions.shape[0])
        keys = keys.detach().to("cpu", torch.float64)
        bands = max(1, min(self.bands, n))
        if bands > 1:
            ranked = torch.sort(keys.nan_to_num(-math.inf)).values  # torch.quantile refuses > 2^24 values
            self.edges = torch.unique(ranked[(torch.arange(1, bands) * n) // bands])
        else:
            self.edges = torch.empty(0, dtype=torch.float64)
        self.graphs, self.rows = [], []
        self.band_of = torch.empty(0, dtype=torch.long)
        self.entry_of = torch.empty(0, dtype=torch.long)
        self.labels = []
        self._max, self._min = {}, {}
        self._open(self.edges.numel() + 1)
        self.builds += 1
        return self._append(directions, keys, columns or {}, labels)

    def add(self, directions: torch.Tensor, keys: torch.Tensor,
            columns: Mapping[str, torch.Tensor] | None = None, labels: Sequence | None = None) -> BandedDirectionIndex:
        """Append rows ``len(self) ..`` (their directions, keys, column values and labels)."""
        if not self.graphs:
            return self.build(directions, keys, columns, labels)
        if directions.shape[0] == 0:
            return self
        if self.bands > 1 and self.band_size(self.n_bands - 1) >= max(2 * len(self) / self.bands, self.min_band_rows):
            top = float(self._max["__key__"][-1])
            if math.isfinite(top):
                self.edges = torch.cat([self.edges, torch.tensor([top], dtype=torch.float64)])
                self._open(1)
        return self._append(directions, keys, columns or {}, labels)

    def _open(self, count: int) -> None:
        for _ in range(count):
            self.graphs.append(DirectionIndex(self.hnsw_m, self.ef_search, self.ef_construction))
            self.rows.append(torch.empty(0, dtype=torch.long))
        for table, fill in ((self._max, -math.inf), (self._min, math.inf)):
            for name, v in table.items():
                table[name] = torch.cat([v, torch.full((count,), fill, dtype=torch.float64)])

    def _append(self, directions, keys, columns, labels) -> BandedDirectionIndex:
        first, m = len(self), int(keys.numel())
        keys = keys.detach().to("cpu", torch.float64)
        self.labels.extend(range(first, first + m) if labels is None else labels)
        self.band_of = torch.cat([self.band_of, torch.full((m,), -1, dtype=torch.long)])
        self.entry_of = torch.cat([self.entry_of, torch.full((m,), -1, dtype=torch.long)])
        band = self._place(directions, keys, torch.arange(first, first + m, dtype=torch.long))
        for name, v in {"__key__": keys, **columns}.items():
            self._extend(name, band, v.detach().to("cpu", torch.float64))
        return self

    def _place(self, directions, keys, rows: torch.Tensor) -> torch.Tensor:
        """Add rows ``rows`` (their ``directions`` and float64 ``keys``) as new entries of the
        bands their keys fall in; returns those bands."""
        band = torch.bucketize(keys.nan_to_num(-math.inf), self.edges, right=True)
        self.band_of[rows] = band
        for b in torch.unique(band).tolist():
            sel = band == b
            graph = self.graphs[b]
            self.entry_of[rows[sel]] = torch.arange(len(graph), len(graph) + int(sel.sum()), dtype=torch.long)
            if graph.built:
                graph.add(directions[sel.to(directions.device)])
            else:
                graph.build(directions[sel.to(directions.device)])
            self.rows[b] = torch.cat([self.rows[b], rows[sel]])
        return band

    def relocate(self, row_of: Mapping, labels: Sequence, directions: torch.Tensor, keys: torch.Tensor,
                 columns: Mapping[str, torch.Tensor] | None = None) -> BandedDirectionIndex:
        """Follow rows that were removed, renumbered, moved or appended, without a rebuild:
        ``labels`` names the ``N`` rows now (``row_of``: label -> row), ``directions``
        ``(N, d)``, ``keys`` and ``columns`` their values.  The entry of a row whose label is
        gone becomes a tombstone; so does one whose stored direction differs from the row's now
        (compared exactly, :data:`COMPARE_ROWS` at a time), and that row, like every row no
        entry holds, is added as a new entry in the band of its key.  The bands' extremes are
        recomputed.  Returns ``self``."""
        n = len(labels)
        now = torch.from_numpy(np.fromiter(map(row_of.get, self.labels, repeat(-1)), dtype=np.int64,
                                           count=len(self.labels)))
        band_of = torch.full((n,), -1, dtype=torch.long)
        entry_of = torch.full((n,), -1, dtype=torch.long)
        for b, graph in enumerate(self.graphs):
            old = self.rows[b]
            rows = torch.where(old >= 0, now[old.clamp_min(0)], old)
            alive = (rows >= 0).nonzero().squeeze(1)
            if alive.numel():
                moved = _moved(graph.vectors(), alive, rows[alive], directions)
                rows[alive[moved]] = -1
                alive = alive[~moved]
            graph.remove(((old >= 0) & (rows < 0)).nonzero().squeeze(1))
            self.rows[b] = rows
            band_of[rows[alive]] = b
            entry_of[rows[alive]] = alive
        self.band_of, self.entry_of, self.labels = band_of, entry_of, list(labels)
        keys = keys.detach().to("cpu", torch.float64)
        fresh = (band_of < 0).nonzero().squeeze(1)
        if fresh.numel():
            self._place(directions[fresh.to(directions.device)], keys[fresh], fresh)
        self._max, self._min = {}, {}
        for name, v in {"__key__": keys, **(columns or {})}.items():
            self._extend(name, self.band_of, v.detach().to("cpu", torch.float64))
        return self

    def _extend(self, name: str, band: torch.Tensor, values: torch.Tensor) -> None:
        nb = self.n_bands
        hi = self._max.get(name, torch.full((nb,), -math.inf, dtype=torch.float64))
        lo = self._min.get(name, torch.full((nb,), math.inf, dtype=torch.float64))
        self._max[name] = hi.scatter_reduce(0, band, values, "amax")
        self._min[name] = lo.scatter_reduce(0, band, values, "amin")

    def refresh(self, columns: Mapping[str, torch.Tensor]) -> None:
        """Recompute the bands' extremes of ``columns`` (every indexed row's current value:
        after an edit of a column in place)."""
        for name, v in columns.items():
            self._max.pop(name, None)
            self._min.pop(name, None)
            self._extend(name, self.band_of, v.detach().to("cpu", torch.float64)[: len(self)])

    def extremes(self, name: str) -> tuple[torch.Tensor, torch.Tensor]:
        """The largest and smallest value of column ``name`` in each band ``(n_bands,)``
        (``-inf`` / ``inf`` for an empty band)."""
        if name not in self._max:
            raise KeyError(f"the index keeps no column {name!r} (it has {sorted(self._max)})")
        return self._max[name], self._min[name]

    def search_band(self, band: int, queries: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Float32 cosines and store rows ``(B, k)`` of the nearest directions in ``band``, best
        first; missing entries have row -1 and cosine ``-inf``."""
        cos, local = self.graphs[band].search(queries, min(int(k), max(1, self.band_size(band))))
        rows = torch.where(local >= 0, self.rows[band][local.clamp_min(0)], local)
        return cos, rows


def _run(x: torch.Tensor) -> slice | torch.Tensor:
    """``x`` (increasing positions) as a slice when it is one run ``a, a+1, ..``, else itself."""
    a = int(x[0])
    if int(x[-1]) - a + 1 == x.numel() and bool((x[1:] - x[:-1] == 1).all()):
        return slice(a, a + x.numel())
    return x


def _moved(stored: torch.Tensor, entries: torch.Tensor, rows: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """Whether the stored vector of each of ``entries`` differs from the direction of its row
    ``rows`` now (exactly; a chunk of :data:`COMPARE_ROWS` that is equal as a whole is
    compared once, a run of positions read as a slice, without a copy)."""
    out = []
    for e, r in zip(entries.split(COMPARE_ROWS), rows.split(COMPARE_ROWS)):
        a = stored[_run(e)]
        b = directions[_run(r.to(directions.device))].to("cpu", torch.float32)
        same = np.array_equal(a.numpy(), b.numpy())  # faster than torch.equal on the CPU
        out.append(torch.zeros(e.numel(), dtype=torch.bool) if same else (a != b).any(1))
    return torch.cat(out)
