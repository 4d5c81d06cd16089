// core.js: the data (decoded from the compact embedded format), the tree arrays and the
// Möbius transformations of the unit disk.  Concatenated with disk.js, panels.js and
// boot.js inside one strict-mode function by hypermem/viz/html.py.
var errEl = document.getElementById("hm-errors");
window.hmPendingErrors.forEach(function (m) { errEl.hidden = false; errEl.textContent += m + "\n"; });
var MARKS = {};
function mark(name, since) { MARKS[name] = Math.round((performance.now() - since) * 10) / 10; }
var tStart = performance.now();
var D = JSON.parse(document.getElementById("hm-data").textContent);
mark("parse", tStart);
var N = D.n, IDS = D.ids, TEXTS = D.texts, LABELS = D.labels;

function decode(s, Type) {
  var bytes;
  if (typeof Uint8Array.fromBase64 === "function") { bytes = Uint8Array.fromBase64(s); } else {
    var bin = atob(s), n = bin.length;
    bytes = new Uint8Array(n);
    for (var i = 0; i < n; i++) { bytes[i] = bin.charCodeAt(i); }
  }
  return new Type(bytes.buffer, bytes.byteOffset, bytes.byteLength / Type.BYTES_PER_ELEMENT);
}
var PARENT = decode(D.parent, Int32Array), RAD = decode(D.radius, Float32Array);
var ANG = decode(D.angle, Uint32Array), TIME = decode(D.time, Float32Array);
var ACCESS = D.access ? decode(D.access, Uint32Array) : null;
// BORN[i]: the first slider step at which memory i exists; its weights start there (WAT[i]).
var BORN = decode(D.born, Uint16Array), W = D.weights ? decode(D.weights, Uint16Array) : null;
var WAT = new Float64Array(N);
(function () {
  var steps = D.timeline.seconds.length;
  for (var i = 1; i < N; i++) { WAT[i] = WAT[i - 1] + steps - BORN[i - 1]; }
})();
var SQRT_C = Math.sqrt(D.config.curvature);

// Unit-disk positions: x + iy = tanh(radius / 2) exp(i angle).
var X = new Float64Array(N), Y = new Float64Array(N);
for (var i0 = 0; i0 < N; i0++) {
  var th = ANG[i0] * (2 * Math.PI / 4294967296), rr = Math.tanh(RAD[i0] / 2);
  X[i0] = rr * Math.cos(th); Y[i0] = rr * Math.sin(th);
}

