"""Search of the memory store: temporal weights, query points, candidates, ranking, index.

:class:`Searcher` is the query side of :class:`~hypermem.store.memory.Memory`: it reads the
store's columns through its public :class:`~hypermem.store.state.MemoryState`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import torch

from ..embed import check_texts, embed_checked
from ..geometry import poincare as P
from ..geometry.cones import cone_energy, half_aperture
from ..index import HyperbolicDistance, MIPSIndex, ShellDistance, exact_topk
from ..index.bands import BandedDirectionIndex
from ..index.rescore import mirrored_topk
from ..retrieval.scoring import score_bias
from ..temporal import fresh_weights, policy_weights, uses_access_counts
from ..temporal.clock import now_of, to_seconds
from .ann_search import CandidateWeights, auto_bands, exact_bounds, index_recall, rank_approx, sync_index
from .as_of import rows_at
from .caller_warning import warn_caller
from .checks import CONE_TOL, METRICS, MODES, Filter, check_finite, max_depth
from .encoder_points import places_points
from .filter_hints import unknown_key_warning
from .filters import filter_keys
from .lexical import Lexical
from .meta_columns import MetaColumns
from .placement import unit
from .query_checks import Query, check_point_query
from .records import SearchResult, search_results

MIRROR_MIN_ROWS = 16_384
"""Below this many candidates the float64 scan is as fast as the mirror's two passes."""


@dataclass(frozen=True)
class SearchOptions:
    """The keyword arguments of :meth:`Searcher.search` past ``query`` and ``k``."""

    mode: str = "nearest"
    root: str | None = None
    at_time: datetime | None = None
    filters: Filter = None
    metric: str | None = None
    query_depth: float | None = None
    touch: bool = True
    use_index: bool | None = None
    oversample: int = 8
    valid_only: bool = False
    hybrid: float | None = None


