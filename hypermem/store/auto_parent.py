r"""``add(text, parent="auto")``: the parent a store chooses for a new memory.

An ``add(text, parent="auto")``, or an ``add_many`` item with ``"parent": "auto"``
(:func:`resolve_auto`), is attached to the memory with the best pure subsumption score (no time
term, no filter) among the stored memories and the batch's earlier items, if its score at
the threshold's ``lambda`` (``centripetal_weight``, the F1 operating point) is above the
encoder's threshold, else a root; the choice is kept in the record's meta under
``"auto_parent"``: ``{"parent": id or None, "score": s (the decision's), "threshold": t,
"by": "subsumption" | "vote", "suggested": [{"id", "score", "pair", "passed"}, ...]}`` (the
:data:`KEPT` best, ranked; ``"score"`` the ranking value: the pair score at the ranking
``lambda``, or the vote's; ``"pair"`` the pair score at the threshold's ``lambda`` and
``"passed"`` whether it is above the threshold, so a candidate walked over says why -- with a
hierarchy encoder only), so an agent can show why; a vote's choice also keeps its ``"rank"``
in the voted list when it was taken (the first candidate that passes the threshold may rank
below the :data:`KEPT` shown: it is then listed after them; a root has no ``"rank"``, its
``"score"`` is the first suggestion's pair score).  With an embedder that is
not a hierarchy encoder, a store that holds a tree (or a batch that declares a parent before
its first ``"auto"`` item) attaches the vote's choice (no threshold: ``"threshold": null``,
``"score"`` its ranking value); without a tree ``"auto"`` is a ``ValueError``.  With a hierarchy
encoder, once the store (or an earlier item of the batch) holds a parent link and at least
:data:`~hypermem.store.vote.FILED_MIN` of the text's neighbourhood sits under a parent
(:func:`~hypermem.store.vote.filed_share`), the parent is the best-ranked candidate among the
first :data:`WALK` whose pair score at the threshold's ``lambda`` passes the threshold (else a root), or the best-ranked
candidate itself, whatever its score, when the text names it (``"named": true`` in the
meta; :mod:`hypermem.store.mentions`); a neighbourhood of
roots is placed by the pair score as in a store without a tree, and so are the suggestions
and the ancestors of ``by="auto"``.

Beside that, a text nearer to no filed memory (cosine of the embedding column) than the filed
memories are to their nearest neighbours -- below the store's floor,
:mod:`hypermem.store.nearest_floor` -- is a text from elsewhere: it stays a root (unless it
names its parent), and the meta
says why (``"reason"``, ``"nearest"``: its nearest filed cosine, ``"floor"``: the floor; the
candidates it would have had stay in ``"suggested"``).  Every auto-placed memory of a store
with a floor keeps ``"nearest"`` and ``"floor"``, so an agent can see how close the call was
(the measurements: ``experiments/placement_vote/foreign.py``, benchmarks/RESULTS.md).  A store of fewer than
:data:`~hypermem.store.nearest_floor.FLOOR_MIN_MEMORIES` filed memories has no floor.

The candidates and their order come from the store's suggestions (:mod:`hypermem.store.suggest`:
the neighbours' vote, the text's own evidence, the encoder's pair score); this module makes the
decision for each ``"auto"`` item of a checked batch, in order, so that an item may be placed
under an earlier one of the same batch.  A text is not its own parent: a stored memory or an
earlier item whose text is the item's, exactly, is no candidate (it still votes; only the
candidates' texts are read: :func:`~hypermem.store.suggest.first_other_texts`).
"""

from __future__ import annotations

import math
import uuid

import torch

from ..embed.encoder_kind import AUTO_PARENT_KEY
from .encoder_points import hierarchy_encoder, is_hierarchy_encoder
from .mentions import add_title
from .suggest import BLOCK, Suggester, decision_scores, first_other_texts
from .vote import FILED_MIN, VOTE_HOPS, VOTE_K, chance_share, filed_share, neighbour_vote

__all__ = ["AUTO", "KEPT", "META_KEY", "resolve_auto"]

