"""The client side of the HTML report: its style sheet and its script, inlined into the page.

The script reads the page's embedded JSON (`html_report.page_data`) and builds the matrix
as one table, rebuilt as a single string on every filter change, so a run of 5,000+ pairs
stays quick. Colours: a failing cell takes its stage's hue, solid when the failure is
unexpected, a tint when it is expected (xfailed). A cell that changed since the baseline
(a run with `--baseline`, a merge with `--baseline`) is outlined and marked with a delta.
"""

PAGE_STYLE = r"""
:root { --fg:#1d1d1f; --muted:#6b6b70; --line:#d8d8dc; --bg:#fff; --head:#f4f4f6;
  --pass:#2e7d32; --xpass:#7b1fa2; --skip:#9e9e9e;
  /* one distinct hue per failing stage (and per abnormal ending) */
  --st-golden:#6d4c41; --st-capture:#283593; --st-import:#00838f; --st-torch-backend:#ef6c00;
  --st-backend:#c62828; --st-lower:#8d7300; --st-execute:#1e88e5; --st-compare:#ad1457;
  --st-crash:#212121; --st-timeout:#546e7a; --st-xpass:#8e24aa; --st-other:#757575; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg);
  margin: 0 24px 48px; }
h1 { font-size: 22px; margin: 16px 0 8px; }
h2 { font-size: 17px; margin: 24px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
code, pre { font: 12px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.muted { color: var(--muted); }
.banner { background: #fff3e0; border: 1px solid #ffb74d; padding: 8px 12px; border-radius: 4px; font-weight: 600; }
table { border-collapse: collapse; }
#run th { text-align: left; font-weight: 600; padding: 1px 16px 1px 0; color: var(--muted); white-space: nowrap; vertical-align: top; }
#run td { padding: 1px 0; word-break: break-all; }
#counts th, #counts td { border: 1px solid var(--line); padding: 3px 10px; }
#counts thead th { background: var(--head); }
#counts tbody th { text-align: left; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
#counts td[data-outcome="passed"] { color: var(--pass); font-weight: 600; }
#counts td[data-outcome="failed"] { color: var(--st-backend); font-weight: 600; }
#counts td[data-outcome="xpassed"] { color: var(--xpass); font-weight: 600; }
#filters { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; margin: 8px 0; }
#filters label { display: inline-flex; gap: 4px; align-items: center; }
#filters select, #filters input[type=search] { font: inherit; padding: 2px 4px; max-width: 420px; }
#filters input[type=search] { width: 260px; }
#legend { display: flex; flex-wrap: wrap; gap: 4px; margin: 4px 0 8px; }
#legend .cell { width: auto; padding: 1px 8px; cursor: default; }
#matrix-wrap { max-height: 75vh; overflow: auto; border: 1px solid var(--line); width: max-content; max-width: 100%; }
#matrix { width: max-content; }
#matrix th, #matrix td { border-bottom: 1px solid #eee; padding: 0; }
#matrix thead th:first-child { text-align: left; }
#matrix thead th { position: sticky; top: 0; background: var(--head); z-index: 2; padding: 4px 6px;
  border-bottom: 1px solid var(--line); }
#matrix tbody th { position: sticky; left: 0; background: var(--bg); text-align: left; font-weight: normal;
  padding: 1px 12px 1px 6px; white-space: nowrap; z-index: 1; }
#matrix tbody tr:hover th { background: #f0f4ff; }
#matrix tr.target th { background: #fff59d; }
#matrix td { padding: 1px 2px; }
.cell { display: block; width: 128px; text-align: center; border-radius: 3px; padding: 1px 4px; font-size: 12px;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; cursor: pointer; color: #fff; --k: var(--st-other);
  background: var(--k); }
.cell.f-passed { background: #e3f1e4; color: var(--pass); }
.cell.f-failed { background: var(--k); font-weight: 600; }
.cell.f-xfailed { background: color-mix(in srgb, var(--k) 16%, white); color: var(--k); box-shadow: inset 3px 0 0 var(--k); }
.cell.f-xpassed { background: var(--xpass); font-weight: 600; }
.cell.f-skipped { background: #eee; color: #757575; }
.cell.none { background: transparent; color: #bbb; cursor: default; }
.cell.dim { opacity: .25; }
.cell.changed { outline: 2px dashed #6a1b9a; outline-offset: 1px; }
.cell.selected { outline: 2px solid #000; outline-offset: 1px; }
.cell:focus-visible { outline: 2px solid #1565c0; }
#detail { position: fixed; right: 16px; bottom: 16px; width: min(760px, calc(100vw - 32px)); max-height: 70vh; overflow: auto;
  background: #fff; border: 1px solid #999; border-radius: 6px; box-shadow: 0 6px 24px rgba(0,0,0,.25); padding: 12px 16px; z-index: 10; }
#detail h3 { margin: 0 32px 6px 0; font-size: 15px; word-break: break-all; }
#detail .close { position: absolute; right: 10px; top: 8px; border: 0; background: none; font-size: 20px; cursor: pointer; }
#detail pre { background: #f7f7f9; border: 1px solid #e6e6ea; padding: 8px; white-space: pre-wrap; word-break: break-word;
  max-height: 40vh; overflow: auto; margin: 6px 0; }
#detail dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 6px 0; }
#detail dt { color: var(--muted); }
#detail dd { margin: 0; word-break: break-word; }
#detail .links a { margin-right: 14px; }
.sig { border: 1px solid var(--line); border-left: 4px solid var(--k); border-radius: 4px; margin: 6px 0; --k: var(--st-other); }
.sig > summary { padding: 6px 10px; cursor: pointer; }
.sig > summary code { word-break: break-word; }
.sig .count { display: inline-block; min-width: 3.5em; font-weight: 700; }
.sig .body { padding: 4px 12px 10px; }
.sig ul { columns: 3 320px; margin: 4px 0; padding-left: 18px; }
.sig li { break-inside: avoid; }
.tag { display: inline-block; font-size: 11px; padding: 0 5px; border-radius: 3px; margin-left: 4px; cursor: pointer;
  color: #fff; --k: var(--st-other); }
.tag.f-failed { background: var(--k); }
.tag.f-xfailed { background: color-mix(in srgb, var(--k) 18%, white); color: var(--k); }
.bar { display: flex; width: 240px; height: 12px; border-radius: 2px; overflow: hidden; background: #eee; }
.bar span { display: block; height: 100%; }
.bar .f-passed { background: var(--pass); } .bar .f-failed { background: var(--st-backend); }
.bar .f-xfailed { background: #f0a8a8; } .bar .f-xpassed { background: var(--xpass); } .bar .f-skipped { background: #bdbdbd; }
button.link { border: 0; background: none; color: #1565c0; cursor: pointer; padding: 0; font: inherit; text-decoration: underline; }
"""

