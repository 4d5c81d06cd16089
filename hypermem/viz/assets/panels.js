// panels.js: summary, details of the selected memory, time slider, the virtualised table,
// the lazily built tree, the filter and the search box.
var st = D.stats;
function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
document.getElementById("hm-summary").textContent = plural(N, "memory", "memories") + " \u00b7 " +
  plural(st.roots, "root", "roots") + " \u00b7 " +
  "max level " + st.max_level + " \u00b7 dim " + st.dim + " \u00b7 curvature " + (+Number(st.curvature).toPrecision(4)) +
  " \u00b7 layout " + D.layout + " \u00b7 decay: " + D.decay.words + " \u00b7 now " +
  new Date(D.now_s * 1000).toISOString().slice(0, 19).replace("T", " ") + " UTC" +
  (D.config.placed_by ? " \u00b7 points placed by the " + D.config.placed_by + " (depth from the encoder)" : "");

// ---------------------------------------------------------------- keyboard access
// An element that acts on a click (a tree label, a "… more" item, a sort header, a table row) is
// in the Tab order as a button: Enter and Space press it (a click, as the mouse's).
function pressable(e) {
  e.tabIndex = 0;
  if (!e.hasAttribute("role")) { e.setAttribute("role", "button"); }
  return e;
}
document.addEventListener("keydown", function (ev) {
  var t = ev.target;
  if ((ev.key !== "Enter" && ev.key !== " ") || ev.altKey || ev.ctrlKey || ev.metaKey || !t.hasAttribute ||
      t.getAttribute("tabindex") !== "0" || t === canvas) { return; }
  ev.preventDefault();
  t.click();
});

