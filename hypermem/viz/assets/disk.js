// disk.js: drawing the Poincaré disk through the current Möbius view (only the memories that
// exist at the slider's time), with level of
// detail (one point per 3 x 3 pixel cell, breadth first, once the memory is large),
// geodesic links, non-overlapping labels (shallowest nodes first), hit testing.
var canvas = document.getElementById("hm-disk");
var ctx = canvas.getContext("2d");
var CSS = 600, dpr = window.devicePixelRatio || 1;
canvas.width = Math.round(CSS * dpr); canvas.height = Math.round(CSS * dpr);
canvas.style.width = CSS + "px";  // its height follows (a square; CSS: height auto, max-width 100%)
var RPX = CSS / 2 - 14, C0 = CSS / 2, CELL = 3, GRID = Math.ceil(CSS / CELL);
var LOD_ALL = 4000;  // up to this many memories every point is drawn
var COLORS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"];
// The disk's colours come from the page's CSS custom properties (inspector.css: a light and a dark
// theme, the light one in print), read at start and again when the system's colour scheme or the
// print media changes (then the disk is redrawn).  The values here are the light theme's, for a
// property the page lacks.  Role colours (selected, ancestor, descendant) are text on the disk
// (WCAG AA, 4.5:1 on its background); the point colours (COLORS) are the same in both themes.
var THEME = { bg: "#f7f7fb", rim: "#444", grid: "#e2e2ea", gridText: "#666", text: "#222", halo: "rgba(247,247,251,0.8)",
              edge: "rgba(90,90,110,0.35)", edgeDim: "rgba(90,90,110,0.07)", mark: "#000", ancestor: "#a34c00",
              descendant: "#b01c1c" };
var THEME_VARS = { bg: "--hm-disk-bg", rim: "--hm-disk-rim", grid: "--hm-disk-grid", gridText: "--hm-muted", text: "--hm-fg",
                   halo: "--hm-disk-halo", edge: "--hm-disk-edge", edgeDim: "--hm-disk-edge-dim", mark: "--hm-disk-mark",
                   ancestor: "--hm-ancestor", descendant: "--hm-descendant" };
var ROLE_COLORS = [null, THEME.mark, THEME.ancestor, THEME.descendant];
function readTheme() {
  var css = getComputedStyle(document.documentElement);
  Object.keys(THEME_VARS).forEach(function (k) {
    var v = css.getPropertyValue(THEME_VARS[k]).trim();
    if (v) { THEME[k] = v; }
  });
  ROLE_COLORS = [null, THEME.mark, THEME.ancestor, THEME.descendant];
}
readTheme();
var view = IDENTITY.slice();
var VX = new Float64Array(N), VY = new Float64Array(N), SIZE = new Float32Array(N);
var OCC = new Int32Array(GRID * GRID), DRAWN = new Int32Array(N), nDrawn = 0, LABELED = [], LABEL_BOXES = [];
var LABEL_W = new Float32Array(N).fill(-1), SIZE_FRAME = new Int32Array(N), frameNo = 0;
var tmp = [0, 0], GRID_CIRCLES = 0;

function transformAll() {
  var m = view, x = X, y = Y, vx = VX, vy = VY, t = tmp;
  for (var i = 0, n = N; i < n; i++) {
    apply(m, x[i], y[i], t);
    vx[i] = t[0]; vy[i] = t[1];
  }
}
function pxX(x) { return C0 + x * RPX; }
function pxY(y) { return C0 - y * RPX; }
// Drawn radius in pixels: the Euclidean size of a fixed hyperbolic disk, ~ (1 - |z|^2).
function sizeOf(i) {
  var q = 1 - VX[i] * VX[i] - VY[i] * VY[i];
  return 1 + 8 * Math.max(q, 0) * (0.45 + 0.55 * Math.sqrt(weight(i)));
}

function geodesicPath(ax, ay, bx, by) {
  // The geodesic through a and b is an arc of the circle orthogonal to the boundary: its
  // centre c solves 2 c.a = |a|^2 + 1 and 2 c.b = |b|^2 + 1.  Short links are drawn straight.
  var pa0 = pxX(ax), pa1 = pxY(ay), pb0 = pxX(bx), pb1 = pxY(by);
  var det = ax * by - ay * bx, dx = pb0 - pa0, dy = pb1 - pa1;
  ctx.moveTo(pa0, pa1);
  if (dx * dx + dy * dy < 900 || Math.abs(det) < 1e-9) { ctx.lineTo(pb0, pb1); return; }
  var ka = (ax * ax + ay * ay + 1) / 2, kb = (bx * bx + by * by + 1) / 2;
  var cx = (ka * by - kb * ay) / det, cy = (ax * kb - bx * ka) / det;
  var r = Math.sqrt(Math.max(cx * cx + cy * cy - 1, 0));
  if (!isFinite(r) || r > 1e4) { ctx.lineTo(pb0, pb1); return; }
  var pcx = pxX(cx), pcy = pxY(cy);
  var t0 = Math.atan2(pa1 - pcy, pa0 - pcx), t1 = Math.atan2(pb1 - pcy, pb0 - pcx), d = t1 - t0;
  while (d > Math.PI) { d -= 2 * Math.PI; }
  while (d < -Math.PI) { d += 2 * Math.PI; }
  ctx.arc(pcx, pcy, r * RPX, t0, t0 + d, d < 0);
}

