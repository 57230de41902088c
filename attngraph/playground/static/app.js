// attngraph playground: the page's only script (no library, nothing from a CDN).
// As the spec is typed, it is sent to POST /api/check (debounced); the answer's
// errors are marked at their line and column, and its two SVG diagrams replace the
// old ones. Clicking a drawn node selects the lines that write it; moving the cursor
// marks the drawn nodes of the node under it.
"use strict";

const DEBOUNCE_MS = 150;
const $ = (id) => document.getElementById(id);
const state = {
  seq: 0,            // the latest check sent; older answers are dropped
  timer: 0,
  result: null,      // the latest answer
  good: null,        // the latest answer without errors (diagrams, spans)
  specId: null,      // the listed spec being edited
  name: "<spec>",    // its name in error messages
  picked: null,      // the node id whose boxes are marked
  lineHeight: 18,
  charWidth: 7.8,
};

function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
  }[c]));
}

async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const resp = await fetch(path, init);
  const data = await resp.json();
  if (!resp.ok) {
    const err = new Error(data.error || resp.statusText);
    err.data = data;
    err.status = resp.status;
    throw err;
  }
  return data;
}

function setStatus(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = "status " + (kind || "");
}

// ---- the editor: gutter, backdrop, bubble ------------------------------------------
const src = () => $("source");

function lines() { return src().value.split("\n"); }

function lineStart(text, line) {  // offset of 1-based line `line`
  let at = 0;
  for (let i = 1; i < line; i += 1) {
    const next = text.indexOf("\n", at);
    if (next < 0) return text.length;
    at = next + 1;
  }
  return at;
}

function cursorLine() {
  const ta = src();
  return ta.value.slice(0, ta.selectionStart).split("\n").length;
}

function errorsByLine() {
  const out = new Map();
  for (const e of (state.result && state.result.errors) || []) {
    const line = e.line > 0 ? e.line : 1;
    if (!out.has(line)) out.set(line, []);
    out.get(line).push(e);
  }
  return out;
}

function selectedLines() {
  const span = state.picked && spanOf(state.picked);
  return span ? [span.line, span.end_line] : [0, -1];
}

function paintEditor() {
  const text = lines();
  const errs = errorsByLine();
  const [s0, s1] = selectedLines();
  const gutter = [];
  const back = [];
  text.forEach((content, i) => {
    const n = i + 1;
    const here = errs.get(n);
    const sel = n >= s0 && n <= s1;
    const cls = (here ? " err" : "") + (sel ? " sel" : "");
    const tip = here ? ` title="${esc(here.map((e) => e.message).join("\n"))}"` : "";
    gutter.push(`<div class="g${cls}" data-line="${n}"${tip}>${n}</div>`);
    let body = esc(content) || " ";
    if (here) {
      const col = Math.min(Math.max(here[0].col, 1), content.length + 1);
      const rest = content.slice(col - 1);
      const word = (rest.match(/^[^\s,:{}[\]]+/) || [rest.slice(0, 1) || " "])[0];
      body = esc(content.slice(0, col - 1)) + `<span class="mark" data-line="${n}">`
        + esc(word) + "</span>" + esc(content.slice(col - 1 + word.length));
    }
    back.push(`<div class="l${cls}" data-line="${n}">${body}</div>`);
  });
  $("gutter-lines").innerHTML = gutter.join("");
  $("backdrop-lines").innerHTML = back.join("");
  syncScroll();
  paintBubble();
}

function syncScroll() {
  const ta = src();
  $("backdrop-lines").style.transform = `translate(${-ta.scrollLeft}px, ${-ta.scrollTop}px)`;
  $("gutter-lines").style.transform = `translateY(${-ta.scrollTop}px)`;
  paintBubble();
}