// ---------------------------------------------------------------- selection
function setRoles(i) {
  ROLE.fill(0);
  state.hasSel = i >= 0;
  if (i < 0) { return 0; }
  ROLE[i] = 1;
  for (var cur = PARENT[i]; cur >= 0; cur = PARENT[cur]) { ROLE[cur] = 2; }
  var stack = [i], count = 0;
  while (stack.length) {
    var p = stack.pop();
    for (var k = KSTART[p]; k < KSTART[p + 1]; k++) { ROLE[KIDS[k]] = 3; count += 1; stack.push(KIDS[k]); }
  }
  return count;
}
function select(i) {
  state.selected = i;
  var count = setRoles(i), panel = document.getElementById("hm-selected");
  panel.textContent = "";
  document.body.setAttribute("data-selected", i < 0 ? "" : IDS[i]);
  var related = 0;
  if (i >= 0) {
    for (var a = PARENT[i]; a >= 0; a = PARENT[a]) { related += 1; }
    related += 1 + count;
    var h3 = el("h3", label(i));
    h3.title = shown(label(i));
    panel.appendChild(h3);
    panel.appendChild(el("p", TEXTS[i], "hm-fulltext"));
    var anc = [];  // each label its own isolate, so that none reorders the arrows or its neighbours
    for (var c = PARENT[i]; c >= 0 && anc.length < 23; c = PARENT[c]) { anc.push(anc.length ? " \u2190 " : "", isolated(label(c))); }
    var valid = D.valid[String(i)] || [null, null], dl = el("dl");
    [["id", IDS[i]], ["parent", PARENT[i] < 0 ? "(root)" : [isolated(label(PARENT[i])), "  [", isolated(IDS[PARENT[i]]), "]"]],
     ["level", LEVEL[i]], [D.config.placed_by ? "depth (encoder)" : "depth", fmt(depthOf(i), 4)],
     ["time", iso(timeOf(i))],
     ["weight", exists(i) ? fmt(weight(i), 3) : "none: created after the slider's time (hidden)"], ["accesses", ACCESS ? ACCESS[i] : 0],
     ["last accessed", D.last_accessed[String(i)] || "never"],
     ["valid", (valid[0] || "\u2212\u221e") + " \u2026 " + (valid[1] || "+\u221e")],
     ["ancestors", anc.length ? anc.slice(1) : "none"], ["children", String(nKids(i))],
     ["descendants", String(count)], ["meta", JSON.stringify(meta(i))]].forEach(function (kv) {
      dl.appendChild(el("dt", kv[0])); dl.appendChild(el("dd", kv[1]));
    });
    var sug = (D.suggested || {})[String(i)];
    if (sug) {  // an auto-placed memory: the parents its hierarchy encoder suggested, best first
      var dd = el("dd", null, "hm-suggested"), info = meta(i).auto_parent || {};
      dl.appendChild(el("dt", info.by === "vote" ? "suggested parents (vote score)" : "suggested parents"));
      sug.forEach(function (s) {
        var a = el("a", [isolated(label(s[0])), " (" + fmt(s[1], 3) + ")"]);
        a.href = "#"; a.setAttribute("data-row", String(s[0]));
        a.addEventListener("click", function (ev) { ev.preventDefault(); pick(s[0]); });  // focus, as a disk click
        dd.appendChild(a); dd.appendChild(document.createTextNode(" "));
      });
      if (typeof info.threshold === "number") {
        // the choice is decided on the pair score at the threshold's lambda, which differs from the
        // ranking values listed (vote shares, or pair scores at the ranking lambda)
        var pair = typeof info.score === "number" ? "decided on its pair score " + fmt(info.score, 3) +
          (info.parent ? " > " : " \u2264 ") : "";
        dd.appendChild(el("span", pair + "threshold " + fmt(info.threshold, 3)));
      }
      if (typeof info.floor === "number" && typeof info.nearest === "number") {
        // the store's nearest-neighbour floor (hypermem.store.nearest_floor): below it, a root whatever the scores
        dd.appendChild(el("span", (info.reason ? "; none taken: " : "; ") + "nearest filed memory " +
          fmt(info.nearest, 3) + (info.nearest < info.floor ? " < " : " \u2265 ") + "floor " + fmt(info.floor, 3)));
      }
      dl.appendChild(dd);
    }
    panel.appendChild(dl);
    revealInTree(i);
  }
  document.body.setAttribute("data-highlighted", String(related));
  // Screen readers hear the selection (the details panel itself is long, so it is not a live region).
  document.getElementById("hm-status").textContent = i < 0 ? "nothing selected" :
    "selected: " + shown(label(i)) + " (level " + LEVEL[i] + ", " + plural(nKids(i), "child", "children") + ")";
  markRows(); markTree();
}

// ---------------------------------------------------------------- slider
var slider = document.getElementById("hm-time"), timeLabel = document.getElementById("hm-time-label");
slider.min = "0"; slider.max = String(STEPS - 1); slider.value = String(TL.index);
if (D.decay.constant) {
  document.getElementById("hm-time-row").hidden = true;
  document.getElementById("hm-time-note").textContent = "No decay: time does not change the weights.";
}
function showTime() {
  var s = TL.seconds[state.t];
  timeLabel.textContent = TL.labels[state.t] + (state.t === TL.index ? " (now)" : s > D.now_s ? " (future)" : "");
  slider.setAttribute("aria-valuetext", timeLabel.textContent);  // read out as the date, not the step
}
slider.addEventListener("input", function () {
  var t0 = performance.now();
  state.t = Number(slider.value); showTime();
  if (state.sortKey === "weight") { sortRows(); } else { filterRows(); }  // rows appear and disappear
  draw();
  mark("slider", t0);
});

// ---------------------------------------------------------------- table (virtualised)
var COLUMNS = [["id", "id"], ["label", "label"], ["text", "text"], ["level", "level"], ["depth", "depth"],
               ["time", "time"], ["weight", "weight"], ["access", "accesses"], ["meta", "meta"]];
