"""benchmarks/bench_locomo.py on a tiny conversation written here in LoCoMo's format (the real data
is CC BY-NC and stays in its folder): the loader's normalisation, the metrics, every system's run."""

from __future__ import annotations

import json

import pytest

from hypermem import HashingEmbedder

pytest.importorskip("rank_bm25")
from benchmarks import bench_locomo as B  # noqa: E402
from benchmarks.locomo_data import load, metrics  # noqa: E402

SESSION_1 = [("Ann", "I adopted a puppy called Biscuit last week"), ("Bob", "What breed is it?"),
             ("Ann", "A beagle, she loves the garden"), ("Bob", "I started painting sunsets")]
SESSION_2 = [("Ann", "Biscuit chewed my shoes"), ("Bob", "My painting won a prize at the fair"),
             ("Ann", "Congratulations, what did you paint?"), ("Bob", "The lake at dawn")]


def _conversation(folder, name="01"):
    d = {"speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023",
         "session_2_date_time": "10:00 am on 20 June, 2023"}
    for s, turns in ((1, SESSION_1), (2, SESSION_2)):
        d[f"session_{s}"] = [{"speaker": sp, "dia_id": f"D{s}:{i + 1}", "text": t} for i, (sp, t) in enumerate(turns)]
    d["session_1"][3]["blip_caption"] = "a photo of an orange sunset"
    d["qa"] = [{"question": "What is the name of Ann's puppy?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
               {"question": "What breed is the puppy?", "answer": "beagle", "evidence": ["D1:2; D1:3"], "category": 1},
               {"question": "What did Bob's prize painting show?", "answer": "a lake", "evidence": ["D:2:2", "D2:04"],
                "category": 2},
               {"question": "Who is the king?", "answer": "-", "evidence": ["D1:1"], "category": 5},
               {"question": "What about D9?", "answer": "-", "evidence": ["D9:1"], "category": 3}]
    (folder / f"{name}.json").write_text(json.dumps(d))


def test_the_loader_normalises_evidence_and_counts_what_it_drops(tmp_path):
    _conversation(tmp_path)
    (conv,), counts = load(tmp_path)
    assert counts == {"questions": 5, "category_5": 1, "no_evidence": 1, "evidence_dropped": 1, "kept": 3}
    assert [q["evidence"] for q in conv.questions] == [[0], [1, 2], [5, 7]]      # D:2:2 is D2:2, D2:04 D2:4
    assert conv.turn_texts[3] == "Bob: I started painting sunsets [shares a photo of an orange sunset]"
    assert [s for s, _ in conv.sessions] == [1, 2] and conv.turn_session == [0, 0, 0, 0, 1, 1, 1, 1]


def test_metrics_are_recall_at_k_and_the_first_evidence_rank():
    qs = [{"evidence": [2, 5], "category": 1}, {"evidence": [0], "category": 4}]
    m = metrics([[2, 1, 0, 3, 4, 6, 7, 8, 9, 10, 5], [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]], qs)
    assert m["multi-hop"]["R@1"] == 0.5 and m["multi-hop"]["R@10"] == 0.5 and m["multi-hop"]["R@20"] == 1.0
    assert m["single-hop"]["MRR"] == pytest.approx(1 / 10) and m["single-hop"]["R@5"] == 0.0
    assert m["all"]["MRR"] == pytest.approx((1.0 + 0.1) / 2) and m["all"]["n"] == 2


@pytest.mark.usefixtures("one_thread")
def test_every_system_runs_and_the_lexical_ones_find_the_named_turn(tmp_path, monkeypatch):
    folder = tmp_path / "locomo"
    folder.mkdir()
    for i in range(5):
        _conversation(folder, f"{i:02d}")
    monkeypatch.setattr(B, "encoder", lambda: HashingEmbedder(dim=64))
    table, counts, _ = B.run(folder, "dev", tmp_path / "cache", ["defaults", "family=0", "time_coef=1"])
    assert counts["kept"] == 15
    assert {"MiniLM cosine", "BM25", "BM25 stemmed", "BM25 + cosine, RRF", "hypermem defaults",
            "hypermem family=0", "hypermem HalfLife(3d) time_coef=1"} <= set(table)
    for name, m in table.items():
        assert m["all"]["n"] == 15 and 0.0 <= m["all"]["R@1"] <= m["all"]["R@10"] <= m["all"]["R@20"] <= 1.0, name
    assert table["BM25 stemmed"]["single-hop"]["R@1"] == 1.0                     # "puppy" names turn D1:1
    assert list((tmp_path / "cache").glob("minilm-*.pt"))                        # embeddings cached