function paintBubble() {
  const bubble = $("bubble");
  const errs = errorsByLine();
  const line = cursorLine();
  let list = errs.get(line);
  if (!list && errs.size && document.activeElement !== src()) list = errs.values().next().value;
  if (!list) { bubble.hidden = true; return; }
  const e = list[0];
  const ta = src();
  const top = 6 + (Math.max(e.line, 1)) * state.lineHeight - ta.scrollTop + 2;
  const left = 8 + (Math.max(e.col, 1) - 1) * state.charWidth - ta.scrollLeft;
  bubble.style.top = `${top}px`;
  bubble.style.left = `${Math.max(4, Math.min(left, ta.clientWidth - 240))}px`;
  bubble.innerHTML = `<b>${e.line}:${e.col}</b> ${esc(e.message)}`
    + (e.hint ? `<div class="hint">hint: ${esc(e.hint)}</div>` : "");
  bubble.dataset.line = e.line;
  bubble.hidden = false;
}

function measure() {
  const probe = document.createElement("span");
  probe.style.font = getComputedStyle(src()).font;
  probe.style.position = "absolute";
  probe.style.visibility = "hidden";
  probe.style.whiteSpace = "pre";
  probe.textContent = "x".repeat(100);
  document.body.appendChild(probe);
  state.charWidth = probe.getBoundingClientRect().width / 100 || state.charWidth;
  probe.remove();
  state.lineHeight = parseFloat(getComputedStyle(src()).lineHeight) || state.lineHeight;
}

function selectLines(first, last, col) {
  const ta = src();
  const text = ta.value;
  const start = lineStart(text, first) + (col ? col - 1 : 0);
  let end = lineStart(text, last + 1);
  if (end > start && text[end - 1] === "\n") end -= 1;
  ta.focus();
  ta.setSelectionRange(start, end);
  const top = (first - 1) * state.lineHeight;
  if (top < ta.scrollTop || top > ta.scrollTop + ta.clientHeight - 2 * state.lineHeight) {
    ta.scrollTop = Math.max(0, top - ta.clientHeight / 3);
  }
  syncScroll();
}

// ---- checking ------------------------------------------------------------------------
function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(check, DEBOUNCE_MS);
}

async function check() {
  const seq = ++state.seq;
  const text = src().value;
  setStatus("checking…");
  let result;
  try {
    result = await api("/api/check", { text, name: state.name });
  } catch (err) {
    if (seq === state.seq) setStatus(`not checked: ${err.message}`, "bad");
    return;
  }
  if (seq !== state.seq) return;
  state.result = result;
  if (result.svg.architecture || result.svg.unrolled) state.good = result;
  showErrors(result);
  showDiagrams(result);
  if (result.describe) showInfo(result);
  paintEditor();
  document.body.dataset.checked = String(seq);
  const n = result.errors.length;
  setStatus(n ? `${n} error${n > 1 ? "s" : ""}` : `ok · ${result.name} · ${result.ms} ms`,
    n ? "bad" : "good");
  if (!n) { refreshDiff(); refreshRuns(); }
}

function showErrors(result) {
  $("errors").innerHTML = result.errors.map((e) => `<li data-line="${e.line}" data-col="${e.col}">`
    + `<span class="at">${e.line > 0 ? `${e.line}:${e.col}` : "spec"}</span>${esc(e.message)}`
    + (e.hint ? `<div class="hint">hint: ${esc(e.hint)}</div>` : "") + "</li>").join("");
}

function showDiagrams(result) {
  for (const view of ["architecture", "unrolled"]) {
    const box = $(`svg-${view}`);
    const svg = result.svg[view];
    if (svg) {
      box.innerHTML = svg.slice(svg.indexOf("<svg"));
      const el = box.querySelector("svg");
      if (el) { el.removeAttribute("width"); el.removeAttribute("height"); }
      box.classList.remove("stale");
      box.dataset.version = String(state.seq);
      for (const g of box.querySelectorAll("g.node")) {
        const title = g.querySelector("title");
        const target = title && result.targets[view][title.textContent];
        if (target) g.dataset.node = target;
      }
    } else {
      box.classList.add("stale");
    }
  }
  pickFromCursor();
}