AUTO = "auto"
"""The ``parent=`` value that asks the store for the parent."""
META_KEY = AUTO_PARENT_KEY
"""The meta key where an auto-placed memory keeps its parent's choice (``"auto_parent"``)."""
KEPT = 3
"""Suggestions kept in an auto-placed memory's meta."""
WALK = KEPT
"""How far down the voted list ``parent="auto"`` looks for a candidate whose pair score passes
the threshold (``None``: the whole list).  Three, the suggestions an auto-placed memory shows:
on two hierarchies of docstrings (Python's class tree and its standard library, 10-minute
encoders, 10% of the entities held out, two seeds) walking past them placed 0-2 more held-out
texts within 2 hops while attaching 6-58 points more of 200 conversation turns from elsewhere,
and in the household example it filed a bicycle note under "the aspirin" from rank 26
(``experiments/placement_vote/walk.py``; benchmarks/RESULTS.md)."""


def finite_or_none(x: float) -> float | None:
    """``x`` when finite (JSON holds it), else None: a threshold of -inf ("always attach") is kept as null."""
    return float(x) if math.isfinite(x) else None


def resolve_auto(sug: Suggester, batch, emb: torch.Tensor) -> None:
    """Replace each ``"auto"`` parent of a checked batch by the encoder's choice (module
    docstring) and record it in the item's meta; call it under the store's lock."""
    auto = [i for i, p in enumerate(batch.parents) if p == AUTO]
    if not auto:
        return
    st = sug.memory.state
    enc = sug.memory.embedder
    hier = is_hierarchy_encoder(enc)
    if not hier:
        if AUTO in st.records or AUTO in batch.ids:
            return  # a memory whose id is "auto"
        if not (sug.holds_tree() or any(p not in (None, AUTO) for p in batch.parents[: auto[0]])):
            hierarchy_encoder(sug.memory, "parent='auto' in a store that holds no tree (no memory has a parent)")
    thr = getattr(enc, "threshold", None) if hier else -math.inf  # no threshold: the vote's choice
    if thr is None:
        raise ValueError("parent='auto' needs the encoder's threshold (chosen on validation by "
                         "fit_hierarchy_encoder); this encoder has none: pass parent=<id> or set encoder.threshold")
    for i in auto:
        if META_KEY in batch.metas[i]:
            raise ValueError(f"the meta of an auto-placed memory holds {META_KEY!r} itself; rename that key")
    taken = set(st.records) | {i for i in batch.ids if i is not None}
    ids = list(batch.ids)
    for j, i in enumerate(ids):  # fresh ids now, so that a later item may name an earlier one as parent
        while i is None or (batch.ids[j] is None and i in taken):
            i = uuid.uuid4().hex[:16]
        ids[j] = i
        taken.add(i)
    batch.ids = ids
    tree = sug.holds_tree() or not hier  # once a memory has a parent, later items vote (as one add would)
    pos = {i: j for j, i in enumerate(batch.ids)}

    def parent_of(i: str) -> str | None:  # earlier items' parents are declared or already chosen
        return batch.parents[pos[i]] if i in pos else st.records.parent(i)

    unit = None   # the batch's unit vectors, when an item first votes
    titles: dict = {}   # the titles of the batch's items before the current one (store.mentions)
    titled = 0
    kids: dict[str, int] = {}   # children among the batch's earlier items
    extra: dict[str, list[int]] = {}   # the batch's earlier items 1, 2, 3 links below a memory (the chance share)
    placed = 0

    def chance(c: str) -> float:   # store.vote.chance_share over the stored tree and the earlier items
        base = sug.below(c) if c in st.row else [0] * VOTE_HOPS
        more = extra.get(c, ())
        return chance_share([b + (more[h] if more else 0) for h, b in enumerate(base)], st.n + placed)

    counted = 0
    filed = torch.tensor([p is not None and p != AUTO for p in batch.parents], dtype=torch.bool)   # batch items in the tree
    floor = sug.floor()   # a text nearer to no memory than this is from elsewhere: a root
    for b0 in range(0, len(auto), BLOCK):
        block = auto[b0: b0 + BLOCK]
        X = emb[block].to(torch.float64)
        upto = max(block)
        near_filed = sug.nearest_filed(X) if floor > -math.inf else None

        sub = None    # the pair scores of the block, when an item first needs them
        near = C = None   # the vote's neighbours among the stored memories and the batch, when an item first votes
        prev = 0
        for j, i in enumerate(block):
            tree = tree or any(p is not None for p in batch.parents[prev:i])
            prev = i
            cand = []
            if tree:
                if near is None:
                    near = sug.neighbours(X, None, VOTE_K) if st.n else ()
                    if unit is None:
                        unit = emb.to(torch.float64) / emb.to(torch.float64).norm(dim=1, keepdim=True).clamp_min(1e-300)
                    C = unit[block] @ unit[:upto].T
                if near:
                    cand = [(st.ids[r], c, 1.0) for c, r in zip(near[0][j].tolist(), near[1][j].tolist())]
                if i:
                    top = torch.topk(C[j, :i], min(VOTE_K, i))
                    cand += [(batch.ids[r], c, 1.0) for c, r in zip(top.values.tolist(), top.indices.tolist())]
                cand = sorted(cand, key=lambda t: -t[1])[:VOTE_K]
            if not tree or (hier and filed_share(cand, parent_of) < FILED_MIN):  # the pair score decides
                if sub is None:
                    sub = _pair_scores(sug, enc, X, block, emb)
                _choose(sug, batch, i, sub[j], thr, X[j], emb, _gate(near_filed, j, floor))
                filed[i] = batch.parents[i] is not None
                continue
            for t in range(titled, i):
                add_title(titles, batch.ids[t], batch.texts[t])
            titled = max(titled, i)
            named = sug.mentions.find(st, batch.texts[i], titles)
            for t in range(placed, i):   # the earlier items now stand below their ancestors
                a = batch.parents[t]
                for h in range(VOTE_HOPS):
                    if a is None:
                        break
                    extra.setdefault(a, [0] * VOTE_HOPS)[h] += 1
                    a = parent_of(a)
            placed = i
            ranked = neighbour_vote(cand, parent_of, mentioned=named, chance=chance)
            ranked = [(c, v) for c, v in ranked   # not its own parent: the voted candidates' texts only
                      if (st.records.text(c) if c in st.row else batch.texts[pos[c]]) != batch.texts[i]]
            best, gate_thr = None, thr
            if ranked:  # the text's own evidence (store.parent_choice); earlier items' children count
                for p in batch.parents[counted:i]:
                    kids[p] = kids.get(p, 0) + 1
                counted = i
                P = torch.stack([st.embedding_column()[st.row[c]] if c in st.row else emb[pos[c]] for c, _ in ranked])
                ranked, P = sug.parent_order(X[j], ranked, sug.mentions.find_first(st, batch.texts[i], titles), P,
                                              lambda c: len(st.children.get(c, ())) + kids.get(c, 0),
                                              batch.texts[i], lambda c: st.records[c].text if c in st.row
                                              else batch.texts[pos[c]])
            at, dec = 0, None
            if ranked and not hier:
                best = {"id": ranked[0][0], "score": ranked[0][1], "rank": 1}
            elif ranked:  # the best-ranked candidate whose pair score passes the threshold
                dec = decision_scores(enc, X[j], P, sug.scan).tolist()
                ok = [q for q, d in enumerate(dec[:WALK]) if d > thr]
                at = 0 if ranked[0][0] in named or not ok else ok[0]
                best = {"id": ranked[at][0], "score": dec[at], "rank": at + 1}
                if ranked[0][0] in named:   # the vote's first choice, named by the text: no gate
                    best["named"], gate_thr = True, -math.inf
            shown = list(range(min(KEPT, len(ranked)))) + ([at] if at >= KEPT else [])   # the choice among them, always
            _decide(batch, i, best, gate_thr, "vote",
                    [suggestion(ranked[q][0], ranked[q][1], None if dec is None else dec[q], thr) for q in shown], thr,
                    _gate(near_filed, j, floor, C[j, :i][filed[:i]] if i else None))
            filed[i] = batch.parents[i] is not None
            if ranked and sug.reranker is not None:   # the choice's provenance (embed.reranker)
                batch.metas[i][META_KEY]["reranker"] = sug.reranker_record()

