"""Memory.to_dataframe(): the creation times are pandas datetimes in UTC, not strings."""

from datetime import datetime, timedelta, timezone

import pytest

from hypermem import HashingEmbedder, Memory


def test_times_are_utc_datetimes():
    pd = pytest.importorskip("pandas")
    t0 = datetime(2025, 1, 1, 12, 30, 15, 250000, tzinfo=timezone.utc)
    mem = Memory(embedder=HashingEmbedder(dim=8))
    mem.add("a", id="a", t=t0)
    mem.add("b", id="b", parent="a", t=(t0 + timedelta(hours=1)).astimezone(timezone(timedelta(hours=5))))
    df = mem.to_dataframe()
    for col in ("time", "t"):
        assert pd.api.types.is_datetime64_any_dtype(df[col]) and str(df[col].dt.tz) == "UTC"
    assert df["time"].tolist() == [pd.Timestamp(t0), pd.Timestamp(t0 + timedelta(hours=1))]
    assert (df["time"].diff().dropna() == pd.Timedelta(hours=1)).all()
    assert list(df.columns) == ["id", "text", "parent", "level", "depth", "time", "t", "weight", "accesses", "meta"]
    empty = Memory(embedder=HashingEmbedder(dim=8)).to_dataframe()
    assert len(empty) == 0 and pd.api.types.is_datetime64_any_dtype(empty["time"])
