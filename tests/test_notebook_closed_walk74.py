"""Walk 74: a closed durable store in a notebook."""

from hypermem import HashingEmbedder, Memory


def test_a_closed_store_shows_in_a_notebook_as_closed(tmp_path):
    """Jupyter calls _repr_html_ on a cell's last value: a store closed by its ``with`` block shows
    one line saying so, not a StorageError."""
    with Memory.open(tmp_path / "c.db", embedder=HashingEmbedder(dim=16)) as db:
        db.add("hello")
    page = db._repr_html_()
    assert "storage closed" in page and "<iframe" not in page
    assert "storage closed" in repr(db)

