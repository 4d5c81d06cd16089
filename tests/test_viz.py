"""Looking at a memory: disk layouts, snapshots, the HTML inspector (in headless
Chromium, with hostile text), matplotlib and networkx."""

import base64
import hashlib
import html
import json
import math
import re
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
import torch

from hypermem import HalfLife, HashingEmbedder, Memory
from hypermem.geometry import poincare as P
from hypermem.viz import (
    disk_coordinates,
    render_html,
    structural_coordinates,
    to_dict,
    to_networkx,
    weight_timeline,
)
from hypermem.viz.html import script_json

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
NOW = T0 + timedelta(days=20)
HOSTILE = '<script>document.documentElement.setAttribute("data-pwned", "1")</script>'
HOSTILE_IMG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"


def tree_memory(**kw):
    mem = Memory(embedder=HashingEmbedder(dim=32), decay=HalfLife(24 * 3), clock=lambda: NOW, **kw)
    mem.add("animals", id="animal", t=T0)
    for j, name in enumerate(["dogs", "cats", "birds"]):
        mem.add(f"{name} are animals", id=name, parent="animal", t=T0 + timedelta(days=j))
    mem.add("puppies", id="puppy", parent="dogs", t=T0 + timedelta(days=10))
    mem.add("vehicles", id="vehicle", t=T0 + timedelta(days=5))
    return mem


def hostile_memory():
    mem = Memory(embedder=HashingEmbedder(dim=32), decay=HalfLife(48), clock=lambda: NOW)
    mem.add(HOSTILE, id="</script><script>x=1</script>", t=T0, meta={"<b>key</b>": HOSTILE_IMG})
    mem.add("quotes \" ' ` & \u2028 \u2029 <!-- -->", id="q\"'<>&", parent="</script><script>x=1</script>",
            t=T0 + timedelta(days=2), meta={"note": "</script>", "n": [1, "<"]})
    mem.add(HOSTILE_IMG, id="img", parent="q\"'<>&", t=T0 + timedelta(days=19))
    for i in range(7):
        mem.add(f"plain memory {i}", parent="</script><script>x=1</script>", t=T0 + timedelta(days=i))
    return mem


