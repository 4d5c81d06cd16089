"""The neighbours' vote (hypermem.store.vote) and the store's use of it: suggest_parents(by=)
and add(parent="auto") in a store that holds a tree (issue 31)."""

from __future__ import annotations

import math

import pytest
import torch

from hypermem.store import auto_parent
from hypermem.store.mentions import MENTION_SHARE, add_title, first_mentioned, mentioned, title_terms
from hypermem.store.parent_choice import placement_order
from hypermem.store.vote import neighbour_vote

PARENT = {"poodle": "dog", "beagle": "dog", "dog": "mammal", "mammal": "animal", "animal": "entity",
          "tabby": "cat", "cat": "mammal"}


def test_each_neighbour_votes_for_itself_and_its_ancestors_with_decay():
    got = dict(neighbour_vote([("poodle", 1.0, 1.0), ("tabby", 0.5, 1.0)], PARENT.get,
                              alpha=1.0, decay=0.5, self_weight=0.25, hops=3))
    total = 1.5
    assert got["poodle"] == pytest.approx(0.25 / total)
    assert got["dog"] == pytest.approx(1.0 / total)
    assert got["mammal"] == pytest.approx((0.5 + 0.5 * 0.5) / total)   # 2 hops from poodle, 2 from tabby
    assert got["animal"] == pytest.approx((0.25 + 0.5 * 0.25) / total)    # 3 hops from each
    assert got["cat"] == pytest.approx(0.5 / total)
    assert got["tabby"] == pytest.approx(0.125 / total)
    assert "entity" not in got                                          # 4 hops: beyond hops=3
    ranked = neighbour_vote([("poodle", 1.0, 1.0), ("tabby", 0.5, 1.0)], PARENT.get, alpha=1.0, decay=0.5,
                            self_weight=0.25, hops=3)
    assert [c for c, _ in ranked][:2] == ["dog", "mammal"]
    assert [v for _, v in ranked] == sorted((v for _, v in ranked), reverse=True)


def test_alpha_time_factor_negative_cosines_allowed_and_cycles():
    # alpha sharpens the weights; a time factor scales a neighbour's vote; cos <= 0 casts none
    got = dict(neighbour_vote([("poodle", 0.5, 1.0), ("tabby", 0.5, 0.25), ("beagle", -0.9, 1.0)], PARENT.get,
                              alpha=2.0, decay=1.0, self_weight=0.0, hops=1))
    w_p, w_t = 0.25, 0.25 * 0.25
    assert got == pytest.approx({"poodle": 0.0, "dog": w_p / (w_p + w_t), "tabby": 0.0, "cat": w_t / (w_p + w_t)})
    # a candidate that is not allowed gets nothing, its own ancestors still do
    got = dict(neighbour_vote([("poodle", 1.0, 1.0)], PARENT.get, lambda i: i != "dog", hops=2))
    assert "dog" not in got and "mammal" in got
    # no positive weight: nothing to suggest; a parent cycle ends the walk
    assert neighbour_vote([("poodle", -1.0, 1.0)], PARENT.get) == []
    loop = {"a": "b", "b": "a"}
    assert dict(neighbour_vote([("a", 1.0, 1.0)], loop.get, self_weight=1.0, decay=1.0, hops=5)) == {"a": 1.0, "b": 1.0}


# ---------------------------------------------------------------------------- any embedder, a filed store
FILED = [("living thing", None), ("animal", "living thing"), ("plant", "living thing"), ("dog", "animal"),
         ("cat", "animal"), ("dog breed poodle", "dog"), ("dog breed beagle", "dog"), ("cat breed tabby", "cat"),
         ("tree oak", "plant"), ("tree pine", "plant")]


def named(mem, text, first=False):
    """The stored memories that ``text`` names (``first``: the first it names), from their texts
    (hypermem.store.mentions)."""
    titles: dict = {}
    for i in mem.ids:
        add_title(titles, i, mem.get(i).text)
    return (first_mentioned if first else mentioned)(text, titles)