// Children in CSR form (row order), roots, breadth-first order and levels.
var KSTART = new Int32Array(N + 1), KIDS = new Int32Array(N), ROOTS = [];
(function () {
  for (var i = 0; i < N; i++) { if (PARENT[i] >= 0) { KSTART[PARENT[i] + 1] += 1; } else { ROOTS.push(i); } }
  for (var k = 0; k < N; k++) { KSTART[k + 1] += KSTART[k]; }
  var fill = KSTART.slice(0, N);
  for (var j = 0; j < N; j++) { if (PARENT[j] >= 0) { KIDS[fill[PARENT[j]]++] = j; } }
})();
function nKids(i) { return KSTART[i + 1] - KSTART[i]; }
var ORDER = new Int32Array(N), LEVEL = new Int32Array(N);
(function () {
  var head = 0, tail = 0;
  ROOTS.forEach(function (r) { ORDER[tail++] = r; });
  while (head < tail) {
    var p = ORDER[head++];
    for (var k = KSTART[p]; k < KSTART[p + 1]; k++) { LEVEL[KIDS[k]] = LEVEL[p] + 1; ORDER[tail++] = KIDS[k]; }
  }
})();
mark("tree", tStart);
var ROW = new Map();
for (var i1 = 0; i1 < N; i1++) { ROW.set(IDS[i1], i1); }
function label(i) { return LABELS[i] || TEXTS[i]; }
function meta(i) { return D.meta[String(i)] || {}; }
function metaText(i) { var m = D.meta[String(i)]; return m ? JSON.stringify(m) : ""; }
// Caseless, normalised text (hypermem.retrieval.text_fold.fold in Python): NFKC, lower-cased,
// with full case folding's other changes that matter after NFKC (ß -> ss, final ς -> σ, the dot
// that a lower-cased İ leaves dropped: İstanbul meets istanbul), soft hyphens and zero-width
// characters removed; an NFD "tiếng" meets the NFC one.  ASCII text is only lower-cased.
var NON_ASCII = /[^\u0000-\u007f]/, IGNORABLE = /[\u00ad\u200b-\u200f\u2060\ufeff]/g;
var ODD = /[\u00ad\u200b-\u200f\u2060\ufeff\u0307]/;
function fold(s) {
  if (!NON_ASCII.test(s)) { return s.toLowerCase(); }
  s = s.normalize("NFKC").toLowerCase();
  if (s.indexOf("\u00df") >= 0) { s = s.replace(/\u00df/g, "ss"); }
  if (s.indexOf("\u03c2") >= 0) { s = s.replace(/\u03c2/g, "\u03c3"); }
  if (ODD.test(s)) { s = s.replace(/i\u0307/g, "i").replace(IGNORABLE, "").normalize("NFKC"); }
  return s;
}
// The filter's haystack: one folded string of every memory's id, label, text and metadata,
// "\u0001" between memories, folded once at load; HAY_AT[i] is where memory i starts (a match maps
// back by bisection).  LAB_LOW: the lower-cased labels the search box ranks by.
var LAB_LOW = new Array(N), HAY_AT = new Int32Array(N + 1), HAY;
(function () {
  var parts = new Array(N), at = 0, plain = true, i;
  for (i = 0; i < N; i++) {
    LAB_LOW[i] = label(i).toLowerCase();
    parts[i] = IDS[i] + "\n" + LAB_LOW[i] + "\n" + TEXTS[i] + "\n" + metaText(i);
    if (plain && parts[i].indexOf("\u0001") >= 0) { plain = false; }
  }
  if (plain) {  // folding keeps the "\u0001"s (and may change lengths): find the memories by them
    HAY = fold(parts.join("\u0001"));
    for (i = 0; i < N; i++) { HAY_AT[i] = at; at = HAY.indexOf("\u0001", at) + 1 || HAY.length + 1; }
  } else {  // a text holds "\u0001": fold and measure each memory
    for (i = 0; i < N; i++) { parts[i] = fold(parts[i]); HAY_AT[i] = at; at += parts[i].length + 1; }
    HAY = parts.join("\u0001");
  }
  HAY_AT[N] = N ? HAY.length + 1 : 0;
})();
function rowAt(pos) {  // the memory whose part of HAY holds position pos
  var lo = 0, hi = N - 1;
  while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (HAY_AT[mid] <= pos) { lo = mid; } else { hi = mid - 1; } }
  return lo;
}
// Mark in out (Uint8Array) every memory whose haystack contains q (folded here); returns the
// count.  A q that folds to nothing (zero-width characters only) marks every memory.
function findAll(q, out) {
  q = fold(q);
  if (!q) { out.fill(1); return N; }
  out.fill(0);
  var count = 0, pos = HAY.indexOf(q);
  while (pos >= 0) {
    var i = rowAt(pos);
    if (!out[i]) { out[i] = 1; count += 1; }
    pos = HAY.indexOf(q, HAY_AT[i + 1]);
  }
  return count;
}
var TL = D.timeline, STEPS = TL.seconds.length;
var state = { t: TL.index, selected: -1, hasSel: false, filter: "", focus: -1, sortKey: "row", sortDir: 1 };
var MATCH = new Uint8Array(N).fill(1), ROLE = new Int8Array(N);  // ROLE: 1 self, 2 ancestor, 3 descendant
var ROLE_NAMES = ["other", "self", "ancestor", "descendant"];
// Whether memory i was created at or before the slider's time (a later one is hidden).
function exists(i) { return BORN[i] <= state.t; }
function weight(i) { return BORN[i] > state.t ? 0 : W ? W[WAT[i] + state.t - BORN[i]] / D.weight_scale : 1; }
function timeOf(i) { return D.t0 + TIME[i]; }
function iso(s) { return new Date(s * 1000).toISOString().slice(0, 16).replace("T", " "); }
function depthOf(i) { return RAD[i] / SQRT_C; }
function fmt(x, d) { return (typeof x === "number" && isFinite(x)) ? x.toFixed(d) : ""; }
// Characters that would disguise stored text: the bidi embeddings, overrides, isolates and marks
// (U+202A-E, U+2066-9, U+200E/F, U+061C) and the C0/C1 controls but tab and newline.  They are shown
// as a visible escape ("\u202e", class hm-ctl in the DOM), so "rtl \u202e gnp.exe" cannot pass for
// "rtl exe.png", nor reorder the page's text around it; the data keeps them as they are stored.
var HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
var HAS_HIDDEN = new RegExp(HIDDEN.source);
function escChar(ch) { return "\\u" + (0x10000 + ch.charCodeAt(0)).toString(16).slice(1); }
function shown(s) { return String(s).replace(HIDDEN, escChar); }  // for titles and the canvas
// Stored text into an element: plain textContent, unless it holds such characters (then each one a span).
function setText(e, text) {
  var s = String(text);
  if (!HAS_HIDDEN.test(s)) { e.textContent = s; return; }
  e.textContent = "";
  var at = 0;
  s.replace(HIDDEN, function (ch, k) {
    if (k > at) { e.appendChild(document.createTextNode(s.slice(at, k))); }
    var c = document.createElement("span");
    c.className = "hm-ctl"; c.textContent = escChar(ch); c.title = "a control character stored in the text";
    e.appendChild(c); at = k + 1;
    return ch;
  });
  if (at < s.length) { e.appendChild(document.createTextNode(s.slice(at))); }
}
// An element with text (stored text: see setText) or with child nodes (an array of strings and nodes).
function el(tag, text, cls) {
  var e = document.createElement(tag);
  if (Array.isArray(text)) {
    text.forEach(function (t) { e.appendChild(typeof t === "string" ? document.createTextNode(t) : t); });
  } else if (text !== undefined && text !== null) { setText(e, text); }
  if (cls) { e.className = cls; }
  return e;
}
// One stored string as its own bidi isolate (a label beside an id: neither can reorder the other).
function isolated(text) { return el("span", text, "hm-iso"); }