var ROW_H = 24, VISIBLE = 30;
var wrap = document.getElementById("hm-table-wrap"), thead = document.querySelector("#hm-table thead tr");
var tbody = document.querySelector("#hm-table tbody"), table = document.getElementById("hm-table");
thead.setAttribute("aria-rowindex", "1");
var PERM = new Int32Array(N), VIEWROWS = new Int32Array(N), nView = N, scrolled = 0;
for (var ip = 0; ip < N; ip++) { PERM[ip] = ip; VIEWROWS[ip] = ip; }
COLUMNS.forEach(function (c) {
  var th = pressable(el("th", c[1]));
  th.setAttribute("data-key", c[0]); th.setAttribute("role", "columnheader");
  th.addEventListener("click", function () {
    state.sortDir = state.sortKey === c[0] ? -state.sortDir : 1;
    state.sortKey = c[0];
    thead.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", state.sortDir > 0 ? "ascending" : "descending");
    sortRows();
  });
  thead.appendChild(th);
});
function keyOf(k) {
  if (k === "row") { return null; }
  var out = new Array(N);
  for (var i = 0; i < N; i++) {
    out[i] = k === "id" ? IDS[i] : k === "label" ? LAB_LOW[i] : k === "text" ? TEXTS[i] : k === "level" ? LEVEL[i] :
      k === "depth" ? RAD[i] : k === "time" ? TIME[i] : k === "weight" ? weight(i) :
      k === "access" ? (ACCESS ? ACCESS[i] : 0) : metaText(i);
  }
  return out;
}
function sortRows() {
  var keys = keyOf(state.sortKey), dir = state.sortDir;
  for (var i = 0; i < N; i++) { PERM[i] = i; }
  if (keys) {
    PERM.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      return x === y ? a - b : (x < y ? -dir : dir);
    });
  }
  filterRows();
}
function filterRows() {
  // A memory created after the slider's time is left out of the rows and the counts.
  var perm = PERM, match = MATCH, rows = VIEWROWS, born = BORN, t = state.t, nv = 0, later = 0;
  for (var k = 0, n = N; k < n; k++) {
    var i = perm[k];
    if (born[i] > t) { later += 1; } else if (match[i]) { rows[nv++] = i; }
  }
  nView = nv;
  document.getElementById("hm-count").textContent = nView + " of " + plural(N - later, "memory", "memories") +
    (later ? " (" + later + " more created after the slider's time, hidden)" : "");
  renderRows();
}
// The rows on screen are a fixed pool of VISIBLE <tr> between two spacer rows; rendering
// rewrites their cells (no new elements, so little style and layout work).
var padTop = el("tr", null, "hm-pad"), padBottom = el("tr", null, "hm-pad"), POOL = [];
[padTop, padBottom].forEach(function (tr) {
  var td = el("td");
  tr.setAttribute("aria-hidden", "true");
  td.colSpan = COLUMNS.length; td.style.padding = "0"; td.style.border = "0";
  tr.appendChild(td);
});
tbody.appendChild(padTop);
for (var ir = 0; ir < Math.min(VISIBLE, N); ir++) {
  var trp = el("tr");
  COLUMNS.forEach(function () { trp.appendChild(el("td")); });
  POOL.push(trp); tbody.appendChild(trp);
}
tbody.appendChild(padBottom);
function renderRows() {
  var first = Math.max(0, Math.min(Math.floor(scrolled / ROW_H) - 5, nView - VISIBLE)), last = Math.min(nView, first + VISIBLE);
  padTop.firstChild.style.height = first * ROW_H + "px";
  table.setAttribute("aria-rowcount", String(nView + 1));  // the header row is row 1
  padBottom.firstChild.style.height = (nView - last) * ROW_H + "px";
  for (var p = 0; p < POOL.length; p++) {
    var tr = POOL[p], k = first + p;
    if (k >= last) {
      if (!tr.hidden) { tr.hidden = true; tr.removeAttribute("data-id"); tr.removeAttribute("data-row"); }
      continue;
    }
    var i = VIEWROWS[k], cells = tr.children;
    tr.hidden = false;
    tr.setAttribute("data-id", IDS[i]);
    tr.setAttribute("data-row", String(i));
    tr.className = state.hasSel && ROLE[i] > 0 ? "hm-" + ROLE_NAMES[ROLE[i]] : "";
    tr.setAttribute("aria-rowindex", String(k + 2));  // its place in the whole table, for a screen reader
    if (tr.tabIndex !== 0) { pressable(tr).setAttribute("role", "row"); }  // Enter or Space picks it
    var values = [IDS[i], label(i), TEXTS[i], LEVEL[i], fmt(depthOf(i), 3), iso(timeOf(i)), fmt(weight(i), 3),
                  ACCESS ? ACCESS[i] : 0, metaText(i)];
    for (var c = 0; c < values.length; c++) { setText(cells[c], values[c]); }
    cells[2].title = shown(TEXTS[i]);
  }
}
// A selection changes only the classes of the rows on screen.
function markRows() {
  var trs = tbody.children;
  for (var k = 0; k < trs.length; k++) {
    var tr = trs[k], i = tr.hasAttribute("data-row") ? Number(tr.getAttribute("data-row")) : -1;
    if (i >= 0) { tr.className = state.hasSel && ROLE[i] > 0 ? "hm-" + ROLE_NAMES[ROLE[i]] : ""; }
  }
}
// scrollTop is read only here, so that other updates never force a layout.
wrap.addEventListener("scroll", function () { scrolled = wrap.scrollTop; renderRows(); });
tbody.addEventListener("click", function (ev) {
  var tr = ev.target.closest("tr[data-row]");
  if (tr) { var i = Number(tr.getAttribute("data-row")); pick(state.selected === i ? -1 : i); }
});

