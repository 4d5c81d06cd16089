"""Shared helpers of the episodic-memory tests: a fake clock and a storage snapshot."""

from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


class FakeClock:
    """A clock that only moves when told to (tests never sleep)."""

    def __init__(self, start=T0):
        self.now = start

    def __call__(self):
        return self.now

    def tick(self, **kwargs):
        self.now += timedelta(**kwargs)
        return self.now


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
