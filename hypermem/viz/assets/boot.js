// boot.js: focus + context (a click or a drag moves a memory to the centre by a Möbius
// translation of the whole disk, animated), the keyboard, the address (#focus=ID), start-up.
var anim = null, ANIM_MS = 350, REDUCED_MOTION = window.matchMedia("(prefers-reduced-motion: reduce)");
function setHash() {
  var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  if (state.focus >= 0) { params.set("focus", IDS[state.focus]); } else { params.delete("focus"); }
  var h = params.toString();
  try { history.replaceState(null, "", h ? "#" + h : window.location.pathname + window.location.search); } catch (e) {
    window.location.hash = h;
  }
}
function report() {
  document.body.setAttribute("data-focus", state.focus >= 0 ? IDS[state.focus] : "");
  document.body.setAttribute("data-timings", JSON.stringify(MARKS));
}
// Move memory i to the centre: the view becomes T(w) o view, w = view(z_i), where T(w) is
// the translation taking w to 0; the animation follows the geodesic from 0 to w.
function focusOn(i, animate) {
  var t0 = performance.now();
  if (anim) { cancelAnimationFrame(anim.frame); anim = null; }
  state.focus = i;
  var start = view.slice(), w = apply(start, i >= 0 ? X[i] : 0, i >= 0 ? Y[i] : 0, [0, 0]);
  var home = i < 0;
  function finish() {
    view = home ? IDENTITY.slice() : compose(translation(w[0], w[1]), start);
    anim = null; draw(); setHash(); report();
  }
  // No animation for a reader who asked the system for reduced motion.
  if (!animate || REDUCED_MOTION.matches) { finish(); mark("focus", t0); report(); return; }
  var began = performance.now();
  function frame() {
    var f = Math.min(1, (performance.now() - began) / ANIM_MS);
    if (f >= 1) { finish(); return; }
    var e = f * f * (3 - 2 * f), u = along(w[0], w[1], e);
    view = compose(translation(u[0], u[1]), start);
    draw();
    anim.frame = requestAnimationFrame(frame);
  }
  anim = { frame: requestAnimationFrame(frame) };
  document.body.setAttribute("data-focus", "");
}
function pick(i) {
  select(i);
  if (i >= 0) { focusOn(i, true); } else { draw(); }
}

// ---------------------------------------------------------------- pointer: click and drag
var drag = null;
canvas.addEventListener("mousedown", function (ev) {
  var p = eventXY(ev), z = toDisk(p);
  drag = { start: p, last: z, moved: false };
});
window.addEventListener("mousemove", function (ev) {
  var p = eventXY(ev);
  if (drag) {
    var z = toDisk(p), r = Math.hypot(z[0], z[1]);
    if (!drag.moved && Math.hypot(p[0] - drag.start[0], p[1] - drag.start[1]) < 4) { return; }
    if (r > 0.98 || Math.hypot(drag.last[0], drag.last[1]) > 0.98) { drag.last = z; return; }
    drag.moved = true;
    if (anim) { cancelAnimationFrame(anim.frame); anim = null; }
    // The point under the pointer follows it: T(-z) o T(last) moves last to 0, then 0 to z.
    view = compose(translation(-z[0], -z[1]), compose(translation(drag.last[0], drag.last[1]), view));
    drag.last = z;
    state.focus = -1;
    draw();
    return;
  }
  if (ev.target !== canvas) { return; }
  var n = nearest(p[0], p[1]);
  canvas.title = n >= 0 ? shown(label(n) + "\n" + TEXTS[n] + "\n[" + IDS[n] + "]") : "";
  canvas.style.cursor = n >= 0 ? "pointer" : "grab";
});
window.addEventListener("mouseup", function (ev) {
  if (!drag) { return; }
  var moved = drag.moved;
  drag = null;
  if (moved) { setHash(); report(); return; }
  if (ev.target !== canvas) { return; }
  var p = eventXY(ev), n = nearest(p[0], p[1]);
  if (n >= 0) { pick(n); } else { select(-1); draw(); }
});