class Searcher:
    """The query side of a store: ranking by
    ``-distance + depth_bias * depth + time_coef * log(time_weight)`` over its
    :class:`~hypermem.store.state.MemoryState`, and its nearest-neighbour index.

    It reads the store's public settings (``metric``, ``decay``, ``time_coef``...) at each
    call, so changing them on the store takes effect at once.  ``Memory.search``,
    ``search_batch``, ``time_weights``, ``embed_query`` and ``build_index`` call it."""

    def __init__(self, memory):
        self.memory = memory
        self._index: MIPSIndex | BandedDirectionIndex | None = None
        self._index_version = -1
        self._index_built: tuple[int, int] | None = None
        self.warned_keys: set[str] = set()
        """Filter keys already warned about by :meth:`warn_unknown_keys`."""
        self.meta = MetaColumns()
        """The value codes of the metadata fields that filters name (:mod:`hypermem.store.meta_columns`)."""
        self.lexical = Lexical()
        """The BM25 index of the texts, for ``hybrid`` searches (:mod:`hypermem.store.lexical`)."""
        self.mirror_min_rows = MIRROR_MIN_ROWS
        """Candidate count from which a float64 store's search scans its float32 mirror."""

    def invalidate(self) -> None:
        """Forget the index's freshness (it is rebuilt before its next use)."""
        self._index_version = -1

    @property
    def index(self) -> MIPSIndex | BandedDirectionIndex | None:
        """The index :meth:`build_index` made (None before); an exact one is brought up to date
        when read, not by searches (the exact scan is that kernel), a faiss one by the next indexed search."""
        if self._index is not None and self._index.exact:
            with self.memory.state.lock:
                return self.ensure_index()
        return self._index

    @index.setter
    def index(self, value: MIPSIndex | BandedDirectionIndex | None) -> None:
        self._index, self._index_version = value, -1

    def __setstate__(self, state: dict) -> None:  # "index": pickled before it became a property
        self.__dict__.update({"_index": state.pop("index", None), **state})

    # ------------------------------------------------------------------ time
    def now(self, at_time: datetime | None) -> datetime:
        return now_of(at_time, self.memory.clock)

    def weights(self, at_time: datetime | None) -> torch.Tensor:
        """The decay policy's weight of every memory at ``at_time`` (float64 ``(n,)``)."""
        st = self.memory.state
        n = st.n
        return policy_weights(self.memory.decay, self.now(at_time), st.time[:n], st.access[:n], st.valid_from[:n],
                              st.valid_until[:n])

    def time_weights(self, ids: Sequence[str] | None = None, at_time: datetime | None = None) -> torch.Tensor:
        """Temporal weights in ``[MIN_WEIGHT, 1]`` of ``ids`` (all memories if None) at ``at_time``."""
        with self.memory.state.lock:
            w = self.weights(at_time)
            if ids is None:
                return w
            rows = self.memory.state.rows_of(ids)
            return w[torch.tensor(rows, dtype=torch.long, device=self.memory.device)]

    # ------------------------------------------------------------------ queries
    def embed_query(self, query: str, depth: float | None = None) -> torch.Tensor:
        """Point for a free-text query: direction from the embedder, depth given or ``base_depth`` (a ball
        encoder's store: the encoder's point, unless ``depth`` is given)."""
        check_texts([query], what="query")
        e = embed_checked(self.memory.embedder, [query])[0]
        if depth is None and places_points(self.memory.embedder):
            return e.to(self.memory.device, self.memory.dtype)
        d = self.memory.base_depth if depth is None else \
            check_finite("depth", depth, lo=0.0, hi=max_depth(self.memory.curvature))
        return P.point_at(e.to(self.memory.device, self.memory.dtype), d, self.memory.curvature)

    def query_directions(self, queries: Sequence[Any], query_depth: float | None):
        """Unit directions ``(B, dim)`` and hyperbolic radii ``(B,)`` of the queries."""
        texts = [q for q in queries if isinstance(q, str)]
        if texts:
            check_texts(texts, what="query")
            emb = iter(embed_checked(self.memory.embedder, texts))
        dirs: list[Any] = []
        radii: list[Any] = []
        default = self.memory.base_depth if query_depth is None else \
            check_finite("query_depth", query_depth, lo=0.0, hi=max_depth(self.memory.curvature))
        own = places_points(self.memory.embedder)  # a ball encoder's text query is its point (store.encoder_points)
        points, slots = [], []
        for q in queries:
            if isinstance(q, str) and own:
                q = next(emb)
            elif isinstance(q, str):
                dirs.append(next(emb))
                radii.append(default)
                continue
            if q is None:
                raise ValueError("a query in a batch cannot be None")
            check_point_query(q)  # a QueryTypeError: a TypeError and the reference's ValueError
            p = torch.as_tensor(q).detach().to("cpu", torch.float64)
            if p.shape != (self.memory.dim,):
                raise ValueError(f"a query must be text or a point of shape ({self.memory.dim},), got shape "
                                 f"{tuple(p.shape)}")
            slots.append(len(dirs))
            points.append(p)
            dirs.append(None)
            radii.append(default)
        if points:  # the points checked and measured at once (the error names the first bad one)
            stacked = torch.stack(points)
            bad = (~P.is_inside(stacked, self.memory.curvature)).nonzero()
            if bad.numel():  # named by its place in the batch
                j = int(bad[0, 0])
                self.memory.ball.check_inside(stacked[j], name="query point" if len(queries) == 1 else f"query #{slots[j]}")
            r = P.distance_to_origin(stacked, self.memory.curvature).tolist() if query_depth is None else None
            for j, slot in enumerate(slots):
                dirs[slot] = stacked[j]
                if r is not None:
                    radii[slot] = r[j]
        D = unit(torch.stack(dirs)).to(self.memory.device, self.memory.dtype)
        return D, torch.tensor(radii, dtype=self.memory.dtype, device=self.memory.device)

    def _candidates(self, mode: str, root: str | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Candidate rows (None: all) and, in cone mode, the cone energy of every memory."""
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        if mode == "nearest":
            return None, None
        if root is None:
            raise ValueError(f"mode={mode!r} needs root=<memory id>")
        self.memory.state.row_of(root)
        if mode == "subtree":
            ids = [root, *self.memory.descendants(root)]
        elif mode == "children":
            ids = self.memory.children(root)
        elif mode == "ancestors":
            ids = self.memory.ancestors(root)
        elif mode == "siblings":
            ids = self.memory.siblings(root)
        else:
            pts = self.memory.state.points(self.memory.curvature)  # float64
            r = self.memory.state.row[root]
            energy = cone_energy(pts[r], pts, self.memory.curvature, self.memory.cone_k)
            inside = energy <= CONE_TOL
            inside[r] = False
            rows = inside.nonzero().squeeze(1)
            if rows.numel() == 0 and not self.memory.cone_constrained:
                psi = math.degrees(float(half_aperture(pts[r], self.memory.curvature, self.memory.cone_k)))
                warn_caller(f"no memory lies inside the entailment cone of {root!r} (half-aperture {psi:.1f} "
                              f"degrees): this store was made without cone_constrained=True, so a child need "
                              f"not lie in its parent's cone; use Memory(cone_constrained=True) "
                              f"for cone queries, or mode='subtree'")
            return rows, energy.to(self.memory.device)
        rows = torch.tensor(sorted(self.memory.state.row[i] for i in ids), dtype=torch.long, device=self.memory.device)
        return rows, None

    def _filter_rows(self, rows: torch.Tensor | None, filters: Filter) -> torch.Tensor | None:
        """``rows`` (None: all) whose record passes ``filters``: a callable on the record, or
        a dict of :mod:`hypermem.store.filters` on its metadata (answered by value groups,
        :mod:`hypermem.store.meta_columns`)."""
        if filters is None:
            return rows
        st = self.memory.state
        if isinstance(filters, Mapping):
            mask = self.meta.mask(st.records, filters)
            kept = mask.nonzero().squeeze(1) if rows is None else rows[mask[rows.cpu()].to(rows.device)]
            if not kept.numel():
                self.warn_unknown_keys(filters)
            return kept.to(self.memory.device)
        if not callable(filters):
            raise TypeError(f"filters must be a dict or a callable, got {type(filters).__name__}")
        cand = range(st.n) if rows is None else rows.tolist()
        kept = [r for r, rec in zip(cand, st.records.at_rows(cand)) if filters(rec)]
        return torch.tensor(kept, dtype=torch.long, device=self.memory.device)

    def warn_unknown_keys(self, filters: Mapping, known: Callable[[str], bool] | None = None,
                          what: str = "the search") -> None:
        """Warn (once per store and key) when a filter that matched nothing names a metadata key
        that no memory has (``known``: whether one has it; default: a record here has it):
        usually a misspelling, not an empty answer (:func:`~.filter_hints.unknown_key_warning`)."""
        for key in sorted(filter_keys(filters) - self.warned_keys):
            if not (known(key) if known else any(key in m for m in self.memory.state.records.metas if m)):
                self.warned_keys.add(key)
                warn_caller(unknown_key_warning(key, what))

    def search(self, query: Query = None, k: int = 5, mode: str = "nearest", root: str | None = None,
               at_time: datetime | None = None, filters: Filter = None, metric: str | None = None,
               query_depth: float | None = None, touch: bool = True, use_index: bool | None = None,
               oversample: int = 8, valid_only: bool = False, hybrid: float | None = None) -> list[SearchResult]:
        """Rank memories by ``-distance + depth_bias*depth + time_coef*log(time_weight)``
        (plus the lexical term ``hybrid * (...)`` for a text query, below).

        ``mode`` restricts the candidates: ``nearest`` (all), ``subtree`` / ``children`` /
        ``ancestors`` / ``siblings`` of ``root``, or ``cone`` (points inside the entailment
        cone of ``root``).  ``query`` is text, a point in the ball, or None for structural
        modes (then candidates are ranked by time weight and depth only).  ``filters`` (a
        metadata dict that must match, or a callable on the record) apply before the
        top-k cut.  ``metric`` overrides the default; ``query_depth`` places the query for
        ``metric="hyperbolic"`` (default ``base_depth``; a point query keeps its own depth).
        ``touch`` counts an access for every returned memory, after scoring.
        ``use_index`` (True, or None once :meth:`build_index` was called) uses the index
        for ``nearest`` search (True before any :meth:`build_index` builds the default exact
        one): with an exact backend the answer is the same; with faiss the
        ``k * oversample`` index candidates are re-scored exactly.

        **Time.** ``at_time`` (default: the clock's now) is the moment the search is asked at: it
        sets the temporal weights, and memories created after an explicit ``at_time`` (their ``t``
        later than it) are left out, as if the store were searched then.  Without ``at_time`` none
        is left out: a future-dated memory (``t`` after the clock's now, a reminder) is found at
        age 0 (time weight 1), where ``at_time=mem.clock()`` leaves it out.  A memory outside its
        validity window (``valid_from``/``valid_until``) is kept with the policy's weight
        (``ValidityWindow`` gives ``MIN_WEIGHT``, NoDecay 1); ``valid_only=True`` leaves it out.
        Naive datetimes are taken as UTC.

        **Hybrid.** ``hybrid`` (default: the store's, 0.3 with a real embedder, 0 with the
        hashing one) adds, for a text query, ``hybrid`` times the memory's Okapi BM25 score
        divided by the query's best, plus its parent's family score (the parent's text with
        its children's) and a share of its adjacent siblings' (:mod:`hypermem.store.lexical`,
        ``docs/hybrid.md``); 0 turns it off.  ``SearchResult.score`` includes it.

        **Cones.** ``mode="cone"`` returns the memories whose points lie in ``root``'s
        entailment cone.  Only a store made with ``cone_constrained=True`` places children
        inside their parent's cone; on another store the cone is usually empty (a warning
        says so): use ``mode="subtree"`` there.
        """
        opts = SearchOptions(mode, root, at_time, filters, metric, query_depth, touch, use_index, oversample,
                             valid_only, hybrid)
        return self.run([query], k, opts, allow_none=True)[0]

    def search_batch(self, queries: Sequence[Query], k: int = 5, **kwargs: Any) -> list[list[SearchResult]]:
        """:meth:`search` for many queries at once (one embedding call, one batched scoring), exact
        unless ``use_index=True`` asks for a faiss index (searched query by query: slower).

        With ``touch=True`` and a policy that depends on access counts (Ebbinghaus), each
        search changes the next one's weights, so the queries are then run one by one."""
        if isinstance(queries, str):
            raise TypeError("search_batch takes a list of queries, got a single string")
        queries = list(queries)
        unknown = set(kwargs) - {f.name for f in fields(SearchOptions)}
        if unknown:
            raise TypeError(f"search_batch got unexpected keyword arguments {sorted(unknown)}")
        if not queries:
            return []
        if kwargs.get("use_index") is None and not getattr(self._index, "exact", True):
            kwargs["use_index"] = False  # one exact batch beats a graph search per query (docs/search-kernel.md)
        touch = kwargs.get("touch", True)
        if touch and uses_access_counts(self.memory.decay):
            return [self.search(q, k=k, **kwargs) for q in queries]
        return self.run(queries, k, SearchOptions(**kwargs), allow_none=False)

    def run(self, queries: Sequence[Any], k: int, opts: SearchOptions, allow_none: bool) -> list[list[SearchResult]]:
        r"""One list of results per query (``allow_none``: a single None query, for the
        structural modes); the store first :meth:`~hypermem.store.Memory.refresh`\es and, with
        ``opts.touch``, :meth:`~hypermem.store.Memory.touch`\es what it returns."""
        mode, root, at_time, metric, oversample = opts.mode, opts.root, opts.at_time, opts.metric, opts.oversample
        memory = self.memory
        if mode == "ancestors" and root is None and memory.suggester.places_text():  # store.suggest
            return memory.suggester.rank(queries, k, opts.filters, at_time, opts.valid_only, bool(opts.use_index),
                                         oversample, opts.touch, parents=False)
        memory.refresh()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {MODES}")
        metric = self.memory.metric if metric is None else metric
        if metric not in METRICS:
            raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
        if isinstance(oversample, bool) or not isinstance(oversample, int) or oversample < 1:
            raise ValueError(f"oversample must be an integer >= 1, got {oversample!r}")
        hybrid = self.memory.hybrid if opts.hybrid is None else check_finite("hybrid", opts.hybrid, lo=0.0)
        no_query = allow_none and queries[0] is None
        if no_query and mode == "nearest":
            raise ValueError("mode='nearest' needs a query; omit the query only with a structural mode")
        if not no_query:
            Q, q_radius = self.query_directions(queries, opts.query_depth)  # embedder runs outside the lock
        with self.memory.state.lock:
            n = self.memory.state.n
            if n == 0:
                if at_time is not None:
                    self.now(at_time)  # a bad at_time is named on an empty store too
                if root is not None and mode != "nearest":
                    self.memory.state.row_of(root)
                return [[] for _ in queries]
            rows, energies = self._candidates(mode, root)
            rows = self._filter_rows(rows, opts.filters)
            rows = rows_at(self.memory.state, rows, lambda: to_seconds(self.now(at_time)), at_time is not None,
                           bool(opts.valid_only), k)  # store.as_of: the one at_time rule
            if rows is not None and rows.numel() == 0:
                return [[] for _ in queries]
            k = min(k, n if rows is None else rows.numel())  # no result list, nor buffer, longer than the candidates
            ann = None if no_query or (hybrid > 0 and any(isinstance(q, str) for q in queries)) else \
                self._approximate_index(opts.use_index, rows, metric)
            if ann is not None:  # O(k) work per query: weights and bias of the candidates alone
                weights = CandidateWeights(self, self.now(at_time))
                scores, idx, dist = rank_approx(self.memory, ann, Q, weights.bias, weights.bounds(ann), k, oversample)
                results = search_results(self.memory.state, scores, idx, dist, weights, energies)
                if opts.touch:
                    self._touch(results)
                return results
            # The weights of every memory go into the bias (in their own buffer where the
            # policy hands out a fresh one); the results' weights are the hits' alone.
            weights = CandidateWeights(self, self.now(at_time))
            bias = score_bias(weights[:n], self.memory.state.depth[:n], self.memory.time_coef,
                              self.memory.depth_bias, overwrite=fresh_weights(self.memory.decay))
            index_on = (self._index is not None) if opts.use_index is None else bool(opts.use_index)
            if not no_query and rows is not None and energies is None and not index_on and 4 * rows.numel() >= n:
                # a quarter of the rows or more kept (a filter like {"archived": False}), an exact
                # scan: scan them all, the rest at a bias of -inf, rather than gather the kept keys
                kept = torch.full_like(bias, -math.inf)
                kept[rows] = bias[rows]
                bias, rows = kept, None
            if no_query:
                scores, idx, dist = self._rank_by_bias(bias, rows, k)
            elif hybrid > 0 and any(isinstance(q, str) for q in queries):
                scores, idx, dist = self._rank_hybrid(queries, hybrid, Q, q_radius, bias, rows, k, metric, opts)
            else:
                scores, idx, dist = self._rank(Q, q_radius, bias, rows, k, metric, opts.use_index, oversample)
            results = search_results(self.memory.state, scores, idx, dist, weights, energies)
            if opts.touch:
                self._touch(results)
            return results

    def _touch(self, results) -> None:
        """Touch every returned memory and show the new access counts in the results' records
        (copies read from the record table before the touch)."""
        recs = {r.record.id: r.record for res in results for r in res}
        self.memory.touch([r.record.id for res in results for r in res])
        st = self.memory.state
        with st.lock:
            fresh = st.records.at_rows([st.row[i] for i in recs if i in st.row])
        for f in fresh:
            recs[f.id].access_count, recs[f.id].last_accessed = f.access_count, f.last_accessed

    def _rank_hybrid(self, queries, weight, Q, q_radius, bias, rows, k, metric, opts):
        """:meth:`_rank` per query, each text query's bias plus its lexical term."""
        out = []
        for i, q in enumerate(queries):
            b = bias + self.lexical.term(self.memory.state, q, weight).to(bias.dtype) if isinstance(q, str) else bias
            out.append(self._rank(Q[i: i + 1], q_radius[i: i + 1], b, rows, k, metric, opts.use_index,
                                  opts.oversample))
        return tuple(torch.cat(parts) for parts in zip(*out))

    def _rank_by_bias(self, bias, rows, k):
        cand = torch.arange(self.memory.state.n, device=self.memory.device) if rows is None else rows
        b = bias[cand]
        order = torch.argsort(-b, stable=True)[:k]  # ties: insertion order
        idx = cand[order].unsqueeze(0)
        s = b[order].unsqueeze(0)
        return s, idx, torch.zeros_like(s)

    def _distance_model(self, metric, q_radius, rows):
        if metric == "shell":
            g = ShellDistance(self.memory.curvature, self.memory.base_depth)
            return g, g.inverse
        key_r = self.memory.state.depth[: self.memory.state.n] if rows is None else self.memory.state.depth[rows]
        return HyperbolicDistance(self.memory.curvature, q_radius, key_r), None

    def _approximate_index(self, use_index, rows, metric):
        """The faiss index when this search goes through it, else None: an exact index is
        neither read nor built here (the exact scan gives its answer)."""
        if not ((self._index is not None) if use_index is None else use_index) or rows is not None or metric != "shell":
            return None
        if self._index is None:  # use_index=True before any build_index(): the default, exact one
            self.index = MIPSIndex(self.memory.ball, backend="auto")
        return None if self._index.exact else self.ensure_index()

    def _rank(self, Q, q_radius, bias, rows, k, metric, use_index, oversample):
        index = self._approximate_index(use_index, rows, metric)
        if index is not None:
            return self._rank_approx(index, Q, bias, k, oversample)
        st = self.memory.state
        b = bias if rows is None else bias[rows]
        g, inv = self._distance_model(metric, q_radius, rows)
        if self.mirrored(metric, rows):
            keys32 = st.search_keys() if rows is None else st.search_keys()[rows]
            scores, local, dist = mirrored_topk(Q, keys32, st.direction[: st.n], k, g, b, rows)
            idx = local if rows is None else torch.where(local >= 0, rows[local.clamp_min(0)], local)
            return scores, idx, dist
        keys = st.direction[: st.n] if rows is None else st.direction[rows]
        # directions are unit vectors: every product is a cosine, at most 1
        scores, local, dist = exact_topk(Q, keys, k, g, b, inv, max_product=1.0)
        idx = local if rows is None else torch.where(local >= 0, rows[local.clamp_min(0)], local)
        return scores, idx, dist

    def mirrored(self, metric: str, rows: torch.Tensor | None) -> bool:
        """Whether a search scans the float32 mirror and re-scores in float64
        (:func:`hypermem.index.rescore.mirrored_topk`): a float64 store, the shell metric,
        at least :attr:`mirror_min_rows` candidates, float32 products at full precision."""
        st = self.memory.state
        m = st.n if rows is None else int(rows.numel())
        if st.dtype != torch.float64 or metric != "shell" or m < self.mirror_min_rows:
            return False
        if torch.get_float32_matmul_precision() != "highest":
            return False  # TF32 / bfloat16 products break the error bound
        return not (st.device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)

    def _rank_approx(self, index, Q, bias, k, oversample):
        """faiss: graph candidates re-scored exactly, grown until the bias bound holds
        (:func:`hypermem.store.ann_search.rank_approx`)."""
        return rank_approx(self.memory, index, Q, bias.__getitem__, exact_bounds(index, bias), k, oversample)

    # ------------------------------------------------------------------ index
    def build_index(self, backend: str = "auto", hnsw_m: int = 32, ef_search: int = 64,
                    ef_construction: int = 40, bands: int | str = "auto") -> MIPSIndex | BandedDirectionIndex:
        """Build (or rebuild) the shell-metric nearest-neighbour index over all memories.

        ``"auto"``/``"torch"``/``"numpy"`` are exact (search answers do not change);
        ``"faiss"`` (the ``ann`` extra) is approximate: HNSW over the float32 directions
        (``hnsw_m``, ``ef_search``, ``ef_construction``) in ``bands`` of time, one graph
        each (:class:`hypermem.index.bands.BandedDirectionIndex`; ``"auto"``: one band per
        50,000 memories, at most 8, when the time term varies, else one graph), its
        candidates re-scored exactly.  Appends grow the graphs; removed or moved points are masked
        until they pass ``ann_search.MAX_TOMBSTONE_SHARE`` of the entries, then the graphs are rebuilt.
        :meth:`index_recall` measures its recall@k against the exact search."""
        with self.memory.state.lock:
            if backend == "faiss":
                if bands == "auto":
                    bands = auto_bands(self.memory)
                self.index = BandedDirectionIndex(hnsw_m, ef_search, ef_construction, bands)
            else:
                self.index = MIPSIndex(self.memory.ball, backend=backend)
            return self.ensure_index()

    def ensure_index(self) -> MIPSIndex | BandedDirectionIndex:
        """The index, brought up to the store's current version first."""
        st = self.memory.state
        if self._index is None:  # use_index=True before any build_index(): the default one
            self.index = MIPSIndex(self.memory.ball, backend="auto")
        if self._index_version != st.version:
            if isinstance(self._index, BandedDirectionIndex):
                sync_index(self._index, st, self._index_built if self._index_version >= 0 else None)
            else:
                self._index.build(P.point_at(st.direction[: st.n].to(torch.float64), self.memory.base_depth,
                                             self.memory.curvature))
            self._index_version, self._index_built = st.version, (st.rewrites, st.edits)
        return self._index

    def index_recall(self, queries=None, k: int = 10, sample: int = 100, seed: int = 0, **kwargs: Any) -> float:
        """recall@k of ``search(use_index=True)`` against the exact search, on ``queries``
        or on ``sample`` directions between stored memories; also kept as the index's
        ``recall_estimate`` (:func:`hypermem.store.ann_search.index_recall`)."""
        with self.memory.state.lock:
            return index_recall(self, queries, k, sample, seed, **kwargs)