def by_chance(mem):
    """Each memory's chance share, by hand: (self + D1 + decay D2 + decay^2 D3) / N."""
    from hypermem.store.vote import VOTE_DECAY, VOTE_SELF

    def chance(c):
        d1 = list(mem.children(c))
        d2 = [g for k in d1 for g in mem.children(k)]
        d3 = sum(len(mem.children(g)) for g in d2)
        return (VOTE_SELF + len(d1) + VOTE_DECAY * len(d2) + VOTE_DECAY ** 2 * d3) / len(mem)
    return chance


def plain_vote(mem, text, names=True):
    """The vote from the store's own embeddings (the hashing embedder), its declared parents and
    (``names``) the memories the text names, re-ranked by the text's evidence as ``parent="auto"``
    ranks (hypermem.store.parent_choice: the first named memory, the cosine, the children)."""
    from hypermem.store.vote import VOTE_K

    q = mem.embedder.embed([text])[0].double()
    ids = list(mem.ids)
    E = torch.stack([mem.embedding(i) for i in ids]).double()
    cos = (E @ q) / (E.norm(dim=1) * q.norm())
    top = torch.topk(cos, min(VOTE_K, len(ids)))
    ranked = neighbour_vote([(ids[r], c, 1.0) for c, r in zip(top.values.tolist(), top.indices.tolist())], mem.parent,
                            mentioned=named(mem, text) if names else (), chance=by_chance(mem) if names else None)
    return reranked(mem, text, ranked, ids, cos) if names else ranked


def reranked(mem, text, ranked, ids, cos):
    """The vote ``ranked`` re-ranked by the text's own evidence (hypermem.store.parent_choice), with
    ``cos`` the cosine of the text and each of ``ids``."""
    at = {i: j for j, i in enumerate(ids)}
    return placement_order(ranked, set(named(mem, text, first=True)), [float(cos[at[c]]) for c, _ in ranked],
                           lambda c: len(mem.children(c)))


def test_a_filed_store_votes_with_any_embedder():
    from hypermem import Memory

    m = Memory()                                   # the hashing embedder: no encoder, no threshold
    m.add_many([{"text": t, "id": t, "parent": p} for t, p in FILED])
    want = plain_vote(m, "dog breed husky")
    got = m.suggest_parents("dog breed husky", k=3)
    assert [h.id for h in got] == [c for c, _ in want[:3]] and want[0][0] in ("dog", "dog breed poodle")
    assert [h.score for h in got] == pytest.approx([v for _, v in want[:3]])
    q = m.embedder.embed(["dog breed husky"])[0].double()
    assert got[0].distance == pytest.approx(1 - float(torch.cosine_similarity(m.embedding(got[0].id).double(), q,
                                                                               dim=0)))
    # the ancestors search ranks by the vote alone (no names, no re-ranking)
    assert [h.id for h in m.search("dog breed husky", mode="ancestors", k=3)] == \
        [c for c, _ in plain_vote(m, "dog breed husky", names=False)[:3]]
    i = m.add("dog breed husky", parent="auto")
    info = m.get(i).meta["auto_parent"]
    assert m.parent(i) == want[0][0] == info["parent"] and info["by"] == "vote" and info["threshold"] is None
    assert info["score"] == pytest.approx(want[0][1])
    with pytest.raises(ValueError, match="holds no tree"):
        m.suggest_parents("dog", by="subsumption")   # the pair score is a hierarchy encoder's


def test_a_flat_store_without_an_encoder_still_refuses_auto_and_stores_nothing():
    from hypermem import Memory

    m = Memory()
    m.add("animal", id="animal")
    with pytest.raises(ValueError, match="holds no tree"):
        m.add_many([{"text": "dog", "parent": "auto"}, {"text": "cat", "id": "cat", "parent": "animal"}])
    assert len(m) == 1
    # a parent declared earlier in the same batch makes a tree: the auto item votes
    a, b, c = m.add_many([{"text": "cat", "id": "cat", "parent": "animal"}, {"text": "dog", "id": "dog"},
                          {"text": "cat breed tabby", "parent": "auto"}])
    assert m.parent(c) in ("cat", "animal") and m.get(c).meta["auto_parent"]["by"] == "vote"