// ---------------------------------------------------------------- keyboard
// The disk's keys act while the disk has the keyboard focus (or nothing has it: the page itself);
// a focused control (a tree item, a button, a header, a table row) keeps its own keys, Tab always
// moves the focus, and only a key that moves the disk is taken from the page.
function current() { return state.focus >= 0 ? state.focus : state.selected; }
document.addEventListener("keydown", function (ev) {
  var t = ev.target;
  if ((t !== canvas && t !== document.body && t !== document.documentElement) || ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
  var c = current(), next = null;
  if (ev.key === "Home" || ev.key === "0" || ev.key === "o") { select(-1); focusOn(-1, true); ev.preventDefault(); return; }
  if (c < 0) {
    if (ev.key !== "ArrowDown" || !ROOTS.length) { return; }
    next = ROOTS[0];
  } else if (ev.key === "ArrowUp" || ev.key === "u") {
    next = PARENT[c] >= 0 ? PARENT[c] : null;
  } else if (ev.key === "ArrowDown" || ev.key === "d") {
    next = nKids(c) ? KIDS[KSTART[c]] : null;
  } else if (ev.key === "ArrowLeft" || ev.key === "ArrowRight") {
    var sibs = PARENT[c] >= 0 ? kidsOf(PARENT[c]) : ROOTS, at = sibs.indexOf(c);
    next = sibs[(at + (ev.key === "ArrowRight" ? 1 : sibs.length - 1)) % sibs.length];
  } else { return; }
  ev.preventDefault();
  if (next !== null && next !== undefined) { pick(next); }
});

// ---------------------------------------------------------------- checks and start-up
// hmProbe(id): where memory id is drawn now, in unit-disk and CSS-pixel coordinates.
window.hmProbe = function (id) {
  var i = ROW.get(id);
  if (i === undefined) { return null; }
  return { x: VX[i], y: VY[i], px: pxX(VX[i]), py: pxY(VY[i]), label: label(i),
           drawn: Array.prototype.indexOf.call(DRAWN.subarray(0, nDrawn), i) >= 0, labeled: LABELED.indexOf(i) >= 0 };
};
window.hmFocus = function (id, animate) {
  var i = id === null ? -1 : ROW.get(id);
  if (i === undefined) { throw new Error("no memory " + id); }
  select(i); focusOn(i, animate !== false);
};
window.hmDraw = function () { var t0 = performance.now(); draw(); return performance.now() - t0; };
window.hmState = function () {
  return { focus: state.focus >= 0 ? IDS[state.focus] : null, selected: state.selected >= 0 ? IDS[state.selected] : null,
           animating: anim !== null, drawn: nDrawn, labelBoxes: LABEL_BOXES,
           labels: LABELED.map(function (i) { return IDS[i]; }),
           view: view.slice(), timings: MARKS, rows: nView };
};
mark("decode", tStart);
buildTree(); mark("buildTree", tStart);
showTime();
filterRows(); mark("table", tStart);
var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
if (params.get("filter")) { filterBox.value = params.get("filter"); applyFilter(filterBox.value); }
var preSel = params.get("select"), preFocus = params.get("focus");
if (preSel !== null && ROW.has(preSel)) { select(ROW.get(preSel)); }
if (preFocus !== null && ROW.has(preFocus)) {
  if (preSel === null) { select(ROW.get(preFocus)); }
  focusOn(ROW.get(preFocus), false);
} else { draw(); }
// The address changed after load (typed, a link, back/forward): focus the memory it names, or go
// home when it names none.  setHash writes the address with replaceState (no event), and the
// memory already in focus is left alone, so the two never call each other in a loop.
function followHash() {
  var id = new URLSearchParams(window.location.hash.replace(/^#/, "")).get("focus");
  if (id !== null && !ROW.has(id)) { return; }  // not a memory of this page: nothing to focus
  var i = id === null ? -1 : ROW.get(id);
  if (i === state.focus) { return; }
  select(i); focusOn(i, true);
}
window.addEventListener("hashchange", followHash);
window.addEventListener("popstate", followHash);
MARKS.ready = Math.round(performance.now() * 10) / 10;
report();
document.body.setAttribute("data-ready", "1");