# ----------------------------------------------------------------------------- layouts
def test_disk_coordinates_keep_depths_and_planar_angles():
    c = 0.5
    g = torch.Generator().manual_seed(0)
    basis = torch.linalg.qr(torch.randn(16, 2, generator=g, dtype=torch.float64))[0].T  # a random plane
    angles = torch.tensor([0.1, 1.0, 2.5, -2.0, -0.7], dtype=torch.float64)
    depths = torch.tensor([0.5, 1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    dirs = torch.stack([angles.cos(), angles.sin()], 1) @ basis
    pts = P.point_at(dirs, depths, c)
    xy = disk_coordinates(pts, c)
    torch.testing.assert_close(xy.norm(dim=1), torch.tanh(math.sqrt(c) * depths / 2))
    # Points in a plane keep their angles up to a rotation/reflection of the plane.
    got = torch.atan2(xy[:, 1], xy[:, 0])
    diff = [(got[i] - got[0]).item() for i in range(5)]
    want = [(angles[i] - angles[0]).item() for i in range(5)]
    wrap = [((a - b + math.pi) % (2 * math.pi)) - math.pi for a, b in zip(diff, want)]
    wrap_ref = [((a + b + math.pi) % (2 * math.pi)) - math.pi for a, b in zip(diff, want)]
    assert max(map(abs, wrap)) < 1e-9 or max(map(abs, wrap_ref)) < 1e-9
    # 2-D: the points themselves, scaled to the unit disk; the origin stays the origin.
    p2 = torch.tensor([[0.3, -0.4], [0.0, 0.0]], dtype=torch.float64)
    torch.testing.assert_close(disk_coordinates(p2, 4.0), p2 * 2.0)
    assert disk_coordinates(torch.zeros(1, 8, dtype=torch.float64)).norm() < 1e-100
    with pytest.raises(ValueError, match="shape"):
        disk_coordinates(torch.zeros(3))
    with pytest.raises(ValueError, match="curvature"):
        disk_coordinates(p2, -1.0)


def test_structural_coordinates_give_subtrees_disjoint_wedges_and_exact_radii():
    mem = tree_memory(curvature=2.0)
    xy = structural_coordinates(mem)
    torch.testing.assert_close(xy.norm(dim=1), torch.tanh(math.sqrt(2.0) * mem.depths / 2))
    ang = {i: math.atan2(xy[r, 1].item(), xy[r, 0].item()) % (2 * math.pi) for r, i in enumerate(mem.ids)}
    # Leaves: cats, birds, puppy (animal subtree: 3), vehicle (1): wedges 3/4 and 1/4 of the circle;
    # the leaves of the animal subtree sit a quarter turn apart, the vehicle alone in its wedge.
    leaves = sorted(ang[i] for i in ("cats", "birds", "puppy"))
    gaps = [b - a for a, b in zip(leaves, leaves[1:])]
    assert all(abs(g - math.pi / 2) < 1e-9 for g in gaps)
    assert abs(abs(ang["dogs"] - ang["puppy"])) < 1e-9  # a single child is centred on its parent
    animal_wedge = (min(leaves) - math.pi / 4, max(leaves) + math.pi / 4)
    assert animal_wedge[0] - 1e-9 <= ang["animal"] % (2 * math.pi) <= animal_wedge[1] + 1e-9
    assert len(structural_coordinates(Memory())) == 0


# ----------------------------------------------------------------------------- snapshots
def test_to_dict_is_a_json_snapshot_with_weights_and_layout():
    mem = tree_memory()
    at = NOW - timedelta(days=5)
    snap = to_dict(mem, at_time=at)
    json.dumps(snap, allow_nan=False)
    assert snap["layout"] == "structural" and snap["now"] == at.isoformat()
    assert [n["id"] for n in snap["nodes"]] == mem.ids
    w = mem.time_weights(at_time=at).tolist()
    for n, rec, wi in zip(snap["nodes"], mem, w):
        assert (n["text"], n["parent"], n["level"], n["weight"]) == (rec.text, rec.parent_id, mem.level(rec.id), wi)
        assert n["children"] == mem.children(rec.id) and n["depth"] == mem.depth(rec.id)
    flat = Memory()
    flat.add("a")
    flat.add("b")
    assert to_dict(flat)["layout"] == "projection"
    assert to_dict(mem, layout="projection")["layout"] == "projection"
    with pytest.raises(ValueError, match="unknown layout"):
        to_dict(mem, layout="circular")


def test_weight_timeline_matches_the_policy_at_every_time():
    mem = tree_memory()
    tl = weight_timeline(mem, steps=9)
    assert tl["seconds"] == sorted(tl["seconds"]) and len(tl["seconds"]) in (9, 10)
    assert tl["seconds"][tl["index"]] == NOW.timestamp()
    for s, ws in zip(tl["seconds"], tl["weights"]):
        want = mem.time_weights(at_time=datetime.fromtimestamp(s, timezone.utc)).tolist()
        assert all(abs(a - b) <= 5e-4 * b for a, b in zip(ws, want))  # 4 significant digits
    assert tl["seconds"][0] == min(r.t.timestamp() for r in mem) and tl["seconds"][-1] > NOW.timestamp()
    with pytest.raises(ValueError, match="steps"):
        weight_timeline(mem, steps=1)


def test_to_networkx():
    pytest.importorskip("networkx")
    mem = tree_memory()
    g = to_networkx(mem)
    assert sorted(g.nodes) == sorted(mem.ids)
    assert sorted(g.edges) == sorted((r.parent_id, r.id) for r in mem if r.parent_id)
    assert g.nodes["puppy"]["level"] == 2 and g.nodes["puppy"]["text"] == "puppies"


# ----------------------------------------------------------------------------- the page
def page_scripts(page):
    return re.findall(r"<script>(.*?)</script>", page, flags=re.S)


def test_render_html_escapes_everything_and_embeds_the_snapshot():
    mem = hostile_memory()
    title = '<script>alert("title")</script> & "quoted"'
    page = render_html(mem, title=title)
    for raw in (HOSTILE, HOSTILE_IMG, "</script><script>x=1", '<script>alert("title")', "<b>key</b>", "<!--"):
        assert raw not in page
    assert "\u2028" not in page and "\u2029" not in page
    assert f"<title>{html.escape(title)}</title>" in page
    # Only the page's own scripts, allowed by hash in the content security policy.
    scripts = page_scripts(page)
    assert len(scripts) == 2 and page.count("<script") == 3
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', page).group(1)
    for s in scripts:
        digest = base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp
    assert not re.search(r"(src|href)\s*=|https?://|@import|url\(", page.split("<script type")[0])
    data = re.search(r'<script type="application/json" id="hm-data">(.*?)</script>', page, flags=re.S).group(1)
    doc = json.loads(data)
    assert doc["title"] == title
    # The compact columns hold every memory as it is stored (texts, ids, parents, metadata).
    assert doc["ids"] == mem.ids and doc["texts"] == [r.text for r in mem] and doc["n"] == len(mem)
    parents = np.frombuffer(base64.b64decode(doc["parent"]), dtype="<i4").tolist()
    assert parents == [-1 if r.parent_id is None else mem.ids.index(r.parent_id) for r in mem]
    assert {int(k): v for k, v in doc["meta"].items()} == {i: r.meta for i, r in enumerate(mem) if r.meta}
    assert script_json({"x": "</script>"}) == '{"x": "\\u003c/script\\u003e"}'


def test_inspect_writes_the_page_and_jupyter_gets_an_iframe(tmp_path):
    mem = hostile_memory()
    path = tmp_path / "page.html"
    page = mem.inspect(path, title="mine")
    assert path.read_text(encoding="utf-8") == page
    frame = mem._repr_html_()
    assert frame.startswith("<iframe srcdoc=") and 'sandbox="allow-scripts"' in frame
    assert "<script" not in frame and HOSTILE not in frame
    assert html.unescape(frame.split('srcdoc="')[1].split('" sandbox')[0]).startswith("<!DOCTYPE html>")
    with pytest.raises(TypeError, match="title"):
        mem.inspect(title=3)
    with pytest.raises(ValueError, match="layout"):
        mem.inspect(layout="spiral")


def test_open_browser_and_an_empty_memory(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr("webbrowser.open", opened.append)
    mem = tree_memory()
    page = mem.inspect(open_browser=True)
    assert len(opened) == 1 and opened[0].startswith("file://") and opened[0].endswith(".html")
    shown = Path(opened[0][len("file://"):])
    assert shown.read_text(encoding="utf-8") == page
    shown.unlink()
    mem.inspect(tmp_path / "p.html", open_browser=True)
    assert opened[1] == (tmp_path / "p.html").resolve().as_uri()
    empty = Memory()
    assert to_dict(empty)["nodes"] == [] and '"ids": []' in render_html(empty)


def test_plot_draws_every_memory(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mem = tree_memory()
    ax = mem.plot(labels=True)
    assert len(ax.collections[0].get_offsets()) == len(mem)
    assert len(ax.texts) == len(mem)
    alphas_now = ax.collections[0].get_facecolors()[:, 3]
    ax.figure.savefig(tmp_path / "plot.png")
    plt.close(ax.figure)
    fig, ax2 = plt.subplots()
    assert mem.plot(ax=ax2, at_time=T0) is ax2  # at T0 nothing has decayed yet
    assert (ax2.collections[0].get_facecolors()[:, 3] >= alphas_now - 1e-12).all()
    plt.close(fig)
    assert (tmp_path / "plot.png").stat().st_size > 5000


# ----------------------------------------------------------------------------- Chromium
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)


def chromium(url, tmp_path, *extra):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium); the page test needs it")
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--window-size=1280,1200", *extra, url]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return out.stdout


def attr(dom, name):
    m = re.search(rf'{name}="([^"]*)"', dom)
    return None if m is None else html.unescape(m.group(1))


def test_inspector_in_headless_chromium_with_hostile_text(tmp_path):
    mem = hostile_memory()
    path = tmp_path / "inspector.html"
    mem.inspect(path, title='</title><script>document.documentElement.setAttribute("data-pwned","3")</script>')
    url = path.resolve().as_uri()
    # Selecting a memory through the address highlights it, its ancestors and descendants.
    sel = "q\"'<>&"
    shot = tmp_path / "inspector.png"
    dom = chromium(url + "#select=" + quote(sel, safe=""), tmp_path, "--dump-dom", f"--screenshot={shot}")
    assert attr(dom, "data-ready") == "1", dom[-2000:]
    assert attr(dom, "data-errors") == "0", re.search(r'<pre id="hm-errors"[^>]*>(.*?)</pre>', dom, re.S)
    assert attr(dom, "data-points-drawn") == str(len(mem)) == attr(dom, "data-drawn")
    assert "data-pwned=\"" not in dom
    # The hostile text is on the page as text: in the table's text cell and as its title.
    assert dom.count(html.escape(HOSTILE, quote=False)) >= 1
    assert re.search(r'<td title="[^"]*">' + re.escape(html.escape(HOSTILE, quote=False)) + "</td>", dom)
    assert len(re.findall(r"<tr data-id=", dom)) == len(mem)
    assert attr(dom, "data-selected") == sel
    assert attr(dom, "data-highlighted") == "3"  # itself, its parent, its child
    rows = re.findall(r'<tr data-id="[^"]*" data-row="\d+" class="hm-(self|ancestor|descendant)"', dom)
    labels = re.findall(r'class="hm-label hm-(self|ancestor|descendant)"', dom)
    assert sorted(rows) == sorted(labels) == ["ancestor", "descendant", "self"]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    # The filter keeps the matching rows only.
    dom = chromium(url + "#filter=plain%20memory%203", tmp_path, "--dump-dom")
    assert attr(dom, "data-errors") == "0" and len(re.findall(r"<tr data-id=", dom)) == 1
