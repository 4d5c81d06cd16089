"""Durable storage behind the ``Memory`` API: write-through SQLite and PostgreSQL + pgvector.

``Memory.open(path)`` binds a store to one SQLite file, ``Memory.open("postgresql://...")``
to a PostgreSQL database with pgvector; ``Memory()`` stays the in-process store.  The
bound store keeps its tensors in the process (its searches are the in-process exact
search) and commits every mutating call in one transaction before returning
(:mod:`~hypermem.store.backends.durable`).  On PostgreSQL the server can also search by
itself (:mod:`~hypermem.store.backends.pg_search`): an exact search with a certified early
stop and an HNSW search re-scored in float64.  See ``docs/storage.md``.
"""

from .durable import StorageError, durable_class

__all__ = ["StorageError", "durable_class"]