# ---------------------------------------------------------------------------- the memories a text names
def test_titles_and_the_memories_a_text_mentions():
    assert title_terms("the dishwasher") == ("dishwash",)              # stop words out, Porter stems
    assert title_terms("dog: a member of the genus Canis") == ("dog",)  # the text before ": "
    assert title_terms("the dishwasher filter needs rinsing every month") is None   # 5 terms: no title
    assert title_terms("the") is None and title_terms("") is None
    assert title_terms("kitchen " * 11) is None and title_terms("pneumonoultramicroscopicsilicovolcanoconiosis" * 2) is None
    titles: dict = {}
    for i, t in [("d", "the dishwasher"), ("k", "kingfisher: a bird"), ("t", "tree: a tall plant"),
                 ("c", "ceiling"), ("a", "absolute ceiling: the highest"), ("c2", "ceiling: a limit")]:
        add_title(titles, i, t)
    assert mentioned("the dishwasher filter needs rinsing", titles) == ["d"]
    assert mentioned("Achras: tropical trees having papery leaves", titles) == ["t"]       # a plural
    assert mentioned("kookaburra: Australian kingfisher having a loud cry", titles) == ["k"]
    # a compound names its head word; a text's own title (another sense) is not its parent
    assert mentioned("absolute ceiling: the maximum altitude", titles) == ["c", "c2"]
    assert mentioned("ceiling: the overhead upper surface of a room", titles) == []
    assert mentioned("the ceiling of the absolute ceiling", titles) == ["c", "c2", "a"]   # shorter titles first
    assert mentioned("a shiny kettle", titles, {title_terms("kettle"): ["x"]}) == ["x"]   # more maps: a batch


def test_a_mentioned_memory_adds_mu_to_its_share():
    base = dict(neighbour_vote([("poodle", 1.0, 1.0)], PARENT.get, alpha=1.0, decay=0.5, self_weight=0.25, hops=2))
    got = dict(neighbour_vote([("poodle", 1.0, 1.0)], PARENT.get, alpha=1.0, decay=0.5, self_weight=0.25, hops=2,
                              mentioned=["mammal", "cat"], mention=0.3))
    assert got["mammal"] == pytest.approx(base["mammal"] + 0.3) and got["cat"] == pytest.approx(0.3)
    assert {c: v for c, v in got.items() if c not in ("mammal", "cat")} == pytest.approx(
        {c: v for c, v in base.items() if c != "mammal"})
    ranked = neighbour_vote([("poodle", 1.0, 1.0)], PARENT.get, alpha=1.0, decay=0.5, self_weight=0.25, hops=2,
                            mentioned=["mammal"], mention=1.0)
    assert ranked[0][0] == "mammal"
    # a mentioned memory that may not be suggested gets nothing; no neighbour weight: nothing at all
    assert "cat" not in dict(neighbour_vote([("poodle", 1.0, 1.0)], PARENT.get, lambda i: i != "cat",
                                            mentioned=["cat"]))
    assert neighbour_vote([("poodle", -1.0, 1.0)], PARENT.get, mentioned=["cat"]) == []
    assert MENTION_SHARE > 0