PAGE_SCRIPT = r"""
(function () {
"use strict";
const started = performance.now();
const D = JSON.parse(document.getElementById("e2e-data").textContent);
const OUTCOMES = ["passed", "failed", "xfailed", "xpassed", "skipped"];
const KNOWN_STAGES = ["golden", "capture", "import", "torch-backend", "backend", "lower", "execute", "compare", "crash", "timeout", "xpass"];
const $ = (id) => document.getElementById(id);
const esc = (s) => String(s).replace(/[&<>"']/g, (ch) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[ch]));

// grid[test][config] -> cell; a cell's cause is its stage, or crash/timeout when the pair ended that way.
const grid = D.tests.map(() => new Array(D.configs.length).fill(null));
D.cells.forEach((cell, i) => {
  cell.i = i;
  cell.cause = cell.f === "passed" ? "" : ((cell.o === "crash" || cell.o === "timeout") ? cell.o : (cell.s || ""));
  if (cell.f === "failed" && cell.o === "pass") cell.cause = "xpass";
  grid[cell.t][cell.c] = cell;
});
const hue = (cause) => "var(--st-" + (KNOWN_STAGES.includes(cause) ? cause : "other") + ")";
const label = (cell) => (cell.x ? "\u0394 " : "") + plainLabel(cell);
const plainLabel = (cell) => {
  if (cell.f === "passed") return "pass";
  if (cell.f === "xpassed") return "XPASS";
  if (cell.o === "pass") return "XPASS(strict)";  // strict xfail: a listed test that passes fails the run
  if (cell.f === "skipped") return "skip";
  if (cell.cause === "crash" || cell.cause === "timeout") return cell.cause + (cell.s ? " @" + cell.s : "");
  return cell.cause || cell.o || cell.f;
};
const hover = (cell) => {
  const head = D.tests[cell.t] + " on " + D.configs[cell.c] + ": " + cell.f +
    (cell.x ? "\nsince the baseline: " + cell.x : "");
  if (cell.f === "passed") return head;
  const sig = cell.g >= 0 ? "\n" + D.signatures[cell.g] : "";
  const first = (cell.e || "").split("\n")[0].slice(0, 300);
  return head + (cell.s ? " in " + cell.s : "") + sig + (first ? "\n" + first : "") + "\n(click for details)";
};

// --- filters -------------------------------------------------------------------
const state = {configs: new Set(D.configs.map((_, i) => i)), outcome: "", stage: "", sig: -1, text: "", pair: ""};
function countBy(key) {
  const counts = new Map();
  D.cells.forEach((c) => { const k = key(c); if (k !== "" && k !== undefined && k !== -1) counts.set(k, (counts.get(k) || 0) + 1); });
  return counts;
}
function buildFilters() {
  const outcomeCounts = countBy((c) => c.f);
  const stageCounts = countBy((c) => c.cause);
  const sigCounts = countBy((c) => c.f === "passed" ? -1 : c.g);
  const stages = [...stageCounts.keys()].sort((a, b) => {
    const ia = KNOWN_STAGES.indexOf(a), ib = KNOWN_STAGES.indexOf(b);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
  });
  const sigs = [...sigCounts.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  const shorten = (s) => s.length > 110 ? s.slice(0, 107) + "..." : s;
  $("filters").innerHTML =
    '<span>configs:</span>' + D.configs.map((name, i) =>
      '<label><input type="checkbox" data-config="' + i + '" checked>' + esc(name) + '</label>').join("") +
    '<label>outcome <select id="f-outcome"><option value="">any</option>' +
      '<option value="problem">not passed</option><option value="unexpected">failed or xpassed</option>' +
      (D.baseline ? '<option value="changed">changed since the baseline (' + D.cells.filter((c) => c.x).length + ')</option>' : '') +
      OUTCOMES.filter((o) => outcomeCounts.has(o)).map((o) =>
        '<option value="' + o + '">' + o + ' (' + outcomeCounts.get(o) + ')</option>').join("") + '</select></label>' +
    '<label>stage <select id="f-stage"><option value="">any</option>' +
      stages.map((s) => '<option value="' + esc(s) + '">' + esc(s) + ' (' + stageCounts.get(s) + ')</option>').join("") +
      '</select></label>' +
    '<label>signature <select id="f-sig"><option value="-1">any</option>' +
      sigs.map(([g, n]) => '<option value="' + g + '">' + n + ' \u00b7 ' + esc(shorten(D.signatures[g])) + '</option>').join("") +
      '</select></label>' +
    '<label>test <input type="search" id="f-text" placeholder="name contains..."></label>' +
    '<button type="button" id="f-reset">reset</button>';
  $("filters").addEventListener("change", readFilters);
  let timer = 0;
  $("f-text").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(readFilters, 120); });
  $("f-reset").addEventListener("click", () => setFilters({}));
}
function readFilters() {
  state.configs = new Set([...document.querySelectorAll("#filters input[data-config]")]
    .filter((box) => box.checked).map((box) => Number(box.dataset.config)));
  state.outcome = $("f-outcome").value;
  state.stage = $("f-stage").value;
  state.sig = Number($("f-sig").value);
  state.text = $("f-text").value.trim().toLowerCase();
  render();
  writeHash();
}
// The filters live in the address (#outcome=failed&stage=backend&config=tosa&test=Mm&signature=...),
// so a view can be bookmarked or sent; #pair=<test>/<config> opens one pair's details.
function filtersFromHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  return {configs: p.get("config") ? p.get("config").split(",") : null, outcome: p.get("outcome") || "",
    stage: p.get("stage") || "", sig: p.has("signature") ? D.signatures.indexOf(p.get("signature")) : -1, text: p.get("test") || ""};
}
function writeHash() {
  const p = new URLSearchParams();
  if (state.configs.size !== D.configs.length) p.set("config", D.configs.filter((_, i) => state.configs.has(i)).join(","));
  if (state.outcome) p.set("outcome", state.outcome);
  if (state.stage) p.set("stage", state.stage);
  if (state.sig >= 0) p.set("signature", D.signatures[state.sig]);
  if (state.text) p.set("test", $("f-text").value.trim());
  if (state.pair) p.set("pair", state.pair);
  const hash = p.toString();
  if (hash !== location.hash.slice(1)) {
    try { history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search); } catch (e) { /* some file:// viewers forbid it */ }
  }
}
function setFilters(f) {
  document.querySelectorAll("#filters input[data-config]").forEach((box) => {
    box.checked = !f.configs || f.configs.includes(D.configs[Number(box.dataset.config)]);
  });
  $("f-outcome").value = f.outcome || "";
  $("f-stage").value = f.stage || "";
  $("f-sig").value = String(f.sig === undefined ? -1 : f.sig);
  $("f-text").value = f.text || "";
  readFilters();
}
function cellMatches(cell) {
  if (!cell) return false;
  const o = state.outcome;
  if (o === "problem" && cell.f === "passed") return false;
  if (o === "unexpected" && cell.f !== "failed" && cell.f !== "xpassed") return false;
  if (o === "changed" && !cell.x) return false;
  if (o && o !== "problem" && o !== "unexpected" && o !== "changed" && cell.f !== o) return false;
  if (state.stage && cell.cause !== state.stage && cell.s !== state.stage) return false;
  if (state.sig >= 0 && (cell.g !== state.sig || cell.f === "passed")) return false;
  return true;
}
const cellFilterActive = () => state.outcome !== "" || state.stage !== "" || state.sig >= 0;

// --- the matrix ----------------------------------------------------------------
function cellHtml(cell, dim) {
  if (!cell) return '<td><span class="cell none">\u2014</span></td>';
  return '<td><span class="cell f-' + esc(cell.f) + (cell.x ? " changed" : "") + (dim ? " dim" : "") + '" style="--k:' + hue(cell.cause) +
    '" data-i="' + cell.i + '" tabindex="0" title="' + esc(hover(cell)) + '">' + esc(label(cell)) + '</span></td>';
}
function render() {
  const shownConfigs = D.configs.map((_, i) => i).filter((i) => state.configs.has(i));
  const filtering = cellFilterActive();
  const parts = [];
  let rows = 0, pairs = 0;
  for (let t = 0; t < D.tests.length; t++) {
    const name = D.tests[t];
    if (state.text && !name.toLowerCase().includes(state.text)) continue;
    const cells = shownConfigs.map((c) => grid[t][c]);
    const matching = cells.map(cellMatches);
    if (filtering && !matching.some(Boolean)) continue;
    if (!cells.some(Boolean)) continue;
    rows++;
    pairs += filtering ? matching.filter(Boolean).length : cells.filter(Boolean).length;
    parts.push('<tr id="row-' + t + '"><th>' + esc(name) + '</th>' +
      cells.map((cell, k) => cellHtml(cell, filtering && !matching[k])).join("") + '</tr>');
  }
  $("matrix").tHead.innerHTML = '<tr><th>test</th>' + shownConfigs.map((c) => '<th>' + esc(D.configs[c]) + '</th>').join("") + '</tr>';
  $("matrix").tBodies[0].innerHTML = parts.join("");
  $("shown").innerHTML = 'showing <b id="shown-tests">' + rows + '</b> of ' + D.tests.length + ' tests, <b id="shown-pairs">' +
    pairs + '</b> matching pairs of ' + D.cells.length;
}
function buildLegend() {
  // Only what this run has: each failing kind as failed (solid) and xfailed (tint).
  const seen = new Set(D.cells.map((c) => c.f + " " + c.cause));
  const item = (cls, k, text) => '<span class="cell ' + cls + '" style="--k:' + k + '">' + esc(text) + '</span>';
  let html = item("f-passed", "", "passed");
  const finals = new Set(D.cells.map((c) => c.f));
  ["xpassed", "skipped"].forEach((f) => { if (finals.has(f)) html += item("f-" + f, "", f); });
  KNOWN_STAGES.concat([...new Set(D.cells.map((c) => c.cause))].filter((s) => s && !KNOWN_STAGES.includes(s))).forEach((s) => {
    if (seen.has("failed " + s)) html += item("f-failed", hue(s), s === "xpass" ? "failed: XPASS(strict)" : "failed: " + s);
    if (seen.has("xfailed " + s)) html += item("f-xfailed", hue(s), "xfailed: " + s);
  });
  if (D.cells.some((c) => c.x)) html += item("f-passed changed", "", "\u0394 changed since the baseline");
  $("legend").innerHTML = html;
}

// --- one pair's details ------------------------------------------------------------
let selected = null;
function showDetail(i) {
  const cell = D.cells[i];
  if (selected) selected.classList.remove("selected");
  selected = document.querySelector('#matrix .cell[data-i="' + i + '"]');
  if (selected) selected.classList.add("selected");
  const links = [];
  if (cell.rp) links.push('<a href="' + esc(cell.rp) + '/README.md">bundle README.md</a>', '<a href="' + esc(cell.rp) + '/repro.mlir">repro.mlir</a>', '<a href="' + esc(cell.rp) + '/">bundle folder</a>');
  if (cell.ir) links.push('<a href="' + esc(cell.ir) + '">IR given to the failing stage</a>');
  if (cell.hs) links.push('<a href="' + esc(cell.hs) + '">threads and stacks when killed</a>');
  const rows = [["outcome", cell.f + (cell.o && cell.o !== cell.f ? " (" + cell.o + ")" : "")], ["stage", cell.s], ["duration", cell.d + " s"], ["shape mode", cell.m]];
  if (cell.g >= 0) rows.splice(2, 0, ["signature", D.signatures[cell.g]]);
  if (cell.x) rows.unshift(["since the baseline", cell.x]);
  let body = '<button class="close" type="button" aria-label="close">\u00d7</button>' +
    '<h3>' + esc(D.tests[cell.t]) + ' on ' + esc(D.configs[cell.c]) + '</h3>' +
    '<dl>' + rows.filter((r) => r[1]).map((r) => '<dt>' + esc(r[0]) + '</dt><dd>' + esc(r[1]) + '</dd>').join("") + '</dl>';
  if (cell.cause === "xpass") body += '<p>The xfail set of ' + esc(D.configs[cell.c]) + ' lists this test, and it passed: delete its line.</p>';
  if (links.length) body += '<p class="links">' + links.join("") + '</p>';
  if (cell.cmd) body += '<p>rerun: <code id="rerun">' + esc(cell.cmd) + '</code> <button type="button" id="copy">copy</button></p>';
  if (cell.e) body += '<pre>' + esc(cell.e) + '</pre>';
  if (cell.n && cell.n.length) body += '<ul>' + cell.n.map((n) => '<li>' + esc(n) + '</li>').join("") + '</ul>';
  if (cell.g >= 0) body += '<p><button class="link" type="button" id="only-sig">show every pair with this signature</button></p>';
  const panel = $("detail");
  panel.innerHTML = body;
  panel.hidden = false;
  panel.querySelector(".close").onclick = closeDetail;
  state.pair = D.tests[cell.t] + "/" + D.configs[cell.c];
  writeHash();
  const copy = panel.querySelector("#copy");
  if (copy) copy.onclick = () => copyText(cell.cmd, copy);
  const only = panel.querySelector("#only-sig");
  if (only) only.onclick = () => { setFilters({sig: cell.g}); $("matrix-section").scrollIntoView(); };
}
function closeDetail() {
  $("detail").hidden = true;
  state.pair = "";
  writeHash();
}
function copyText(text, button) {
  const done = () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy"; }, 1200); };
  if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, () => {}); return; }
  const range = document.createRange();  // file:// pages are not a secure context: select and copy
  range.selectNodeContents($("rerun"));
  const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
  try { document.execCommand("copy"); done(); } catch (e) { /* the command stays selected */ }
}
document.addEventListener("click", (event) => {
  const target = event.target.closest("[data-i]");
  if (target) showDetail(Number(target.dataset.i));
  const jump = event.target.closest("[data-test]");
  if (jump) { showTest(Number(jump.dataset.test)); $("matrix-section").scrollIntoView(); }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") closeDetail();
  if (event.key === "Enter" && event.target.dataset && event.target.dataset.i) showDetail(Number(event.target.dataset.i));
});
function showTest(t) {
  if (!document.getElementById("row-" + t)) setFilters({});
  const row = document.getElementById("row-" + t);
  if (!row) return;
  document.querySelectorAll("#matrix tr.target").forEach((r) => r.classList.remove("target"));
  row.classList.add("target");
  const wrap = $("matrix-wrap");  // scroll the matrix, not the page around it
  wrap.scrollTop = row.offsetTop - wrap.clientHeight / 2;
}

// --- one section per signature ---------------------------------------------------------
function buildSignatures() {
  const groups = new Map();
  D.cells.forEach((cell) => {
    if (cell.f === "passed" || cell.g < 0) return;
    if (!groups.has(cell.g)) groups.set(cell.g, []);
    groups.get(cell.g).push(cell);
  });
  const order = [...groups.entries()].sort((a, b) => b[1].length - a[1].length || a[0] - b[0]);
  const html = order.map(([g, cells]) => {
    const byTest = new Map();
    cells.forEach((c) => { if (!byTest.has(c.t)) byTest.set(c.t, []); byTest.get(c.t).push(c); });
    const configs = [...new Set(cells.map((c) => D.configs[c.c]))].sort();
    const finals = OUTCOMES.map((o) => [o, cells.filter((c) => c.f === o).length]).filter((x) => x[1]);
    const items = [...byTest.entries()].sort((a, b) => D.tests[a[0]].localeCompare(D.tests[b[0]])).map(([t, cs]) =>
      '<li><button class="link" type="button" data-test="' + t + '">' + esc(D.tests[t]) + '</button>' +
      cs.map((c) => '<span class="tag f-' + esc(c.f) + '" style="--k:' + hue(c.cause) + '" data-i="' + c.i + '" title="' +
        esc(c.f) + ' on ' + esc(D.configs[c.c]) + '">' + esc(D.configs[c.c]) + '</span>').join("") + '</li>').join("");
    return '<details class="sig" data-sig="' + g + '" style="--k:' + hue(cells[0].cause) + '"><summary><span class="count">' + cells.length + '</span> ' +
      '<code>' + esc(D.signatures[g]) + '</code> <span class="muted">\u00b7 ' + byTest.size + (byTest.size === 1 ? ' test \u00b7 ' : ' tests \u00b7 ') +
      esc(configs.join(", ")) + ' \u00b7 ' + finals.map((x) => x[1] + ' ' + x[0]).join(", ") + '</span></summary>' +
      '<div class="body"><button class="link" type="button" data-only-sig="' + g + '">show these in the matrix</button>' +
      '<ul>' + items + '</ul></div></details>';
  });
  $("signatures").innerHTML = html.length ? html.join("") : '<p class="muted">No failures.</p>';
  $("signatures").addEventListener("click", (event) => {
    const only = event.target.closest("[data-only-sig]");
    if (only) { setFilters({sig: Number(only.dataset.onlySig)}); $("matrix-section").scrollIntoView(); }
  });
}

buildFilters();
buildLegend();
function fromHash() {
  const pair = new URLSearchParams(location.hash.slice(1)).get("pair");
  setFilters(filtersFromHash());
  if (!pair) return;
  const cut = pair.lastIndexOf("/");
  const t = D.tests.indexOf(pair.slice(0, cut)), c = D.configs.indexOf(pair.slice(cut + 1));
  const cell = t >= 0 && c >= 0 ? grid[t][c] : null;
  if (cell) { showDetail(cell.i); showTest(t); }
}
fromHash();
window.addEventListener("hashchange", fromHash);
buildSignatures();
document.body.setAttribute("data-render-ms", String(Math.round(performance.now() - started)));
document.body.setAttribute("data-ready", "1");
})();
"""
