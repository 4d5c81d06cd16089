"""Walk 69: a title ends at a spaced dash too (store.mentions), and an auto-placed memory's meta
says, per suggestion, its pair score and whether it passed the threshold (store.auto_parent)."""

from __future__ import annotations

import math

import pytest
import torch

from hypermem import Memory
from hypermem.store.mentions import SEPARATORS, mentioned, title_end, title_terms

torch.set_num_threads(1)


def test_a_title_ends_at_the_first_colon_or_spaced_dash():
    assert SEPARATORS == (": ", " - ", " \u2013 ", " \u2014 ")
    assert title_terms("strace - trace system calls and signals") == ("strace",)   # a manual page's NAME line
    assert title_terms("gcloud iam - manage IAM roles") == ("gcloud", "iam")
    assert title_terms("tar \u2013 an archiving utility") == ("tar",)               # en dash
    assert title_terms("git \u2014 the stupid content tracker") == ("git",)         # em dash
    assert title_terms("cp - copy: files") == ("cp",) and title_terms("ls: list - directory") == ("ls",)  # the earliest
    assert title_end("cp - copy: files") == 2 and title_end("no separator here") == len("no separator here")
    # an unspaced hyphen is part of a word, and the 1-4 term limit holds before a dash as before a colon
    assert title_terms("able-bodied: having a sound body") == ("abl", "bodi")
    assert title_terms("gcloud compute backend-buckets describe - describe a backend bucket") is None
    assert title_terms("a - b") is None                                              # stop words only
    assert title_terms("x" * 90 + " - y") is None                                    # past the longest title
    # WordNet's "lemma: definition" texts keep their titles (a dash in the definition changes nothing)
    assert title_terms("dog: a member of the genus Canis - a domestic animal") == ("dog",)
    assert title_terms("kookaburra: Australian kingfisher") == ("kookaburra",)


def test_a_text_names_a_memory_whose_title_ends_at_a_dash():
    mem = Memory(hybrid=0.0)
    mem.add("manual page: documentation of a program", id="manual")
    mem.add("strace - trace system calls and signals", id="strace", parent="manual")
    mem.add("gcloud iam - manage IAM roles and service accounts", id="iam", parent="manual")
    find = mem.suggester.mentions.find
    assert find(mem.state, "run strace on the daemon to see its open calls") == ["strace"]
    assert find(mem.state, "gcloud iam policy-bindings delete - delete PolicyBinding instance") == ["iam"]
    assert mentioned("strace output is long", {("strace",): ["s"]}) == ["s"]


# ---------------------------------------------------------------------------- the meta of "auto"
pytest.importorskip("sentence_transformers")

import test_store_vote  # noqa: E402
from encoder_helpers import NAMES, TREE  # noqa: E402
from test_store_vote import depth_first  # noqa: E402

enc = test_store_vote.enc   # the tiny ball encoder, a module fixture


def filed_store(enc) -> Memory:
    m = Memory(embedder=enc)
    m.add_many([{"text": n, "id": n, "parent": TREE.get(n)} for n in depth_first(TREE) if n != "poodle"])
    return m


def pairs_of(enc, text: str, ids: list[str]) -> list[float]:
    return enc.subsumption_scores([text] * len(ids), ids, centripetal_weight=enc.centripetal_weight).tolist()


@pytest.mark.parametrize("tree", [True, False], ids=["vote", "subsumption"])
def test_each_suggestion_keeps_its_pair_score_and_whether_it_passed(enc, tree):
    m = filed_store(enc) if tree else Memory(embedder=enc)
    if not tree:
        m.add_many([{"text": n, "id": n} for n in NAMES if n != "poodle"])
    saved = enc.threshold
    try:
        i = m.add("poodle", parent="auto")
        info = m.get(i).meta["auto_parent"]
        m.remove(i)
        assert info["by"] == ("vote" if tree else "subsumption") and len(info["suggested"]) == 3
        ids = [s["id"] for s in info["suggested"]]
        pairs = pairs_of(enc, "poodle", ids)
        assert [s["pair"] for s in info["suggested"]] == pytest.approx(pairs, abs=1e-4)
        assert [s["passed"] for s in info["suggested"]] == [p > enc.threshold for p in pairs]
        # a threshold between the first and the second suggestion's pair scores
        order = sorted(pairs)
        enc.threshold = (order[0] + order[1]) / 2 if order[0] < order[1] else order[0] - 1e-6
        info = m.get(j := m.add("poodle", parent="auto")).meta["auto_parent"]
        m.remove(j)
        passed = [s["passed"] for s in info["suggested"]]
        assert passed == [p > enc.threshold for p in pairs] and any(passed)
        if tree:   # the vote walks to the first that passes: those above it say why they were skipped
            at = passed.index(True)
            assert info["parent"] == ids[at] and info["rank"] == at + 1 and not any(passed[:at])
        else:      # the pair score decides on its best-ranked suggestion alone
            assert info["score"] == pytest.approx(info["suggested"][0]["pair"])
        # nothing passes: a root, each suggestion's failed pair score shown, and no rank
        enc.threshold = max(pairs) + 1.0
        info = m.get(k := m.add("poodle", parent="auto")).meta["auto_parent"]
        assert m.parent(k) is None and info["parent"] is None and "rank" not in info
        assert not any(s["passed"] for s in info["suggested"])
        assert info["score"] == pytest.approx(info["suggested"][0]["pair"])
    finally:
        enc.threshold = saved


def test_a_text_below_the_floor_keeps_no_rank(enc, monkeypatch):
    import hypermem.store.nearest_floor as nf

    m = filed_store(enc)
    monkeypatch.setattr(nf, "FLOOR_MIN_MEMORIES", 1)
    monkeypatch.setattr(m.suggester, "floor", lambda: math.inf)   # every text is from elsewhere
    saved, enc.threshold = enc.threshold, -math.inf
    try:
        info = m.get(m.add("what did you have for lunch?", parent="auto")).meta["auto_parent"]
    finally:
        enc.threshold = saved
    assert info["parent"] is None and info["reason"].startswith("below the floor") and "rank" not in info
    assert all(s["passed"] for s in info["suggested"])   # they passed the threshold; the floor said no


def test_without_a_threshold_the_suggestions_keep_their_scores_only():
    m = Memory(hybrid=0.0)
    m.add("tools", id="tools")
    m.add_many([{"text": t, "id": t, "parent": "tools"} for t in ("a hammer", "a saw", "a drill")])
    info = m.get(m.add("a hammer drill", parent="auto")).meta["auto_parent"]
    assert info["threshold"] is None and info["rank"] == 1
    assert all(set(s) == {"id", "score"} for s in info["suggested"])