def test_the_first_memory_a_text_names_and_the_order_by_the_texts_evidence():
    titles: dict = {}
    for i, t in [("k", "kingfisher"), ("k2", "kingfisher: a blue bird"), ("b", "bird"), ("pi", "percussion instrument"),
                 ("p", "percussion"), ("d", "the dishwasher"), ("l", "list"), ("m", "mail")]:
        add_title(titles, i, t)
    assert first_mentioned("kookaburra: Australian kingfisher, a bird", titles) == ["k", "k2"]   # every sense
    assert first_mentioned("xylophone: a percussion instrument with bars", titles) == ["pi"]   # the longest run there
    assert first_mentioned("the dishwasher filter needs rinsing every month", titles) == ["d"]   # no title
    assert first_mentioned("dishwasher percussion", titles) == []     # all title (a compound): no first memory
    assert first_mentioned("mailing list: a list of names", titles) == ["l"]           # after its own title
    assert first_mentioned("bird: a warm-blooded egg-laying vertebrate", titles) == []  # its own title names nothing
    assert first_mentioned("a small bird and a kingfisher sat in the old tree", titles, {title_terms("small bird"): ["z"]}) \
        == ["z"]
    # share + nu [first] + a cos + b log(1 + children), the best first
    got = placement_order([("x", 0.5), ("y", 0.4), ("z", 0.1)], {"z"}, [0.1, 0.2, 0.9], {"x": 0, "y": 3, "z": 1}.get,
                          nu=0.2, a=0.5, b=0.1)
    want = {"x": 0.5 + 0.05, "y": 0.4 + 0.1 + 0.1 * math.log(4), "z": 0.1 + 0.2 + 0.45 + 0.1 * math.log(2)}
    assert got == [(c, pytest.approx(want[c])) for c in ("z", "y", "x")]
    assert [c for c, _ in placement_order([("x", 0.5), ("y", 0.5)], set(), [0.3, 0.3], lambda c: 0)] == ["x", "y"]
    with pytest.raises(ValueError, match="one cosine per candidate"):
        placement_order([("x", 0.5)], set(), [], lambda c: 0)


HOUSE = [("appliance", None), ("tool", None), ("the kettle", "appliance"), ("the toaster", "appliance"),
         ("the cordless drill", "tool"), ("the hammer", "tool"), ("the kettle holds a litre and a half", "the kettle"),
         ("the toaster crumb tray is full", "the toaster"), ("the hammer handle is cracked", "the hammer")]


def test_the_store_adds_the_mention_term_and_its_titles_follow_the_store(monkeypatch):
    from functools import partial

    import hypermem.store.auto_parent as auto_parent
    import hypermem.store.suggest as suggest
    from hypermem import Memory

    m = Memory()
    m.add_many([{"text": t, "id": t, "parent": p} for t, p in HOUSE])
    note = "the cordless drill battery is flat"
    assert named(m, note) == ["the cordless drill"]
    got = m.suggest_parents(note, k=3)
    assert [(h.id, h.score) for h in got] == [(c, pytest.approx(v)) for c, v in plain_vote(m, note)[:3]]
    with monkeypatch.context() as mp:    # the term is the only difference
        mp.setattr(suggest, "neighbour_vote", partial(neighbour_vote, mention=0.0))
        plain = {h.id: h.score for h in m.suggest_parents(note, k=3)}
    # the root-free ancestors search ranks by the vote alone
    assert [(h.id, h.score) for h in m.search(note, mode="ancestors", k=3)] == \
        [(c, pytest.approx(v)) for c, v in plain_vote(m, note, names=False)[:3]]
    assert {h.id: h.score for h in got} == pytest.approx(
        {i: v + MENTION_SHARE * (i == "the cordless drill") for i, v in plain.items()})
    # every tool votes for the kind, but so would any tool's neighbourhood: less its chance share
    # (store.vote) the named thing wins at the default mu; a larger mu files the note under the
    # thing too, in one add and in a batch whose earlier item it names
    assert got[0].id == "the cordless drill"
    monkeypatch.setattr(suggest, "neighbour_vote", partial(neighbour_vote, mention=1.0))
    monkeypatch.setattr(auto_parent, "neighbour_vote", partial(neighbour_vote, mention=1.0))
    i = m.add(note, parent="auto")
    assert m.parent(i) == "the cordless drill" and m.get(i).meta["auto_parent"]["by"] == "vote"
    a, b = m.add_many([{"text": "the blender", "id": "bl", "parent": "appliance"},
                       {"text": "the blender jar is cracked", "parent": "auto"}])
    assert m.parent(b) == "bl"
    # the titles follow the store: a new memory is named at once, a rewritten one by its new text, a removed one no more
    find = m.suggester.mentions.find
    m.add("the microwave", id="mw", parent="appliance")
    assert find(m.state, "the microwave clock is wrong") == ["mw"]
    m.update("mw", text="the rice cooker")
    assert find(m.state, "the microwave clock") == [] and find(m.state, "the rice cooker lid") == ["mw"]
    m.remove("mw")
    assert find(m.state, "the rice cooker lid") == []
    assert find(m.state, "hammer handle", {title_terms("handle"): ["z"]}) == ["the hammer", "z"]


