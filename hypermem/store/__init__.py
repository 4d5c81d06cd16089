"""The memory store (layer 3)."""

from .add_hint import AddManyHint
from .backups import backup
from .frames import parents_first
from .memory import METRICS, MODES, Memory
from .records import MemoryRecord, SearchResult
from .validation import MemoryFileError

from_dataframe = Memory.from_dataframe
"""``from_dataframe(df, **memory_kwargs)``: a new :class:`Memory` holding the rows of ``df``, the inverse
of ``Memory.to_dataframe`` (:func:`hypermem.store.frames.memory_from_dataframe`)."""

__all__ = ["Memory", "MemoryRecord", "SearchResult", "MODES", "METRICS", "AddManyHint", "MemoryFileError", "backup",
           "from_dataframe", "parents_first"]