// ---------------------------------------------------------------- Möbius view
// The view is a disk automorphism z -> (a z + b) / (conj(b) z + conj(a)) with
// |a|^2 - |b|^2 = 1 (a rotation composed with a translation), kept as [ar, ai, br, bi].
// The translation that moves the point w to the centre, z -> (z - w) / (1 - conj(w) z),
// is a = 1 / k, b = -w / k with k = sqrt(1 - |w|^2) (Lamping, Rao & Pirolli 1995).
var IDENTITY = [1, 0, 0, 0];
function translation(wx, wy) {
  var k = Math.sqrt(Math.max(1 - wx * wx - wy * wy, 1e-300));
  return [1 / k, 0, -wx / k, -wy / k];
}
function compose(m1, m2) {  // m1 after m2: the matrix product [[a1, b1], [b1*, a1*]] [[a2, b2], [b2*, a2*]]
  var ar = m1[0] * m2[0] - m1[1] * m2[1] + m1[2] * m2[2] + m1[3] * m2[3];
  var ai = m1[0] * m2[1] + m1[1] * m2[0] + m1[3] * m2[2] - m1[2] * m2[3];
  var br = m1[0] * m2[2] - m1[1] * m2[3] + m1[2] * m2[0] + m1[3] * m2[1];
  var bi = m1[0] * m2[3] + m1[1] * m2[2] + m1[3] * m2[0] - m1[2] * m2[1];
  var s = Math.sqrt(Math.max(ar * ar + ai * ai - br * br - bi * bi, 1e-300));
  return [ar / s, ai / s, br / s, bi / s];
}
function apply(m, x, y, out) {
  var nr = m[0] * x - m[1] * y + m[2], ni = m[0] * y + m[1] * x + m[3];
  var dr = m[2] * x + m[3] * y + m[0], di = m[2] * y - m[3] * x - m[1];
  var dd = dr * dr + di * di;
  out[0] = (nr * dr + ni * di) / dd; out[1] = (ni * dr - nr * di) / dd;
  return out;
}
// The point a fraction f of the way from the centre to w along the geodesic (a diameter).
function along(wx, wy, f) {
  var r = Math.sqrt(wx * wx + wy * wy);
  if (r < 1e-300) { return [0, 0]; }
  var s = Math.tanh(f * Math.atanh(Math.min(r, 1 - 1e-16))) / r;
  return [wx * s, wy * s];
}