// ---------------------------------------------------------------- tree (built as it opens)
// The hover text of a (possibly cut) label: the label whole, the text, the id.
function fullTitle(i) { return shown((LABELS[i] ? LABELS[i] + "\n" : "") + TEXTS[i] + "  [" + IDS[i] + "]"); }
var treeRoot = document.getElementById("hm-tree"), treeItems = new Map(), CHUNK = 200, FILTER_SHOWN = 60;
var fullTree = el("ul", null, "hm-tree"), filterTreeEl = null;
function treeItem(i, into, filtered) {
  var li = el("li"), lab = pressable(el("span", label(i), "hm-label"));
  lab.title = fullTitle(i);
  lab.setAttribute("data-row", String(i));
  var kids = nKids(i);
  if (kids && !filtered) {
    var det = el("details"), sum = el("summary"), ul = el("ul");
    sum.appendChild(lab); sum.appendChild(el("span", " (" + kids + ")", "hm-n"));
    det.appendChild(sum); det.appendChild(ul); li.appendChild(det);
    det.addEventListener("toggle", function () { if (det.open && !ul.firstChild) { addKids(i, ul, 0); } });
    treeItems.set(i, { label: lab, det: det, ul: ul });
  } else {
    li.appendChild(lab);
    if (!filtered) { treeItems.set(i, { label: lab, det: null, ul: null }); }
  }
  into.appendChild(li);
  return li;
}
function addRows(rows, ul, from) {
  var end = Math.min(rows.length, from + CHUNK);
  for (var k = from; k < end; k++) { treeItem(rows[k], ul, false); }
  if (end < rows.length) {
    var more = pressable(el("li", "\u2026 " + (rows.length - end) + " more", "hm-more"));
    more.addEventListener("click", function () { ul.removeChild(more); addRows(rows, ul, end); markTree(); });
    ul.appendChild(more);
  }
}
function kidsOf(i) { return Array.prototype.slice.call(KIDS.subarray(KSTART[i], KSTART[i + 1])); }
function addKids(i, ul, from) { addRows(kidsOf(i), ul, from); markTree(); }
function buildTree() {
  addRows(ROOTS, fullTree, 0);
  // Open the first levels while that stays small.
  var budget = 300;
  for (var k = 0; k < N && budget > 0; k++) {
    var i = ORDER[k], t = treeItems.get(i);
    if (LEVEL[i] > 1) { break; }
    if (t && t.det) { budget -= nKids(i); t.det.open = true; if (!t.ul.firstChild) { addRows(kidsOf(i), t.ul, 0); } }
  }
  treeRoot.appendChild(fullTree);
}
// A path deeper than DEEP_PATH levels (a long parent chain) is not opened in the tree: Chromium's
// layout gives up past ~750 nested lists (li > details > ul a level) and the page freezes. It is
// shown instead as its own open tree: its first and last DEEP_PATH / 2 levels nested, the middle as
// one "… N levels …" item.
var DEEP_PATH = 200, deepTreeEl = null;
function dropDeepPath() {
  if (deepTreeEl) { treeRoot.removeChild(deepTreeEl); deepTreeEl = null; fullTree.hidden = false; }
}
// Nests path (the memory first, its root last) into the list `into`, an open item a level; longer
// than DEEP_PATH, only its first and last DEEP_PATH / 2 levels, with one "… N levels …" item
// between. With `kept` (a Map from a memory to the list under its item), items already there are
// reused and the levels nested whole (a short path's, a long path's first half: all less than
// DEEP_PATH deep) are added to it, so other paths share them; a long path's last half is its own.
// Returns the memory's label.
function nestPath(path, into, kept) {
  var half = DEEP_PATH / 2, n = path.length, deep = n > DEEP_PATH, lab = null;
  for (var k = n - 1; k >= 0; k--) {
    if (deep && k === half - 1) {
      var gap = el("li", "\u2026 " + (n - 2 * half) + " levels \u2026", "hm-more");
      gap.title = "levels " + half + " to " + (n - half - 1) + " of this memory's path (not nested: too deep to lay out)";
      into.appendChild(gap);
    }
    if (deep && k >= half && k < n - half) { continue; }
    var shared = kept && (!deep || k >= n - half);
    if (shared && kept.has(path[k])) { into = kept.get(path[k]); continue; }
    var li = treeItem(path[k], into, true), sub = el("ul");
    li.appendChild(sub); into = sub;
    if (shared) { kept.set(path[k], sub); }
    if (k === 0) { lab = li.querySelector(".hm-label"); }
  }
  return lab;
}
function showDeepPath(path) {  // path: the memory first, its root last; returns the memory's label
  fullTree.hidden = true;
  deepTreeEl = el("ul", null, "hm-tree");
  var lab = nestPath(path, deepTreeEl, null);
  treeRoot.appendChild(deepTreeEl);
  return lab;
}
function openPath(path) {  // opens the full tree along path (the memory first); false if it cannot
  for (var k = path.length - 1; k >= 0; k--) {
    var node = path[k], t = treeItems.get(node);
    while (!t) {  // not built yet: it is beyond a "more" link of its parent's list
      var more = (PARENT[node] < 0 ? fullTree : treeItems.get(PARENT[node]).ul).querySelector(":scope > .hm-more");
      if (!more) { return false; }
      more.click(); t = treeItems.get(node);
    }
    if (t.det && (k > 0 || nKids(node) <= CHUNK)) {
      t.det.open = true;
      if (!t.ul.firstChild) { addRows(kidsOf(node), t.ul, 0); }
    }
  }
  return true;
}
function revealInTree(i) {
  if (filterTreeEl) { return; }
  var path = [];
  for (var c = i; c >= 0; c = PARENT[c]) { path.push(c); }
  dropDeepPath();
  var lab;
  if (path.length > DEEP_PATH) { lab = showDeepPath(path); }
  else if (openPath(path)) { lab = treeItems.get(i).label; }
  else { return; }
  var top = lab.offsetTop - treeRoot.offsetTop;
  if (top < treeRoot.scrollTop || top > treeRoot.scrollTop + treeRoot.clientHeight - 20) {
    treeRoot.scrollTop = Math.max(0, top - treeRoot.clientHeight / 3);
  }
}
function markTree() {
  treeItems.forEach(function (t, i) {
    var role = state.hasSel ? ROLE[i] : 0;
    t.label.className = "hm-label" + (role ? " hm-" + ROLE_NAMES[role] : "");
  });
}
// While filtering: the first matches with their ancestors, as a separate open tree (a path deeper
// than DEEP_PATH levels cut as nestPath does).
function filterTree(count) {
  dropDeepPath();
  if (filterTreeEl) { treeRoot.removeChild(filterTreeEl); filterTreeEl = null; }
  if (!state.filter) { fullTree.hidden = false; return; }
  fullTree.hidden = true;
  filterTreeEl = el("ul", null, "hm-tree");
  var keep = new Map(), shown = 0, tails = 0;  // tails: the items of long paths' own last halves
  for (var i = 0; i < N && shown < FILTER_SHOWN && keep.size + tails < 4 * FILTER_SHOWN; i++) {
    if (!MATCH[i]) { continue; }
    shown += 1;
    var path = [];
    for (var c = i; c >= 0; c = PARENT[c]) { path.push(c); }
    nestPath(path, filterTreeEl, keep);
    if (path.length > DEEP_PATH) { tails += DEEP_PATH / 2; }
  }
  if (shown < count) { filterTreeEl.appendChild(el("li", "(the first " + shown + " of " + count + " matches)", "hm-more")); }
  treeRoot.appendChild(filterTreeEl);
}
treeRoot.addEventListener("click", function (ev) {
  var lab = ev.target.closest(".hm-label");
  if (!lab) { return; }
  ev.preventDefault();
  var i = Number(lab.getAttribute("data-row"));
  pick(state.selected === i ? -1 : i);
});