function drawGrid() {
  ctx.fillStyle = THEME.bg; ctx.strokeStyle = THEME.rim; ctx.lineWidth = 1.5;
  ctx.beginPath(); ctx.arc(C0, C0, RPX, 0, 2 * Math.PI); ctx.fill(); ctx.stroke();
  // Hyperbolic circles r = 1, 2, ... around the origin, moved by the view: a hyperbolic circle of
  // radius s around c is the Euclidean circle of centre c (1 - t^2) / (1 - t^2 |c|^2) and radius
  // t (1 - |c|^2) / (1 - t^2 |c|^2), t = tanh(s / 2).
  apply(view, 0, 0, tmp);
  var cx = tmp[0], cy = tmp[1], c2 = cx * cx + cy * cy;
  ctx.strokeStyle = THEME.grid; ctx.lineWidth = 1;
  ctx.fillStyle = THEME.gridText; ctx.font = "10px sans-serif";
  // Every drawn circle is numbered: one closer than 12 px to the last drawn one (near the rim) is left out.
  var drawnR = [];
  for (var depth = 1; depth <= 16; depth++) {
    var t = Math.tanh(SQRT_C * depth / 2), den = 1 - t * t * c2;
    var rad = t * (1 - c2) / den * RPX;
    if (rad < 3 || t > 0.999) { break; }
    if (drawnR.length && rad - drawnR[drawnR.length - 1] < 12) { continue; }
    drawnR.push(rad);
    var ex = pxX(cx * (1 - t * t) / den), ey = pxY(cy * (1 - t * t) / den);
    ctx.beginPath(); ctx.arc(ex, ey, rad, 0, 2 * Math.PI); ctx.stroke();
    ctx.fillText("r=" + depth, ex + 3, ey - rad + 11);
  }
  GRID_CIRCLES = drawnR.length;
}

// Choose the points to draw: every one for small memories; else breadth first (shallow
// memories first), one per grid cell, matches of the filter before the rest, while the
// selected memory and its relatives are always drawn.
function choose() {
  // Locals, not the closure's variables, in the loops over every memory (much faster in V8).
  var occ = OCC, order = ORDER, vx = VX, vy = VY, match = MATCH, role = ROLE, drawn = DRAWN, seen = SIZE_FRAME;
  var born = BORN, t = state.t;
  var n = N, nd = 0, frame = ++frameNo, all = n <= LOD_ALL, filtering = state.filter !== "";
  var hasSel = state.hasSel, focus = state.focus, c0 = C0, scale = RPX / CELL, grid = GRID;
  occ.fill(0);
  for (var pass = 0; pass < (filtering ? 2 : 1); pass++) {
    var want = pass === 0 ? 1 : 0;
    for (var k = 0; k < n; k++) {
      var i = order[k];
      if ((filtering && match[i] !== want) || born[i] > t) { continue; }  // not created yet: hidden
      // |z| < 1, so the cell is inside the grid (the disk has a margin of 14 px).
      var cell = ((c0 / CELL - vy[i] * scale) | 0) * grid + ((c0 / CELL + vx[i] * scale) | 0);
      var keep = all || i === focus || (hasSel && role[i] > 0 && role[i] < 3);
      if (occ[cell] === 0) { occ[cell] = i + 1; keep = true; }
      if (keep) { drawn[nd++] = i; seen[i] = frame; }
    }
  }
  nDrawn = nd;
  for (var j = 0; j < nd; j++) { SIZE[drawn[j]] = sizeOf(drawn[j]); }
}

