"""A scripted agent (no LLM) with hypermem as its long-term memory, through LangChain.

The agent walks through a house over two days.  What it observes goes into a hierarchy
(house -> rooms -> observations), each observation with the time it was made.  It answers
questions through a LangChain retriever over :class:`hypermem.integrations.langchain.
HypermemVectorStore`:

* **recency**: the memory decays with a 24-hour half-life, so of two observations about
  the keys the recent one wins (the older one is the closer match in words: without
  recency it would win);
* **structure**: ``search_kwargs={"mode": "subtree", "root": <room>}`` asks about one room;
* **restart**: the memory lives in one SQLite file opened with :meth:`Memory.open`
  (write-through: every observation is committed before ``add_texts`` returns), so the
  agent can stop at any moment without saving; it "restarts" from the file, answers the
  same way, then keeps observing.

Run: ``python examples/agent_memory.py [--dir DIR]`` (needs the ``langchain`` extra).
"""

from __future__ import annotations

import argparse
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.integrations.langchain import HypermemVectorStore

START = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)

# (hours after START, room, what the agent sees)
SCRIPT = [
    (0.0, "kitchen", "the keys are on the kitchen table"),
    (0.5, "kitchen", "the fridge is almost out of milk"),
    (1.0, "garden", "the tomatoes in the garden need water"),
    (2.0, "study", "a letter from the bank is waiting on the desk"),
    (3.0, "garden", "the garden hose is coiled by the shed"),
    (26.0, "study", "the laptop charger is plugged in behind the desk"),
    (30.0, "garden", "I spotted the car keys under the garden bench"),
]


class Clock:
    """Simulated time: the agent's day runs in seconds."""

    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class ScriptedAgent:
    """Writes observations under their room and recalls through a LangChain retriever."""

    def __init__(self, store: HypermemVectorStore, clock: Clock):
        self.store, self.clock = store, clock
        if "house" not in store.memory:
            store.add_texts(["the house"], ids=["house"])

    def observe(self, room: str, text: str) -> str:
        room_id = f"room:{room}"
        if room_id not in self.store.memory:
            self.store.add_texts([f"the {room}"], metadatas=[{"parent": "house"}], ids=[room_id])
        [obs] = self.store.add_texts([text], metadatas=[{"parent": room_id, "t": self.clock.now, "room": room}])
        return obs

    def recall(self, question: str, room: str | None = None, k: int = 2) -> list[str]:
        kwargs = {"k": k, "filter": {"room": {"$exists": True}}}  # observations, not the house and rooms
        if room is not None:
            kwargs.update(mode="subtree", root=f"room:{room}")
        return [d.page_content for d in self.store.as_retriever(search_kwargs=kwargs).invoke(question)]


def open_store(path: Path, clock: Clock) -> HypermemVectorStore:
    """The agent's memory: the durable SQLite file at ``path`` (created when missing),
    every write committed as it happens."""
    memory = Memory.open(path, embedder=HashingEmbedder(dim=256), decay=HalfLife(hours=24), clock=clock)
    return HypermemVectorStore(memory=memory)


def run(workdir: Path) -> dict[str, list[str]]:
    clock = Clock(START)
    path = workdir / "agent_memory.db"
    agent = ScriptedAgent(open_store(path, clock), clock)
    for hours, room, text in SCRIPT:
        clock.now = START + timedelta(hours=hours)
        agent.observe(room, text)
    clock.now = START + timedelta(hours=31)
    answers = {
        "where are the keys?": agent.recall("where are the keys?", k=1),
        "what is in the kitchen?": agent.recall("what is on the table or in the fridge?", room="kitchen"),
        "what did I see in the study?": agent.recall("what did I see?", room="study"),
    }
    # a second reader of the same file: the same memories, ranked without recency
    with Memory.open(path, read_only=True, embedder=HashingEmbedder(dim=256), clock=clock) as reader:
        reader.time_coef = 0.0
        timeless = ScriptedAgent(HypermemVectorStore(memory=reader), clock)
        answers["without recency: where are the keys?"] = timeless.recall("where are the keys?", k=1)

    # restart: the agent stops without saving or closing anything (as a crash would) and a
    # new process opens the file again; here, a new store in this one
    clock2 = Clock(clock.now)
    again = ScriptedAgent(open_store(path, clock2), clock2)
    answers["after restart: where are the keys?"] = again.recall("where are the keys?", k=1)
    clock2.now += timedelta(hours=1)
    again.observe("kitchen", "the keys are back on the kitchen table")
    answers["later: where are the keys?"] = again.recall("where are the keys?", k=1)
    answers["memories"] = [str(len(again.store.memory))]
    return answers


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=None, help="where to keep the memory file (default: a temp dir); "
                    "the scripted day starts from an empty store, so the folder must not hold one yet")
    args = ap.parse_args(argv)
    if args.dir is not None and (args.dir / "agent_memory.db").exists():
        ap.error(f"{args.dir / 'agent_memory.db'} exists: the scripted day replays from an empty store (a second "
                 f"run would add its observations again); pass another --dir or remove that file")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.dir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for question, answer in run(workdir).items():
            print(f"{question} -> {' | '.join(answer)}")


if __name__ == "__main__":
    main()
