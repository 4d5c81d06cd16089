"""Benchmark of the HTML inspector at scale, timed by Chromium itself.

Builds a memory of ``--n`` synthetic memories (a random forest: 5 roots, each memory's
parent drawn from the earlier ones, HalfLife(72 h) decay, texts like "memory 123 about
topic 26"), times ``inspect()`` in Python (twice), then opens the page in headless Chromium over
the DevTools protocol (:class:`hypermem.viz.chromium.Chromium`) and reads the page's own
``performance.now()`` figures:

* load: ``performance.now()`` when the page is ready (first drawing, table and tree
  done), measured from the navigation start;
* a filter keystroke, a slider step and a re-focus (no animation), each from just before
  the input event to the next animation frame after it (``requestAnimationFrame`` then a
  ``setTimeout(0)``, so the frame with the new drawing has been produced); min, median and max of
  ``--repeat`` runs (the machine may be shared).

    python benchmarks/bench_inspector.py --n 100000

``--screenshots docs/`` instead trains the WordNet mammals demo memory
(:func:`hypermem.demo.build_mammals_memory`, ``--epochs``), writes its page and takes
``inspector_mammals.png`` (as it opens) and ``inspector_mammals_focus.png`` (after a click
on ``--focus``, which the page moves to the centre).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.viz.chromium import Chromium

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NEXT_FRAME = "await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)))"


def build(n: int, seed: int = 0) -> Memory:
    rnd = random.Random(seed)
    mem = Memory(embedder=HashingEmbedder(dim=16), decay=HalfLife(72), clock=lambda: T0 + timedelta(days=30))
    items = []
    for i in range(n):
        parent = None if i < 5 else f"m{rnd.randrange(max(1, i // 4), i) if i > 20 else rnd.randrange(0, 5)}"
        items.append({"id": f"m{i}", "text": f"memory {i} about topic {i % 97}", "parent": parent,
                      "t": T0 + timedelta(hours=rnd.random() * 700)})
    mem.add_many(items)
    return mem


ACTIONS = {
    "filter keystroke": "const box = document.getElementById('hm-filter'); box.value = {arg}; "
                        "box.dispatchEvent(new Event('input'));",
    "slider step": "const s = document.getElementById('hm-time'); s.value = String({arg}); "
                   "s.dispatchEvent(new Event('input'));",
    "re-focus": "hmFocus({arg}, false);",
}


def summary(values, digits: int = 1) -> dict:
    """Min, median and max."""
    return {"min": round(min(values), digits), "median": round(statistics.median(values), digits),
            "max": round(max(values), digits)}


def timed(browser: Chromium, action: str, arg) -> tuple[float, float]:
    js = ("(async () => { const t0 = performance.now(); " + ACTIONS[action].format(arg=json.dumps(arg))
          + " const t1 = performance.now(); " + NEXT_FRAME + "; return [t1 - t0, performance.now() - t0]; })()")
    return tuple(browser.evaluate(js))


def screenshots(out: Path, epochs: int | None, focus: str, db: Path | None) -> dict:
    from hypermem.demo import DEMO_NOW, build_mammals_memory

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if db is not None and db.exists():
            mem = Memory.load(db)
        else:
            mem, _ = build_mammals_memory(epochs=epochs, runs_dir=Path(tmp) / "runs", progress=False,
                                          echo=lambda s: None)
            if db is not None:
                mem.save(db)
        page = Path(tmp) / "mammals.html"
        mem.inspect(page, title="hypermem demo: WordNet mammals", at_time=DEMO_NOW)
        clip = {"x": 0, "y": 0, "width": 1280, "height": 800}
        with Chromium(width=1280, height=1000) as browser:
            browser.open(page.as_uri())
            browser.screenshot(out / "inspector_mammals.png", clip=clip)
            r = browser.evaluate("document.getElementById('hm-disk').getBoundingClientRect().toJSON()")
            p = browser.evaluate(f"hmProbe({json.dumps(focus)})")
            browser.click(r["x"] + p["px"], r["y"] + p["py"])
            browser.wait_for(f"!hmState().animating && hmState().focus === {json.dumps(focus)}", timeout=20)
            browser.screenshot(out / "inspector_mammals_focus.png", clip=clip)
            return {"focus": focus, "labels_drawn": len(browser.evaluate("hmState().labels"))}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=12, help="runs of each interaction")
    ap.add_argument("--loads", type=int, default=3, help="page loads")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    ap.add_argument("--screenshots", type=Path, default=None, help="take the mammals demo's screenshots here")
    ap.add_argument("--epochs", type=int, default=None, help="mammals training epochs (default: the config's)")
    ap.add_argument("--focus", default="carnivore.n.01", help="the memory the second screenshot focuses")
    ap.add_argument("--db", type=Path, default=None, help="the trained mammals memory (saved there; reused if it exists)")
    args = ap.parse_args(argv)
    if args.screenshots is not None:
        res = screenshots(args.screenshots, args.epochs, args.focus, args.db)
        print(json.dumps(res))
        return res
    mem = build(args.n)
    seconds = []
    for _ in range(2):  # the first call after building, and again
        t = time.perf_counter()
        page = mem.inspect()
        seconds.append(round(time.perf_counter() - t, 3))
    res = {"n": args.n, "inspect_s": seconds, "page_bytes": len(page.encode()),
           "bytes_per_memory": round(len(page.encode()) / args.n, 1), "python": platform.python_version()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "page.html"
        path.write_text(page, encoding="utf-8")
        with Chromium() as browser:
            res["load_avg_before"] = [round(v, 2) for v in os.getloadavg()]
            loads, walls = [], []
            for _ in range(args.loads):
                walls.append(browser.open(path.as_uri()))
                loads.append(browser.evaluate("hmState().timings")["ready"])
            res["load_ms"] = summary(loads)
            res["open_wall_s"] = summary(walls, 3)
            res["chromium"] = browser.evaluate("navigator.userAgent")
            res["load_marks_ms"] = browser.evaluate("hmState().timings")
            assert browser.evaluate("document.documentElement.getAttribute('data-errors')") == "0"
            steps = int(browser.evaluate("Number(document.getElementById('hm-time').max)"))
            words = ["t", "to", "top", "topi", "topic", "topic ", "topic 4", "topic 42", "m", "me", "mem", "memory 9"]
            plan = {"filter keystroke": [words[k % len(words)] for k in range(args.repeat)],
                    "slider step": [(steps - 1 - k) % (steps + 1) for k in range(1, args.repeat + 1)],
                    "re-focus": [f"m{random.Random(k).randrange(args.n)}" for k in range(args.repeat)]}
            for action, values in plan.items():
                runs = [timed(browser, action, v) for v in values]
                res[action] = {"handler_ms": summary([r[0] for r in runs]),
                               "to_next_frame_ms": summary([r[1] for r in runs])}
            res["drawn_points"] = browser.evaluate("hmState().drawn")
            res["load_avg_after"] = [round(v, 2) for v in os.getloadavg()]
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