# ---------------------------------------------------------------------------- in the store
pytest.importorskip("sentence_transformers")

from encoder_helpers import EDGES, NAMES, TREE, inspected_panel, tiny_model_folder  # noqa: E402

from hypermem import Memory  # noqa: E402
from hypermem.embed import HierarchyEncoder  # noqa: E402
from hypermem.hierarchy.encoder_training import fit_hierarchy_encoder  # noqa: E402
from hypermem.store.vote import VOTE_K  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def enc(tmp_path_factory):
    tiny = tiny_model_folder(tmp_path_factory.mktemp("tiny"))
    out = tmp_path_factory.mktemp("enc") / "ball"
    val = [("beagle", "dog"), ("tulip", "flower")]
    fit_hierarchy_encoder([e for e in EDGES if e not in val], NAMES, base=str(tiny), geometry="poincare", epochs=2,
                          batch_size=8, lr=2e-3, validate_every=4, validation_edges=val, out=str(out), seed=1)
    return HierarchyEncoder.load(out)


def depth_first(tree: dict[str, str]) -> list[str]:
    """Every name of ``tree`` (child -> parent), parents before children."""
    kids: dict[str, list[str]] = {}
    for c, p in tree.items():
        kids.setdefault(p, []).append(c)
    order, stack = [], [n for n in set(tree.values()) if n not in tree]
    while stack:
        n = stack.pop()
        order.append(n)
        stack += kids.get(n, [])
    return order


@pytest.fixture
def filed(enc):
    """A store holding the tree minus "poodle" and "tabby" (the texts to place)."""
    m = Memory(embedder=enc)
    m.add_many([{"text": n, "id": n, "parent": TREE.get(n), "meta": {"kind": "x" if n == "dog" else "y"}}
                for n in depth_first(TREE) if n not in ("poodle", "tabby")])
    return m


def expected_vote(enc, mem, text, allowed=None):
    """The vote computed from the encoder's own vectors and the declared tree; with ``allowed``
    (a filter), among the allowed memories only: they vote and they are the candidates."""
    q = enc.encode([text])[0].double()
    ids = [i for i in mem.ids if allowed is None or allowed(i)]
    E = torch.stack([mem.embedding(i) for i in ids]).double()
    cos = (E @ q) / (E.norm(dim=1) * q.norm())
    top = torch.topk(cos, min(VOTE_K, len(ids)))
    return reranked(mem, text, neighbour_vote([(ids[r], c, 1.0) for c, r in zip(top.values.tolist(),
                                                                                  top.indices.tolist())],
                                              mem.parent, allowed, mentioned=named(mem, text),
                                              chance=by_chance(mem)), ids, cos)