def _pair_scores(sug: Suggester, enc, X: torch.Tensor, block: list[int], emb: torch.Tensor) -> torch.Tensor:
    """Pair scores of a block of batch items against the ``n`` stored memories, then the
    batch's items (``-inf`` at an item and after it: only earlier items), ``(B, n + upto)``."""
    st = sug.memory.state
    S = sug.stored_scores(enc, X, None) if st.n else torch.zeros(len(block), 0, dtype=torch.float64)
    upto = max(block)
    B = sug.scan.scores(enc, X, emb[:upto]) if upto else torch.zeros(len(block), 0, dtype=torch.float64)
    for j in range(len(block)):
        B[j, block[j]:] = -math.inf
    return torch.cat([S, B], dim=1)

def _choose(sug: Suggester, batch, i: int, scores: torch.Tensor, thr: float, x: torch.Tensor,
            emb: torch.Tensor, gate: dict | None = None) -> None:
    """Item ``i``'s parent by the best subsumption score among the stored memories and the
    earlier items (``scores``: over the ``n`` stored rows, then the batch's items), none of
    item ``i``'s own text."""
    st = sug.memory.state
    n = st.n
    enc = sug.memory.embedder
    texts = st.records.texts
    order = first_other_texts(torch.argsort(-scores, stable=True),   # ties: insertion order, as suggest_parents
                              lambda c: texts[c] if c < n else batch.texts[c - n], batch.texts[i], KEPT)
    order = [c for c in order.tolist() if float(scores[c]) > -math.inf]
    best, kept = None, []
    if order:  # the decision: the best-ranked parent's score at the threshold's lambda
        P = torch.stack([st.embedding_column()[c] if c < n else emb[c - n] for c in order])
        dec = decision_scores(enc, x, P, sug.scan).tolist()
        kept = [suggestion(st.ids[c] if c < n else batch.ids[c - n], float(scores[c]), d, thr)
                for c, d in zip(order, dec)]
        best = {"id": kept[0]["id"], "score": dec[0]}
    _decide(batch, i, best, thr, "subsumption", kept, gate=gate)


