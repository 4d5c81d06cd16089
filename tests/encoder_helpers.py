"""A tiny sentence-transformers model built in the test run (random weights, MiniLM's
tokenizer), and a small named hierarchy, for fast hierarchy-encoder tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

TREE = {
    "animal": "entity", "plant": "entity", "artifact": "entity",
    "mammal": "animal", "bird": "animal", "fish": "animal",
    "dog": "mammal", "cat": "mammal", "horse": "mammal", "whale": "mammal",
    "sparrow": "bird", "eagle": "bird", "owl": "bird", "salmon": "fish", "trout": "fish", "shark": "fish",
    "tree": "plant", "flower": "plant", "oak": "tree", "pine": "tree", "rose": "flower", "tulip": "flower",
    "tool": "artifact", "vehicle": "artifact", "hammer": "tool", "saw": "tool", "car": "vehicle", "bike": "vehicle",
    "poodle": "dog", "beagle": "dog", "siamese cat": "cat", "tabby": "cat",
}
EDGES = sorted(TREE.items())
NAMES = {e: e for pair in EDGES for e in pair}


def tiny_model_folder(path: Path, layers: int = 2) -> Path:
    """Write a ``layers``-layer (default 2), 32-wide BERT with MiniLM's tokenizer as a sentence-transformers folder
    (transformer + mean pooling); returns the folder."""
    transformers = pytest.importorskip("transformers")
    st = pytest.importorskip("sentence_transformers")
    try:
        from sentence_transformers.base.modules import Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Pooling, Transformer
    from hypermem.embed.sentence_transformer import local_minilm_path

    src = Path(local_minilm_path())
    hf = path / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / f).is_file():
            shutil.copy(src / f, hf / f)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=layers, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=64)
    import torch

    torch.manual_seed(0)
    transformers.BertModel(cfg).save_pretrained(hf, safe_serialization=True)
    transformer = Transformer(str(hf), max_seq_length=16)
    pooling = Pooling(32, pooling_mode="mean")
    out = path / "tiny-st"
    st.SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(out))
    return out


def inspected_panel(mem, path: Path, focus: str) -> tuple[str, list[str], str]:
    """The inspector page of ``mem`` written to ``path`` and opened in Chromium on ``focus``:
    the details panel's text, the suggested parents' link texts and the summary line (skips
    where Chromium is not installed)."""
    from hypermem.viz.chromium import Chromium, find_chromium

    if find_chromium() is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    mem.inspect(path)
    with Chromium(width=1100, height=900) as b:
        b.open(path.as_uri() + f"#focus={focus}")
        b.wait_for(f"document.body.getAttribute('data-selected') === '{focus}'")
        assert b.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
        panel = b.evaluate("document.getElementById('hm-selected').textContent")
        links = b.evaluate("Array.from(document.querySelectorAll('.hm-suggested a')).map(a => a.textContent)")
        summary = b.evaluate("document.getElementById('hm-summary').textContent")
    return panel, links, summary