def test_a_filed_store_suggests_by_the_vote_and_a_flat_one_by_the_score(enc, filed):
    want = expected_vote(enc, filed, "poodle")
    got = filed.suggest_parents("poodle", k=4)
    assert [h.id for h in got] == [c for c, _ in want[:4]]
    assert [h.score for h in got] == pytest.approx([v for _, v in want[:4]], abs=1e-9)
    pair = enc.subsumption_scores(["poodle"] * 4, [h.id for h in got]).tolist()
    assert [-h.distance for h in got] == pytest.approx(pair, abs=1e-4)   # distance: still -s of the pair
    sub = filed.suggest_parents("poodle", k=4, by="subsumption")
    scores = enc.subsumption_scores(["poodle"] * len(filed), list(filed.ids)).tolist()
    assert [h.id for h in sub] == [list(filed.ids)[j] for j in sorted(range(len(filed)), key=lambda j: -scores[j])[:4]]
    # the same texts without the tree: "auto" ranks by the score
    flat = Memory(embedder=enc)
    flat.add_many([{"text": i, "id": i} for i in list(filed.ids)])
    assert [h.id for h in flat.suggest_parents("poodle", k=4)] == [h.id for h in sub]
    # the vote in a flat store: each neighbour votes only for itself, so it is the cosine order
    assert [h.id for h in flat.suggest_parents("poodle", k=4, by="vote")] == [
        c for c, _ in expected_vote(enc, flat, "poodle")[:4]] == [c for c, _ in sorted(
            ((i, float(torch.cosine_similarity(flat.embedding(i), enc.encode(["poodle"])[0].double(), dim=0)))
             for i in flat.ids), key=lambda t: -t[1])[:4]]
    with pytest.raises(ValueError, match="by must be one of"):
        filed.suggest_parents("poodle", by="cones")


def test_the_vote_respects_filters_and_the_index_variant(enc, filed):
    top = filed.suggest_parents("poodle", k=1)[0].id
    flt = filed.suggest_parents("poodle", k=3, filters=lambda r: r.id != top)
    assert top not in [h.id for h in flt] and flt
    want = expected_vote(enc, filed, "poodle", allowed=lambda i: i != top)
    assert [h.id for h in flt] == [c for c, _ in want[:3]]
    idx = filed.suggest_parents("poodle", k=3, use_index=True, oversample=50)   # the pool holds every memory
    assert [h.id for h in idx] == [h.id for h in filed.suggest_parents("poodle", k=3)]


def test_auto_parent_in_a_filed_store_takes_the_vote_and_keeps_why(enc, filed, monkeypatch):
    want = expected_vote(enc, filed, "poodle")
    saved = enc.threshold
    try:
        enc.threshold = -math.inf
        i = filed.add("poodle", parent="auto")
        info = filed.get(i).meta["auto_parent"]
        assert filed.parent(i) == want[0][0] == info["parent"] and info["by"] == "vote" and info["rank"] == 1
        assert [s["id"] for s in info["suggested"]] == [c for c, _ in want[:3]]
        assert [s["score"] for s in info["suggested"]] == pytest.approx([v for _, v in want[:3]])
        pair = float(enc.subsumption_scores(["poodle"], [want[0][0]], centripetal_weight=enc.centripetal_weight))
        assert info["score"] == pytest.approx(pair, abs=1e-4)
        filed.remove(i)
        # the vote's choice below the threshold: the best-voted candidate that passes it
        pairs = enc.subsumption_scores(["poodle"] * len(want), [c for c, _ in want],
                                       centripetal_weight=enc.centripetal_weight).tolist()
        enc.threshold = pairs[0] + 1e-3
        passing = [c for c, s in zip(want, pairs) if s > enc.threshold]
        j = filed.add("poodle", parent="auto")
        assert filed.parent(j) == (passing[0][0] if passing else None)
        filed.remove(j)
        # only a candidate below the three shown passes (the fifth): listed after them, with its rank
        real = auto_parent.decision_scores
        monkeypatch.setattr(auto_parent, "decision_scores", lambda *a: torch.where(
            torch.arange(len(a[2])) == 4, torch.tensor(0.0, dtype=torch.float64), real(*a).to(torch.float64) - 1e6))
        enc.threshold = -1.0
        j = filed.add("poodle", parent="auto")   # the walk stops at the three shown (WALK): a root
        shown = [x["id"] for x in filed.get(j).meta["auto_parent"]["suggested"]]
        assert filed.parent(j) is None and shown == [c for c, _ in want[:3]] and filed.remove(j) == [j]
        monkeypatch.setattr(auto_parent, "WALK", None)   # the whole list
        info = filed.get(j := filed.add("poodle", parent="auto")).meta["auto_parent"]
        monkeypatch.undo()
        assert filed.parent(j) == want[4][0] == info["parent"] and info["rank"] == 5 and info["score"] == 0.0
        assert [x["id"] for x in info["suggested"]] == [c for c, _ in want[:3]] + [want[4][0]]
        filed.remove(j)
        enc.threshold = max(pairs) + 1e-3   # no candidate passes: a root, and why
        j = filed.add("poodle", parent="auto")
        assert filed.parent(j) is None and filed.get(j).meta["auto_parent"]["parent"] is None
        assert filed.get(j).meta["auto_parent"]["score"] == pytest.approx(pairs[0], abs=1e-4)
        filed.remove(j)
        # add_many: the batch's earlier items vote with the parents chosen for them
        enc.threshold = -math.inf
        a, b = filed.add_many([{"text": "poodle", "parent": "auto"}, {"text": "tabby", "parent": "auto"}])
        one = expected_vote(enc, filed, "tabby")
        assert filed.parent(b) == one[0][0]   # poodle is stored now: the same vote as one add after the other
    finally:
        enc.threshold = saved


