"""Walk 71: the lexical search, the text filters and the inspector's boxes on text that is not
English: NFC against NFD, full case folding (ß, Turkish İ), combining marks inside words, and
CJK runs split into characters and bigrams (hypermem.retrieval.text_fold, retrieval.bm25)."""

import json
import unicodedata as ud

import pytest

from hypermem import HashingEmbedder, Memory
from hypermem.retrieval.bm25 import BM25Index, tokenize, words
from hypermem.retrieval.text_fold import canonical, fold
from hypermem.viz.chromium import Chromium, find_chromium


def NFC(s):
    return ud.normalize("NFC", s)


def NFD(s):
    return ud.normalize("NFD", s)


def test_fold_normalises_and_case_folds():
    assert fold(NFD("Tiếng Việt")) == fold(NFC("Tiếng Việt")) == NFC("tiếng việt")
    assert fold("STRASSE") == fold("Straße") == "strasse"
    assert fold("İstanbul") == fold("ISTANBUL") == "istanbul"
    assert fold("ﬁne ＡＢＣ") == "fine abc"
    assert fold("zero\u200bwidth\u00ad") == "zerowidth"
    assert fold("Plain ASCII Text") == "plain ascii text"
    assert canonical(NFD("Tiếng")) == NFC("Tiếng") and canonical("Abc") == "Abc"


def test_decomposed_vietnamese_keeps_its_words():
    assert tokenize(NFD("Tiếng Việt rất đẹp")) == tokenize(NFC("Tiếng Việt rất đẹp"))
    assert words(NFD("Tiếng Việt")) == [NFC("tiếng"), NFC("việt")]
    assert "tie" not in tokenize(NFD("Tiếng Việt"))  # it was ['tie', 'ng', 'vie']


def test_marks_inside_indic_words():
    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


def test_case_folding_in_terms():
    assert tokenize("STRASSE") == tokenize("Straße")
    assert tokenize("İstanbul") == tokenize("istanbul") == ["istanbul"]


def test_cjk_runs_give_characters_and_bigrams():
    assert words("東京都") == ["東", "京", "都", "東京", "京都"]
    assert words("猫") == ["猫"]
    assert words("abc東京def") == ["abc", "東", "京", "東京", "def"]
    assert tokenize("한국어") == ["한", "국", "어", "한국", "국어"]
    assert words("ｶﾀｶﾅ") == words("カタカナ")  # half-width katakana folds to full-width


def test_ascii_terms_unchanged():
    text = "What did the painters paint in the Painting_Room 2023?"
    assert tokenize(text) == ["painter", "paint", "painting_room", "2023"]
    assert tokenize(text + " café") == tokenize(text) + ["café"]  # the folded path agrees
    assert words(text + " é") == words(text) + ["é"]


def test_bm25_finds_cjk_words_and_folded_spellings():
    docs = ["我喜欢猫和狗，它们很可爱。", "東京は日本の首都です。", NFD("Hà Nội là thủ đô của Việt Nam"),
            "He wore a red tie to the wedding", "Die Straße ist lang", "İstanbul'da bir gün"]
    index = BM25Index.build(docs)
    for query, want in [("猫", 0), ("東京", 1), ("首都", 1), (NFC("Việt"), 2), ("STRASSE", 4), ("Istanbul", 5)]:
        scores = index.scores(query)
        assert scores and max(scores, key=scores.get) == want, (query, scores)
    assert 3 not in index.scores(NFD("Tiếng Việt"))  # no weight to "tie"


def test_hybrid_search_ranks_the_cjk_sentence_first():
    docs = ["東京は日本の首都です。", "京都には古いお寺がたくさんあります。", "我喜欢猫和狗。", "今天天气很好，我们去公园吧。",
            "北京是中国的首都。", "我明天去上海出差。"]
    mem = Memory(embedder=HashingEmbedder(dim=64), hybrid=0.3)
    mem.add_many([{"text": t} for t in docs])
    for q, want in [("東京", 0), ("猫", 2), ("公园", 3), ("上海", 5)]:
        assert mem.search(q, k=1)[0].record.text == docs[want]


def test_text_match_filters_fold_and_normalise():
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("a", meta={"city": "İstanbul", "street": "Hauptstraße", "note": NFD("Tiếng Việt")})
    for f in [{"city": {"$text_match_insensitive": "istanbul"}}, {"street": {"$text_match_insensitive": "STRASSE"}},
              {"note": {"$text_match_insensitive": NFC("tiếng")}}, {"note": {"$text_match": NFC("Tiếng")}}]:
        assert len(mem.search("a", filters=f, k=5)) == 1, f
    assert mem.search("a", filters={"note": {"$text_match": NFC("tiếng")}}, k=5) == []  # case kept


@pytest.mark.skipif(find_chromium() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_inspector_boxes_fold_both_sides(tmp_path):
    mem = Memory(embedder=HashingEmbedder(dim=16))
    mem.add("a \u0001 in the text, then STRAẞE", id="ctl")  # "\u0001" separates memories in the haystack
    mem.add(NFC("Tiếng Việt (NFC)"), id="vi-nfc")
    mem.add(NFD("Tiếng Việt (NFD)"), id="vi-nfd")
    mem.add("Die Straße", id="de")
    mem.add("İstanbul", id="tr")
    path = tmp_path / "page.html"
    mem.inspect(path)
    with Chromium(width=1000, height=800) as browser:
        browser.open(path.as_uri())
        assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
        for q, want in [(NFC("tiếng"), {"vi-nfc", "vi-nfd"}), (NFD("tiếng"), {"vi-nfc", "vi-nfd"}),
                        ("strasse", {"de", "ctl"}), ("istanbul", {"tr"}), ("STRASSE", {"de", "ctl"}),
                        ("then", {"ctl"})]:
            got = browser.evaluate(
                "((q) => { const s = document.getElementById('hm-search'); s.value = q; s.dispatchEvent(new Event('input'));"
                " const r = Array.from(document.querySelectorAll('#hm-results .hm-n')).map(e => e.textContent.trim());"
                " const f = document.getElementById('hm-filter'); f.value = q; f.dispatchEvent(new Event('input'));"
                " return [r, document.getElementById('hm-count').textContent]; })(%s)" % json.dumps(q))
            assert set(got[0]) == want, (q, got)
            assert got[1].startswith(f"{len(want)} of 5"), (q, got)