function showInfo(result) {
  $("describe").textContent = result.describe.text;
  const body = $("params").querySelector("tbody");
  body.innerHTML = result.params.rows.map((r) => `<tr${r.line ? ` data-line="${r.line}"` : ""}>`
    + `<td>${esc(r.node)}</td><td>${esc(r.kind)}</td><td class="num">${r.params.toLocaleString("en")}</td></tr>`).join("");
  $("params").querySelector("tfoot").innerHTML = `<tr><th colspan="2">total</th>`
    + `<th class="num">${result.params.total.toLocaleString("en")}</th></tr>`;
}

// ---- node <-> lines ------------------------------------------------------------------
function spanOf(id) {
  const nodes = (state.good && state.good.nodes) || [];
  return nodes.find((s) => s.id === id) || null;
}

function markNode(id) {
  state.picked = id;
  for (const box of document.querySelectorAll(".svg")) {
    const drawn = new Set([...box.querySelectorAll("g.node[data-node]")].map((g) => g.dataset.node));
    let shown = id;  // a node not drawn in this view: its nearest drawn owner (dec/score: dec)
    while (shown && !drawn.has(shown) && shown.includes("/")) shown = shown.slice(0, shown.lastIndexOf("/"));
    for (const g of box.querySelectorAll("g.node")) {
      g.classList.toggle("picked", Boolean(shown) && g.dataset.node === shown);
    }
  }
}

function pickFromCursor() {
  const nodes = (state.good && state.good.nodes) || [];
  const line = cursorLine();
  let best = null;
  for (const s of nodes) {
    if (line >= s.line && line <= s.end_line
        && (!best || s.end_line - s.line < best.end_line - best.line)) best = s;
  }
  const id = best ? best.id : null;
  if (id !== state.picked) { markNode(id); paintEditor(); }
}

function onDiagramClick(event) {
  const g = event.target.closest("g.node[data-node]");
  if (!g) return;
  const span = spanOf(g.dataset.node);
  if (!span) return;
  markNode(span.id);
  selectLines(span.line, span.end_line, 0);
  paintEditor();
}

// ---- specs, files, diff, runs --------------------------------------------------------
const GROUPS = { catalog: "catalog", mechanisms: "mechanisms", file: "your files" };

async function loadList() {
  const data = await api("/api/specs");
  state.root = data.root;
  const html = ['<option value="">(choose a spec)</option>'];
  for (const [group, label] of Object.entries(GROUPS)) {
    const rows = data.specs.filter((s) => s.group === group);
    if (!rows.length) continue;
    html.push(`<optgroup label="${esc(label)}">`
      + rows.map((s) => `<option value="${esc(s.id)}">${esc(s.name)}</option>`).join("") + "</optgroup>");
  }
  $("spec-list").innerHTML = html.join("");
  $("diff-other").innerHTML = html.join("");
}

async function openSpec(id) {
  if (!id) return;
  try {
    const spec = await api(`/api/spec?id=${encodeURIComponent(id)}`);
    state.specId = spec.id;
    state.name = spec.name;
    $("save-path").value = spec.path || spec.name.split("/").pop();
    src().value = spec.text;
    src().setSelectionRange(0, 0);
    src().scrollTop = 0;
    $("spec-list").value = spec.id;
    history.replaceState(null, "", `#${encodeURIComponent(spec.id)}`);
    check();
  } catch (err) {
    setStatus(`cannot open: ${err.message}`, "bad");
  }
}

async function save() {
  const path = $("save-path").value.trim();
  if (!path) { setStatus("give a file path to save to", "bad"); return; }
  if (!window.confirm(`Save to ${path} in ${state.root}?\nAn existing file is replaced.`)) return;
  try {
    const out = await api("/api/save", { path, text: src().value, confirm: true });
    state.name = out.path;
    setStatus(`saved ${out.path} (${out.bytes} bytes)`, "good");
    await loadList();
    $("spec-list").value = out.id;
  } catch (err) {
    setStatus(`not saved: ${err.message}`, "bad");
  }
}

async function refreshDiff() {
  const other = $("diff-other").value;
  if (!other || !$("tab-diff").classList.contains("active")) return;
  try {
    const out = await api("/api/diff", { text: src().value, name: state.name, other });
    $("diff").textContent = out.ok ? out.text
      : out.errors.map((e) => `${e.spec}: ${e.where}: ${e.message}`).join("\n");
  } catch (err) {
    $("diff").textContent = `no diff: ${err.message}`;
  }
}