def test_a_parent_the_text_names_and_the_vote_puts_first_needs_no_threshold(enc, filed, monkeypatch):
    from functools import partial

    import hypermem.store.auto_parent as auto_parent
    import hypermem.store.suggest as suggest

    saved = enc.threshold
    try:
        enc.threshold = math.inf   # no pair score passes
        text = "poodle: a curly dog"
        j = filed.add(text, parent="auto")
        top = filed.get(j).meta["auto_parent"]["suggested"][0]["id"]
        named_first = top == "dog"
        assert filed.parent(j) == ("dog" if named_first else None)
        filed.remove(j)
        # a term strong enough to put the named memory first: attached though no score passes, and the meta says why
        monkeypatch.setattr(suggest, "neighbour_vote", partial(neighbour_vote, mention=5.0))
        monkeypatch.setattr(auto_parent, "neighbour_vote", partial(neighbour_vote, mention=5.0))
        j = filed.add(text, parent="auto")
        info = filed.get(j).meta["auto_parent"]
        assert filed.parent(j) == "dog" == info["parent"] and info["named"] is True and info["threshold"] is None
        assert info["score"] < math.inf and info["by"] == "vote"
        filed.remove(j)
        enc.threshold = 1e9     # a finite threshold is recorded as it is
        j = filed.add(text, parent="auto")
        assert filed.parent(j) == "dog" and filed.get(j).meta["auto_parent"]["threshold"] == 1e9
        filed.remove(j)
        # a text that names nothing: the threshold decides, a root
        j = filed.add("poodle", parent="auto")
        assert filed.parent(j) is None and "named" not in filed.get(j).meta["auto_parent"]
    finally:
        enc.threshold = saved


def test_a_durable_filed_store_votes_and_keeps_the_choice(enc, tmp_path):
    path = tmp_path / "filed.db"
    saved = enc.threshold
    try:
        enc.threshold = -math.inf
        with Memory.open(path, embedder=enc) as m:
            m.add_many([{"text": n, "id": n, "parent": TREE.get(n)} for n in depth_first(TREE)
                        if n not in ("poodle", "tabby")])
            want = expected_vote(enc, m, "poodle")
            i = m.add("poodle", parent="auto")
            assert m.parent(i) == want[0][0] and m.get(i).meta["auto_parent"]["by"] == "vote"
            j, = m.add_many([{"text": "tabby", "parent": "auto"}])
            chosen = m.parent(j)
        with Memory.open(path, embedder=enc) as m:   # what was chosen is what is stored
            assert m.parent(i) == want[0][0] and m.parent(j) == chosen
            assert m.get(j).meta["auto_parent"]["parent"] == chosen
            assert [h.id for h in m.suggest_parents("poodle", k=3)] == [c for c, _ in expected_vote(enc, m, "poodle")[:3]]
    finally:
        enc.threshold = saved


