"""The memory store (layer 3)."""

from .add_hint import AddManyHint
from .backups import backup
from .memory import METRICS, MODES, Memory
from .records import MemoryRecord, SearchResult
from .validation import MemoryFileError

__all__ = ["Memory", "MemoryRecord", "SearchResult", "MODES", "METRICS", "AddManyHint", "MemoryFileError", "backup"]