def suggestion(id: str, score: float, pair: float | None, thr: float) -> dict:
    """A suggestion as an auto-placed memory's meta keeps it: its ranking value ``score``, and
    with a threshold its pair score at the threshold's ``lambda`` and whether that passes."""
    out = {"id": id, "score": float(score)}
    if pair is not None:
        out["pair"], out["passed"] = float(pair), bool(pair > thr)
    return out


def _gate(near_filed: list[float] | None, j: int, floor: float, batch_cos: torch.Tensor | None = None) -> dict | None:
    """Block item ``j``'s nearest filed cosine (the stored memories', and the filed earlier batch
    items' ``batch_cos``) beside the store's floor; None without a floor."""
    if near_filed is None:
        return None
    near = near_filed[j]
    if batch_cos is not None and batch_cos.numel():
        near = max(near, float(batch_cos.max()))
    return {"nearest": near, "floor": floor}


def _decide(batch, i: int, best: dict | None, thr: float, by: str, kept: list[dict],
            shown: float | None = None, gate: dict | None = None) -> None:
    """Attach item ``i`` to ``best`` when its decision score passes ``thr`` (else a root), and
    keep the choice in its meta (``shown``: the threshold to record, when ``thr`` was lifted
    for a parent the text names; the meta then says ``"named": true``; ``gate``: the text's
    nearest filed cosine and the store's floor, kept in the meta; below the floor the text
    stays a root whatever its score, with ``"reason"``, unless it names the parent)."""
    below = gate is not None and gate["nearest"] < gate["floor"] and not (best or {}).get("named")
    parent = best["id"] if best is not None and best["score"] > thr and not below else None
    batch.parents[i] = parent
    info = {"parent": parent, "score": None if best is None else best["score"],
            "threshold": finite_or_none(thr if shown is None else shown), "by": by, "suggested": kept}
    if parent is not None and "rank" in best:   # where the parent stood in the list (none taken: no rank)
        info["rank"] = best["rank"]
    if best is not None and best.get("named"):
        info["named"] = True
    if gate is not None:
        info.update(gate)
        if below:
            info["reason"] = "below the floor: no filed memory is as near as the store's own are to theirs"
    batch.metas[i] = {**batch.metas[i], META_KEY: info}