function drawLinks() {
  var dimPath = [], hotPath = [];
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.strokeStyle = THEME.edge;
  for (var k = 0; k < nDrawn; k++) {
    var i = DRAWN[k], p = PARENT[i];
    if (p < 0 || !exists(p)) { continue; }
    if (state.hasSel && ROLE[i] > 1 && ROLE[p] > 0) { hotPath.push(i); continue; }
    if (state.filter && !MATCH[i] && !MATCH[p]) { dimPath.push(i); continue; }
    var dx = (VX[i] - VX[p]) * RPX, dy = (VY[i] - VY[p]) * RPX;
    if (dx * dx + dy * dy < 2.25) { continue; }
    geodesicPath(VX[p], VY[p], VX[i], VY[i]);
  }
  ctx.stroke();
  ctx.beginPath(); ctx.strokeStyle = THEME.edgeDim;
  dimPath.forEach(function (i) { geodesicPath(VX[PARENT[i]], VY[PARENT[i]], VX[i], VY[i]); });
  ctx.stroke();
  ctx.lineWidth = 2;
  [2, 3].forEach(function (role) {
    ctx.beginPath(); ctx.strokeStyle = ROLE_COLORS[role];
    hotPath.forEach(function (i) {
      if ((role === 3) === (ROLE[i] === 3)) { geodesicPath(VX[PARENT[i]], VY[PARENT[i]], VX[i], VY[i]); }
    });
    ctx.stroke();
  });
  if (state.hasSel && state.selected >= 0 && PARENT[state.selected] >= 0 && ROLE[state.selected] === 1 &&
      exists(state.selected) && exists(PARENT[state.selected])) {
    var s = state.selected, p = PARENT[s];
    ctx.beginPath(); ctx.strokeStyle = ROLE_COLORS[2];
    geodesicPath(VX[p], VY[p], VX[s], VY[s]); ctx.stroke();
  }
}

function drawPoints() {
  // Buckets by colour and by one of four opacities, one path each.
  var buckets = new Map();
  for (var k = 0; k < nDrawn; k++) {
    var i = DRAWN[k], w = weight(i), role = state.hasSel ? ROLE[i] : -1;
    var alpha = MATCH[i] ? 0.35 + 0.65 * w : 0.06;
    if (role === 0) { alpha = Math.min(alpha, 0.15); } else if (role > 0) { alpha = 1; }
    var color = role > 0 ? ROLE_COLORS[role] : COLORS[LEVEL[i] % COLORS.length];
    var key = color + Math.min(3, Math.floor(alpha * 4));
    var b = buckets.get(key);
    if (!b) { b = { color: color, alpha: Math.min(3, Math.floor(alpha * 4)) / 4 + 0.12, rows: [] }; buckets.set(key, b); }
    b.rows.push(i);
  }
  buckets.forEach(function (b) {
    ctx.globalAlpha = Math.min(1, b.alpha); ctx.fillStyle = b.color;
    ctx.beginPath();
    b.rows.forEach(function (i) {
      var x = pxX(VX[i]), y = pxY(VY[i]), r = SIZE[i] + (state.hasSel && ROLE[i] > 0 ? 1 : 0);
      if (r < 1.6) { ctx.rect(x - r, y - r, 2 * r, 2 * r); } else { ctx.moveTo(x + r, y); ctx.arc(x, y, r, 0, 2 * Math.PI); }
    });
    ctx.fill();
  });
  ctx.globalAlpha = 1;
}