def test_the_page_shows_a_voted_placement_as_vote_shares(enc, filed, tmp_path):
    saved = enc.threshold
    try:
        enc.threshold = -1e9    # finite: the page shows it
        i = filed.add("poodle", parent="auto", id="poodle")
    finally:
        enc.threshold = saved
    info = filed.get(i).meta["auto_parent"]
    panel, links, _ = inspected_panel(filed, tmp_path / "page.html", "poodle")
    assert "suggested parents (vote score)" in panel and "pair score" in panel and "threshold" in panel
    assert [t.rsplit(" (", 1)[0] for t in links] == [s["id"] for s in info["suggested"]]


def test_mcp_remember_auto_votes_in_a_filed_store_with_any_embedder():
    mcp = pytest.importorskip("hypermem.integrations.mcp_server")
    import asyncio

    from hypermem import Memory

    m = Memory()
    app = mcp.build_server(m)
    with pytest.raises(Exception, match="holds a tree"):
        asyncio.run(app.call_tool("remember", {"text": "dog breed husky", "parent": "auto"}))
    m.add_many([{"text": t, "id": t, "parent": p} for t, p in FILED])
    want = plain_vote(m, "dog breed husky")[0][0]
    out = str(asyncio.run(app.call_tool("remember", {"text": "dog breed husky", "parent": "auto"})))
    assert f'"parent": "{want}"' in out or f"'parent': '{want}'" in out
    ranked = [h.id for h in m.search("dog breed beagle", mode="ancestors", k=3)]
    hits = str(asyncio.run(app.call_tool("recall", {"query": "dog breed beagle", "mode": "ancestors", "k": 3})))
    assert ranked and all(i in hits for i in ranked)     # the store's voted ancestors, not "needs root"


def test_a_neighbourhood_of_roots_falls_back_to_the_pair_score(enc):
    from hypermem.store.vote import FILED_MIN, filed_share

    m = Memory(embedder=enc)
    words = ["entity", "animal", "mammal", "bird", "dog", "cat", "plant", "tree", "oak", "vehicle", "tool"]
    m.add_many([{"text": w, "id": w} for w in words] + [{"text": "hammer", "id": "hammer", "parent": "tool"}])
    q = enc.encode(["poodle"])[0].double()
    E = torch.stack([m.embedding(i) for i in m.ids]).double()
    cos = ((E @ q) / (E.norm(dim=1) * q.norm())).tolist()
    share = filed_share([(i, c, 1.0) for i, c in zip(m.ids, cos)], m.parent)
    assert m.suggester.holds_tree() and share < FILED_MIN    # a tree, but not around "poodle"
    sub = [h.id for h in m.suggest_parents("poodle", k=4, by="subsumption")]
    assert [h.id for h in m.suggest_parents("poodle", k=4)] == sub
    assert [h.id for h in m.search("poodle", mode="ancestors", k=4)] == sub
    saved = enc.threshold
    try:
        enc.threshold = -math.inf
        i = m.add("poodle", parent="auto")
        assert m.get(i).meta["auto_parent"]["by"] == "subsumption" and m.parent(i) == sub[0]
    finally:
        enc.threshold = saved
    # asked for, the vote answers all the same, less the stored "poodle" (a text is not its own parent)
    assert [h.id for h in m.suggest_parents("poodle", k=4, by="vote")] == [
        c for c, _ in expected_vote(enc, m, "poodle") if c != i][:4]
