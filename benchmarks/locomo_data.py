"""Reading LoCoMo (Maharana et al., ACL 2024) from its folder, and scoring rankings of its turns.

The data (CC BY-NC 4.0) is read from the folder given on the command line and never copied.
Each conversation file holds sessions of turns (``dia_id`` such as ``D3:1``) with a date, and
questions with the ids of their evidence turns and a category (1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial).  :func:`load` normalises the evidence ids
(``'D8:6; D9:17'`` and ``'D9:1 D4:4'`` are two ids, ``'D:11:26'`` is ``D11:26``, ``D30:05`` is
``D30:5``), drops those that name no turn
and says how many; category 5 and questions left without evidence are skipped.

Either form of the release is read: a folder of one file per conversation (the ten files
``data/multimodal_dialog/locomo10_v2/NN.json`` of ``data/locomo10.zip`` in the LoCoMo
repository, snap-research/locomo; here ``../shared/data/locomo``), or its single
``data/locomo10.json`` (a list of samples, each with ``sample_id``, ``conversation`` and
``qa``).  The conversations come in the same order both ways (26, 30, 41, ..., 50), which
makes the split of ``bench_locomo.py``: dev = the first five, test = the last five.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (1, 5, 10, 20)
MRR_DEPTH = 100


@dataclass
class Conversation:
    name: str
    sessions: list[tuple[int, datetime]]           # (session number, date)
    turn_ids: list[str] = field(default_factory=list)
    turn_texts: list[str] = field(default_factory=list)
    turn_session: list[int] = field(default_factory=list)  # index into sessions
    questions: list[dict] = field(default_factory=list)    # question, category, evidence (turn indices)


def _date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def _evidence_ids(raw: list) -> list[str]:
    out = []
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item).strip()):
            m = re.fullmatch(r"D:?(\d+):(\d+)", part)
            if m:
                out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return out


def turn_text(turn: dict) -> str:
    """``speaker: text``, and the caption of a shared photo."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def _sources(where: str | Path) -> list[tuple[str, dict]]:
    """(name, conversation dict with its ``qa``) from a folder of files or one ``locomo10.json``."""
    where = Path(where)
    if where.is_file():
        samples = json.loads(where.read_text())
        if not isinstance(samples, list) or not all(isinstance(x, dict) and "conversation" in x and "qa" in x
                                                    for x in samples):
            raise ValueError(f"{where}: expected LoCoMo's locomo10.json, a list of samples with "
                             f"'conversation' and 'qa'")
        return [(str(x.get("sample_id", i)).removeprefix("conv-"), {**x["conversation"], "qa": x["qa"]})
                for i, x in enumerate(samples)]
    files = sorted(where.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no LoCoMo .json files in {where}")
    return [(f.stem, json.loads(f.read_text())) for f in files]


def load(folder: str | Path) -> tuple[list[Conversation], dict]:
    """The conversations in order (module docstring), and counts of what was normalised or dropped."""
    counts = {"questions": 0, "category_5": 0, "no_evidence": 0, "evidence_dropped": 0, "kept": 0}
    convs = []
    for stem, d in _sources(folder):
        nums = sorted(int(k.split("_")[1]) for k in d if re.fullmatch(r"session_\d+", k))
        conv = Conversation(stem, [(n, _date(d[f"session_{n}_date_time"])) for n in nums])
        pos = {}
        for s, n in enumerate(nums):
            for turn in d[f"session_{n}"]:
                pos[turn["dia_id"]] = len(conv.turn_ids)
                conv.turn_ids.append(turn["dia_id"])
                conv.turn_texts.append(turn_text(turn))
                conv.turn_session.append(s)
        for q in d["qa"]:
            counts["questions"] += 1
            if q["category"] == 5:
                counts["category_5"] += 1
                continue
            ids = _evidence_ids(q.get("evidence", []))
            ev = sorted({pos[i] for i in ids if i in pos})
            counts["evidence_dropped"] += len(set(ids)) - len(ev)
            if not ev:
                counts["no_evidence"] += 1
                continue
            counts["kept"] += 1
            conv.questions.append({"question": q["question"], "category": q["category"], "evidence": ev})
        convs.append(conv)
    return convs, counts


def metrics(rankings: list[list[int]], questions: list[dict]) -> dict:
    """Evidence recall@k (the share of a question's evidence turns in its top k) and MRR of
    the first evidence turn (0 past rank ``MRR_DEPTH``), per category and overall."""
    rows: dict[str, list[list[float]]] = {"all": []}
    for ranked, q in zip(rankings, questions):
        ev = set(q["evidence"])
        r = [len(ev & set(ranked[:k])) / len(ev) for k in KS]
        first = next((i for i, t in enumerate(ranked[:MRR_DEPTH]) if t in ev), None)
        r.append(0.0 if first is None else 1.0 / (first + 1))
        rows["all"].append(r)
        rows.setdefault(CATEGORIES[q["category"]], []).append(r)
    out = {}
    for name, vals in rows.items():
        a = np.asarray(vals)
        out[name] = {**{f"R@{k}": float(a[:, i].mean()) for i, k in enumerate(KS)}, "MRR": float(a[:, -1].mean()),
                     "n": len(vals)}
    return out