// Labels for the nodes with room: the focus's context first, then the shallowest drawn nodes
// (the largest first within a level), each label beside its node (on the side towards the centre,
// else the other side) unless it would overlap a label already placed.
// A label whose first strong character is right-to-left (Hebrew, Arabic, Syriac, Thaana, N'Ko, ...)
// is laid out right to left (the rule of dir="auto").
var RTL_FIRST = /^[^A-Za-z\u00c0-\u02b8\u0370-\u058f\u0900-\u1fff\u2c00-\ufb1c]*[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]/;
function drawLabels() {
  LABELED = [];
  var cand = [];
  for (var k = 0; k < nDrawn; k++) {
    var i = DRAWN[k];
    if (SIZE[i] >= 1.25 && (!state.filter || MATCH[i])) { cand.push(i); }
  }
  // The shallowest first (old roots weigh little but carry the map), size only breaking ties.
  cand.sort(function (a, b) { return LEVEL[a] - LEVEL[b] || SIZE[b] - SIZE[a] || a - b; });
  // The context of the memory in focus comes first: itself, its parent, its children.
  var c0 = state.focus >= 0 ? state.focus : state.selected;
  if (c0 >= 0) {
    var first = [c0];
    if (PARENT[c0] >= 0) { first.push(PARENT[c0]); }
    for (var q = KSTART[c0]; q < KSTART[c0 + 1] && first.length < 40; q++) { first.push(KIDS[q]); }
    var front = new Set(first.filter(function (i) { return SIZE_FRAME[i] === frameNo && (!state.filter || MATCH[i]); }));
    cand = Array.from(front).concat(cand.filter(function (i) { return !front.has(i); }));
  }
  ctx.font = "11px sans-serif"; ctx.textBaseline = "middle"; ctx.textAlign = "left";
  var boxes = [], limit = Math.min(cand.length, 600);
  for (var c = 0; c < limit && boxes.length < 60; c++) {
    var j = cand[c], text = shown(label(j));
    if (text.length > 28) { text = text.slice(0, 27) + "\u2026"; }
    if (LABEL_W[j] < 0) { LABEL_W[j] = ctx.measureText(text).width; }
    var px = pxX(VX[j]), y = pxY(VY[j]), w = LABEL_W[j], right = px <= C0 + 40, x = 0, box = null;
    for (var side = 0; side < 2 && !box; side++, right = !right) {  // the other side before giving up
      x = right ? px + SIZE[j] + 2 : px - SIZE[j] - 2 - w;
      var bx = [x - 1, y - 7, x + w + 1, y + 7];
      if (bx[0] < 0 || bx[2] > CSS || bx[1] < 0 || bx[3] > CSS) { continue; }
      var clash = false;
      for (var b = 0; b < boxes.length && !clash; b++) {
        var o = boxes[b];
        clash = bx[0] < o[2] && o[0] < bx[2] && bx[1] < o[3] && o[1] < bx[3];
      }
      if (!clash) { box = bx; }
    }
    if (!box) { continue; }
    boxes.push(box);
    LABELED.push(j);
    ctx.fillStyle = THEME.halo; ctx.fillRect(box[0], box[1], box[2] - box[0], box[3] - box[1]);
    ctx.fillStyle = state.hasSel && ROLE[j] > 0 ? ROLE_COLORS[ROLE[j]] : THEME.text;
    ctx.direction = RTL_FIRST.test(text) ? "rtl" : "ltr";  // its own direction, still drawn from x rightwards
    ctx.fillText(text, x, y);
  }
  ctx.direction = "ltr";
  ctx.textBaseline = "alphabetic";
  LABEL_BOXES = boxes;
}

function draw() {
  var t0 = performance.now();
  transformAll(); mark("draw.transform", t0);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, CSS, CSS);
  drawGrid();
  choose(); mark("draw.choose", t0);
  drawLinks(); mark("draw.links", t0);
  drawPoints(); mark("draw.points", t0);
  drawLabels();
  if (state.selected >= 0 && exists(state.selected)) {
    var s = state.selected;
    ctx.strokeStyle = THEME.mark; ctx.lineWidth = 2;
    ctx.beginPath(); ctx.arc(pxX(VX[s]), pxY(VY[s]), SIZE[s] + 5, 0, 2 * Math.PI); ctx.stroke();
  }
  canvas.setAttribute("data-points-drawn", String(nDrawn));
  canvas.setAttribute("data-labels-drawn", String(LABELED.length));
  canvas.setAttribute("data-grid-circles", String(GRID_CIRCLES));
  document.body.setAttribute("data-drawn", String(nDrawn));
  mark("draw", t0);
}

// The drawn memory nearest the pointer (within 12 px), from the occupancy grid and the labels.
function nearest(mx, my) {
  var best = -1, bd = 144, g0 = Math.floor(mx / CELL), g1 = Math.floor(my / CELL), reach = 5;
  function consider(i) {
    var dx = pxX(VX[i]) - mx, dy = pxY(VY[i]) - my, d = dx * dx + dy * dy;
    if (d < bd && (!state.filter || MATCH[i])) { bd = d; best = i; }
  }
  for (var gy = Math.max(0, g1 - reach); gy <= Math.min(GRID - 1, g1 + reach); gy++) {
    for (var gx = Math.max(0, g0 - reach); gx <= Math.min(GRID - 1, g0 + reach); gx++) {
      if (OCC[gy * GRID + gx]) { consider(OCC[gy * GRID + gx] - 1); }
    }
  }
  if (N <= LOD_ALL) { for (var k = 0; k < nDrawn; k++) { consider(DRAWN[k]); } }
  return best;
}
function eventXY(ev) {  // in the disk's own CSS pixels, also when a narrow window shrinks the canvas
  var rect = canvas.getBoundingClientRect(), sx = rect.width ? CSS / rect.width : 1, sy = rect.height ? CSS / rect.height : 1;
  return [(ev.clientX - rect.left) * sx, (ev.clientY - rect.top) * sy];
}
// The system's colour scheme changed, or the page is printed (print is light): new colours, redrawn.
["(prefers-color-scheme: dark)", "print"].forEach(function (q) {
  var mq = window.matchMedia(q), redraw = function () { readTheme(); draw(); };
  if (mq.addEventListener) { mq.addEventListener("change", redraw); } else { mq.addListener(redraw); }
});
function toDisk(p) { return [(p[0] - C0) / RPX, (C0 - p[1]) / RPX]; }