// ---------------------------------------------------------------- filter
var filterBox = document.getElementById("hm-filter");
function applyFilter(text) {
  var t0 = performance.now();
  state.filter = text.trim().toLowerCase();
  var count = N;
  if (!state.filter) { MATCH.fill(1); } else { count = findAll(state.filter, MATCH); }
  mark("filter.match", t0);
  filterRows(); mark("filter.rows", t0);
  filterTree(count); mark("filter.tree", t0);
  draw();
  mark("filter", t0);
}
filterBox.addEventListener("input", function () { applyFilter(filterBox.value); });

// ---------------------------------------------------------------- search (focuses a memory)
var searchBox = document.getElementById("hm-search"), results = document.getElementById("hm-results");
function searchRows(q, limit) {
  q = q.trim().toLowerCase();
  var out = [];
  if (!q) { return out; }
  var seen = new Uint8Array(N), inText = new Uint8Array(N);
  findAll(q, inText);
  var tests = [function (i) { return LAB_LOW[i] === q; }, function (i) { return LAB_LOW[i].indexOf(q) === 0; },
               function (i) { return LAB_LOW[i].indexOf(q) >= 0; }, function (i) { return inText[i] === 1; }];
  for (var t = 0; t < tests.length && out.length < limit; t++) {
    for (var i = 0; i < N && out.length < limit; i++) {
      if (!seen[i] && tests[t](i)) { seen[i] = 1; out.push(i); }
    }
  }
  return out;
}
function showResults() {
  var t0 = performance.now();
  results.textContent = "";
  searchRows(searchBox.value, 10).forEach(function (i) {
    var li = el("li"), b = el("button", label(i));
    b.type = "button"; b.title = fullTitle(i); b.setAttribute("data-row", String(i));
    li.appendChild(b); li.appendChild(el("span", " " + IDS[i], "hm-n"));
    results.appendChild(li);
  });
  mark("search", t0);
}
searchBox.addEventListener("input", showResults);
searchBox.addEventListener("keydown", function (ev) {
  if (ev.key !== "Enter") { return; }
  ev.preventDefault();
  var first = searchRows(searchBox.value, 1);
  if (first.length) { pick(first[0]); }
});
results.addEventListener("click", function (ev) {
  var b = ev.target.closest("button[data-row]");
  if (b) { pick(Number(b.getAttribute("data-row"))); }
});
