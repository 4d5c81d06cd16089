"""The warning of a dict filter that kept nothing and names a metadata key no memory has.

``Memory.search``, ``search_batch``, the server search and ``Memory.select`` give the same words
(:meth:`hypermem.store.search.Searcher.warn_unknown_keys`, once per store and key).  Such a key is
usually a misspelling; or it is one of the record's own fields (``{"t": {"$lt": "<a date>"}}``),
which a dict filter does not read: it reads metadata.  For those the warning says how to filter
them: a :class:`~hypermem.store.filters.RecordFilter` (the parent, the times, the ids) or a
callable on the record.
"""

from __future__ import annotations

from .filters import RECORD_FIELDS

__all__ = ["unknown_key_warning"]

_RECORD_FILTERS = {
    **{f: f"RecordFilter({{{f!r}: ...}}, fields={{{f!r}: {f!r}}})" for f in RECORD_FIELDS},
    "parent_id": "RecordFilter({'parent_id': ...}, fields={'parent_id': 'parent'})",
    "id": "RecordFilter({}, ids=[...])"}
"""The record fields a ``RecordFilter`` reads, and how it names each."""
_CALLABLE_ONLY = ("text", "access_count", "last_accessed")
"""The record fields only a callable reads."""


def unknown_key_warning(key: str, what: str = "the search") -> str:
    """The warning for a filter that kept nothing and names ``key``, a metadata key no memory
    has (``what`` found nothing: ``"the search"``, ``"select()"``)."""
    msg = f"no memory has the metadata key {key!r} that the filter names, so {what} found nothing"
    if key in _RECORD_FILTERS or key in _CALLABLE_ONLY:
        way = f"hypermem.store.filters.{_RECORD_FILTERS[key]} or " if key in _RECORD_FILTERS else ""
        msg += (f": {key!r} is a field of the record, and a dict filter reads metadata; filter it with {way}a "
                f"callable on the record (lambda r: ...)")
        if key in ("t", "valid_from", "valid_until"):
            msg += " (a RecordFilter compares a time as ISO 8601 UTC text, YYYY-MM-DDTHH:MM:SS+00:00)"
    else:
        msg += " (a misspelled key?)"
    return msg + "; this store warns once per key"