async function refreshRuns() {
  const name = state.result && state.result.name;
  if (!name || !$("tab-attention").classList.contains("active")) return;
  const data = await api(`/api/runs?spec=${encodeURIComponent(name)}`);
  const sel = $("run-list");
  const keep = sel.value;
  sel.innerHTML = data.runs.map((r) => `<option value="${esc(r.run)}">${esc(r.run)} (${esc(r.task)})</option>`).join("");
  if (data.runs.some((r) => r.run === keep)) sel.value = keep;
  if (!data.runs.length) {
    $("attention-note").textContent = `no trained run of ${name} in ${state.root}: `
      + `train one with  attngraph train SPEC --out runs/${name}`;
    $("attention").hidden = true;
    return;
  }
  showAttention();
}

async function showAttention() {
  const run = $("run-list").value;
  if (!run) return;
  $("attention-note").textContent = `drawing ${run}…`;
  const resp = await fetch(`/api/attention?run=${encodeURIComponent(run)}`);
  if (!resp.ok) {
    const data = await resp.json().catch(() => ({}));
    $("attention-note").textContent = `no picture: ${data.error || resp.statusText}`;
    $("attention").hidden = true;
    return;
  }
  const img = $("attention");
  if (img.src.startsWith("blob:")) URL.revokeObjectURL(img.src);
  img.src = URL.createObjectURL(await resp.blob());
  img.hidden = false;
  $("attention-note").textContent = `${run}: its first test example`;
}

function showTab(name) {
  for (const b of document.querySelectorAll(".tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const p of document.querySelectorAll(".panel")) p.classList.toggle("active", p.id === `tab-${name}`);
  if (name === "diff") refreshDiff();
  if (name === "attention") refreshRuns();
}

// ---- wiring --------------------------------------------------------------------------
function onKey(event) {
  if (event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.metaKey) {
    event.preventDefault();  // YAML indents with spaces
    document.execCommand("insertText", false, "  ");
  }
}

async function start() {
  measure();
  const ta = src();
  ta.addEventListener("input", () => { paintEditor(); schedule(); });
  ta.addEventListener("scroll", syncScroll);
  ta.addEventListener("keydown", onKey);
  ta.addEventListener("blur", paintBubble);
  document.addEventListener("selectionchange", () => {
    if (document.activeElement === ta) { pickFromCursor(); paintBubble(); }
  });
  for (const box of document.querySelectorAll(".svg")) box.addEventListener("click", onDiagramClick);
  $("errors").addEventListener("click", (event) => {
    const li = event.target.closest("li[data-line]");
    if (li && Number(li.dataset.line) > 0) selectLines(Number(li.dataset.line), Number(li.dataset.line), Number(li.dataset.col));
  });
  $("params").addEventListener("click", (event) => {
    const tr = event.target.closest("tr[data-line]");
    if (tr) selectLines(Number(tr.dataset.line), Number(tr.dataset.line), 0);
  });
  $("spec-list").addEventListener("change", (event) => openSpec(event.target.value));
  $("diff-other").addEventListener("change", refreshDiff);
  $("run-list").addEventListener("change", showAttention);
  $("save").addEventListener("click", save);
  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));
  window.addEventListener("resize", () => { measure(); paintBubble(); });
  paintEditor();
  try {
    await loadList();
  } catch (err) {
    setStatus(`cannot list specs: ${err.message}`, "bad");
    return;
  }
  const wanted = decodeURIComponent(location.hash.slice(1));
  const first = wanted && $("spec-list").querySelector(`option[value="${CSS.escape(wanted)}"]`) ? wanted
    : (($("spec-list").querySelector('option[value="catalog:global_attention"]') && "catalog:global_attention")
       || ($("spec-list").options[1] && $("spec-list").options[1].value));
  if (first) await openSpec(first);
  else setStatus("ready: type a spec", "");
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", start);
