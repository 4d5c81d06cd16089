"""The small store shared by the Memory tests: their epoch ``T0``, a settable clock and a
tree of animals and vehicles."""

from datetime import datetime, timedelta, timezone

from hypermem import Memory

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Clock:
    def __init__(self, t=T0 + timedelta(days=30)):
        self.t = t

    def __call__(self):
        return self.t


def make_tree(**kw):
    m = Memory(clock=Clock(), **kw)
    m.add("animals live on earth", id="animal", t=T0)
    m.add("dogs are loyal animals", parent="animal", id="dog", t=T0 + timedelta(days=1), meta={"kind": "pet"})
    m.add("cats are independent animals", parent="animal", id="cat", t=T0 + timedelta(days=2),
          meta={"kind": "pet"})
    m.add("wolves hunt in packs", parent="animal", id="wolf", t=T0 + timedelta(days=3), meta={"kind": "wild"})
    m.add("puppies are young dogs", parent="dog", id="puppy", t=T0 + timedelta(days=20))
    m.add("vehicles move people", id="vehicle", t=T0 + timedelta(days=4))
    m.add("cars have four wheels", parent="vehicle", id="car", t=T0 + timedelta(days=5))
    return m
