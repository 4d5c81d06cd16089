"""Jupyter's inline display: the inspector in an iframe for a small memory, a short summary
with a hint to mem.inspect("page.html") above NOTEBOOK_MAX_INLINE memories."""

from hypermem import HashingEmbedder, Memory
from hypermem.viz.html import NOTEBOOK_MAX_INLINE, notebook_html


def test_small_memories_show_inline_and_large_ones_a_summary():
    mem = Memory(embedder=HashingEmbedder(dim=8))
    mem.add_many([{"text": f"<b>note</b> {i}", "id": f"n{i}", "parent": None if i < 3 else "n0"}
                  for i in range(NOTEBOOK_MAX_INLINE)])
    inline = mem._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and len(inline) > 100 * NOTEBOOK_MAX_INLINE
    mem.add("one more", id="last")
    summary = mem._repr_html_()
    assert len(summary) < 2000 and "<iframe" not in summary and "<b>note" not in summary
    assert "5,001 memories" in summary and "4 roots" in summary and "mem.inspect(&quot;page.html&quot;)" not in summary
    assert 'mem.inspect("page.html")' in summary and "more than 5,000 memories" in summary
    tiny = Memory(embedder=HashingEmbedder(dim=8))
    tiny.add("alone")
    assert "1 memories" not in notebook_html(tiny, max_inline=0) and "1 root " in notebook_html(tiny, max_inline=0)
