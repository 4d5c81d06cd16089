"""Shared helpers of the episodic-memory tests: their epoch ``T0`` (where the ``clock`` fixture
of conftest.py starts in a module that imports it), a storage snapshot and the ``storage``
fixture (a module uses it with ``storage = episodic_helpers.storage``)."""

from datetime import datetime, timezone

import pytest

from hypermem import HashingEmbedder
from hypermem.episodic import MemoryStorage

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def snapshot(storage):
    """Everything observable about a storage, by memory key (comparable across storages)."""
    key = storage.key_of
    mems = list(storage)
    return {
        "memories": [(key(m), m.get_wff(), m.event, list(m.episodes), m.importance, m.telic, m.start_time,
                      m.end_time, m.last_access, m.access_count, m in storage.context) for m in mems],
        "ep_ht": {ep: sorted(key(m) for m in ms) for ep, ms in storage.ep_ht.items()},
        "wff_ht": {k: sorted(key(m) for m in ms) for k, ms in storage.wff_ht.items()},
        "context": sorted(key(m) for m in storage.context),
        "hyperbolic": None if storage.hyperbolic is None else list(storage.hyperbolic.ids),
    }


@pytest.fixture
def storage(clock):
    return MemoryStorage(embedder=HashingEmbedder(dim=32), clock=clock)
