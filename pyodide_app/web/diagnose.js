// faildex diagnoser page: input, progress, and the report, built with DOM nodes
// and textContent only (log text is data, never markup). The engine runs in
// worker.js; this file never touches Python.
const HERE = new URL(".", import.meta.url);
const SITE = new URL("../../", HERE);
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const entryLink = (id, url, label) => el("a", { href: new URL(url, SITE).href }, label || id);
const mb = (n) => (n / 1e6).toFixed(n < 1e7 ? 1 : 0);

let worker = null;
let ready = false;
let lastReport = null;
let lastMarkdown = "";
let lastShare = "";

function setStatus(text, kind = "") {
  const s = $("#fdx-status");
  s.textContent = text;
  s.dataset.state = kind;
}

function startWorker() {
  worker = new Worker(new URL("worker.js", HERE), { type: "module" });
  worker.onmessage = (ev) => onWorker(ev.data);
  worker.onerror = (ev) => { setStatus(`The diagnoser failed to start: ${ev.message || "worker error"}`, "error"); };
}

function onWorker(msg) {
  if (msg.type === "ready") {
    ready = true;
    setStatus(`Ready (engine loaded in ${(msg.ms / 1000).toFixed(1)} s). Your logs stay on this machine.`, "ready");
    $("[data-testid=diagnose]").disabled = false;
  } else if (msg.type === "workers") {
    $("#fdx-status").dataset.workers = msg.ready;   // Pyodide workers ready to share a large file
  } else if (msg.type === "progress") {
    const bar = $("[data-testid=progress]");
    bar.max = msg.total || 1;
    bar.value = msg.done;
    const rate = msg.done / Math.max(msg.seconds, 1e-3);
    const left = rate > 0 ? (msg.total - msg.done) / rate : 0;
    $("#fdx-progress-text").textContent =
      `${mb(msg.done)} / ${mb(msg.total)} MB · ${mb(rate)} MB/s · ${left.toFixed(0)} s left · ${msg.file}`;
  } else if (msg.type === "report") {
    finishRun();
    lastReport = msg.report;
    lastMarkdown = msg.markdown;
    lastShare = msg.share;
    const rate = msg.bytes / Math.max(msg.seconds, 1e-3);
    $("#fdx-progress-text").textContent =
      `${mb(msg.bytes)} MB in ${msg.seconds.toFixed(2)} s (${mb(rate)} MB/s)`;
    $("[data-testid=progress]").dataset.mbps = (rate / 1e6).toFixed(1);
    $("[data-testid=progress]").dataset.engineSeconds = (msg.engineSeconds || 0).toFixed(3);
    $("[data-testid=progress]").dataset.workers = msg.workers || 1;
    renderReport(msg.report, false);
  } else if (msg.type === "cancelled") {
    finishRun();
    setStatus("Cancelled. Nothing was kept.", "cancelled");
  } else if (msg.type === "error") {
    finishRun();
    setStatus(msg.fatal ? `The diagnoser could not start: ${msg.message}` : `Error: ${msg.message}`, "error");
  }
}

function finishRun() {
  $("[data-testid=cancel]").disabled = true;
  $("[data-testid=diagnose]").disabled = !ready;
}

function collectInputs() {
  const files = Array.from($("[data-testid=file-input]").files || []).concat(droppedFiles);
  const inputs = files.map((f) => ({ name: f.name, file: f }));
  const text = $("[data-testid=log-input]").value;
  if (text.trim()) inputs.push({ name: "pasted.log", text });
  return inputs;
}

let droppedFiles = [];

function run() {
  const inputs = collectInputs();
  if (!inputs.length) {
    setStatus("Paste a log or choose files first.", "error");
    return;
  }
  $("#fdx-report").replaceChildren();
  $("[data-testid=progress]").value = 0;
  $("[data-testid=cancel]").disabled = false;
  $("[data-testid=diagnose]").disabled = true;
  setStatus(`Diagnosing ${inputs.length} input${inputs.length > 1 ? "s" : ""}…`, "busy");
  worker.postMessage({ type: "scan", inputs });
}

// ---------------------------------------------------------------- report

function section(title, ...children) {
  return el("section", { class: "fdx-section" }, el("h3", { text: title }), ...children);
}

function evidenceBlock(e) {
  const where = `${e.source}:${e.line}` + (e.rank !== undefined && e.rank !== null ? ` · rank ${e.rank}` : "")
    + (e.host ? ` · ${e.host}` : "");
  const pre = el("pre", { class: "fdx-evidence" });
  for (const b of e.before || []) pre.append(el("span", { class: "fdx-ctx", text: b + "\n" }));
  pre.append(el("mark", { text: e.text }));
  for (const a of e.after || []) pre.append(el("span", { class: "fdx-ctx", text: "\n" + a }));
  return el("div", { class: `fdx-ev fdx-${e.role}`, "data-role": e.role },
    el("div", { class: "fdx-ev-head" }, el("b", { text: e.role }), " ", where, " ",
      e.entry && e.url ? entryLink(e.entry, e.url, e.entry) : ""),
    pre);
}

function timeline(report) {
  const items = report.timeline || [];
  if (!items.length) return null;
  const lanes = new Map();
  const byRank = report.inputs.length === 1 && items.some((t) => t.rank !== undefined);
  for (const t of items) {
    const key = byRank && t.rank !== undefined ? `rank ${t.rank}` : t.source;
    if (!lanes.has(key)) lanes.set(key, []);
    lanes.get(key).push(t);
  }
  const allTs = items.every((t) => typeof t.ts === "number");
  const pos = (t) => (allTs ? t.ts : t.line);
  const lo = Math.min(...items.map(pos));
  const hi = Math.max(...items.map(pos));
  const wrap = el("div", { class: "fdx-timeline", "data-testid": "timeline" });
  for (const [name, list] of [...lanes.entries()].sort()) {
    const suspect = (report.suspects || []).some((s) => name === `rank ${s.rank}`);
    const lane = el("div", { class: suspect ? "fdx-lane fdx-suspect" : "fdx-lane" },
      el("span", { class: "fdx-lane-name", text: suspect ? `${name} (suspect)` : name }));
    const track = el("div", { class: "fdx-track" });
    for (const t of list) {
      const x = hi > lo ? ((pos(t) - lo) / (hi - lo)) * 100 : 0;
      const mark = el("span", {
        class: `fdx-mark fdx-${t.role}`, title: `${t.entry} · ${t.source}:${t.line}`,
        "data-role": t.role,
      });
      mark.style.left = `${x.toFixed(2)}%`;
      track.append(mark);
    }
    lane.append(track);
    wrap.append(lane);
  }
  return section(allTs ? "Timeline (by time)" : "Timeline (by line; the inputs carry no timestamps)", wrap);
}

// Which rank stopped the others (report.suspects): shown first, with the host to drain.
function renderSuspects(r) {
  const list = r.suspects || [];
  if (!list.length) return null;
  return el("section", { class: "fdx-section fdx-suspects", "data-testid": "suspects" },
    el("h3", { text: "Suspect ranks" }),
    el("ul", {}, list.map((s) => el("li", { "data-rank": s.rank, "data-kind": s.kind },
      el("b", { text: `rank ${s.rank}` }), s.host ? ` on ${s.host}` : "", " · ",
      el("code", { text: s.kind }), ` · ${s.why}`,
      s.evidence && s.evidence.length
        ? el("ul", {}, s.evidence.slice(0, 3).map((e) => el("li", {}, `${e.source}:${e.line} `, el("code", { text: e.text }))))
        : null))));
}

function renderReport(r, shared) {
  const out = $("#fdx-report");
  out.replaceChildren();
  if (shared) out.append(el("p", { class: "fdx-shared", text: "Shared report (redacted). The logs themselves were never uploaded." }));
  const notes = (r.inputs || []).filter((i) => i.messages && i.messages.length);
  if (notes.length) {
    out.append(el("div", { class: "fdx-notes", "data-testid": "notes" },
      notes.map((i) => el("p", { text: `${i.name}: ${i.messages.join("; ")}` }))));
  }
  const suspects = renderSuspects(r);
  if (suspects) out.append(suspects);
  const p = r.primary;
  const prim = el("div", { class: "fdx-primary", "data-testid": "primary", "data-entry-id": p ? p.id : "" });
  if (p) {
    prim.append(
      el("h2", {}, entryLink(p.id, p.url, p.title)),
      el("p", { class: "fdx-conf" }, el("b", { text: `confidence ${p.confidence.toFixed(2)}` }), " · ", p.why || ""),
    );
  } else if (r.unmatched) {
    prim.append(el("h2", { text: "No known failure matched, but the log holds errors" }));
    const u = r.unmatched;
    if (u.first_error) prim.append(el("p", {}, el("b", { text: "First error: " }), `${u.first_error.source}:${u.first_error.line} `, el("code", { text: u.first_error.text })));
    if (u.last_exception) prim.append(el("p", {}, el("b", { text: "Last exception: " }), `${u.last_exception.source}:${u.last_exception.line} `, el("code", { text: u.last_exception.text })));
    if (u.nearest && u.nearest.length) {
      prim.append(el("p", {}, "Nearest entries: ", ...u.nearest.flatMap((n, i) => [i ? ", " : "", entryLink(n.id, n.url, n.title)])));
    }
  } else {
    prim.append(el("h2", { text: "No failure found" }),
      el("p", { text: "None of the known failures appears in these logs, and no error line was found." }));
  }
  out.append(prim);
  if (r.next_action) {
    out.append(section("Next action", el("p", { text: r.next_action.do }),
      r.next_action.command ? el("pre", {}, el("code", { text: r.next_action.command })) : null));
  }
  const tl = timeline(r);
  if (tl) out.append(tl);
  if (r.evidence && r.evidence.length) out.append(section("Evidence", r.evidence.map(evidenceBlock)));
  if (r.alternatives && r.alternatives.length) {
    out.append(section("Alternatives", el("ul", { "data-testid": "alternatives" }, r.alternatives.map((a) =>
      el("li", { "data-entry-id": a.id }, entryLink(a.id, a.url, a.title), ` · ${a.confidence.toFixed(2)}`, a.why ? ` · ${a.why}` : "")))));
  }
  if (r.collateral && r.collateral.length) {
    out.append(section("Collateral (consequences, not causes)", el("ul", { "data-testid": "collateral" }, r.collateral.map((c) =>
      el("li", { "data-entry-id": c.id }, entryLink(c.id, c.url, c.title), ` ×${c.count}`, c.ranks && c.ranks.length ? ` · ranks ${c.ranks.join(",")}` : "")))));
  }
  const facts = Object.entries(r.facts || {}).filter(([k, v]) => v && (!Array.isArray(v) || v.length));
  if (facts.length) {
    out.append(section("Facts", el("dl", { class: "fdx-facts" }, facts.flatMap(([k, v]) =>
      [el("dt", { text: k }), el("dd", { text: Array.isArray(v) ? v.slice(0, 32).join(", ") : String(v) })]))));
  }
  if (r.missing && r.missing.length) {
    out.append(section("Missing facts", el("ul", {}, r.missing.map((m) =>
      el("li", {}, el("b", { text: m.fact }), `: ${m.why}`, m.how ? el("pre", {}, el("code", { text: m.how })) : null)))));
  }
  if (!shared) {
    const actions = el("div", { class: "fdx-actions" },
      el("button", { type: "button", "data-testid": "copy-markdown", class: "md-button" }, "Copy as Markdown (redacted)"),
      el("button", { type: "button", "data-testid": "download-json", class: "md-button" }, "Download JSON"),
      el("button", { type: "button", "data-testid": "share", class: "md-button" }, "Share link (redacted)"),
      el("input", { type: "text", readonly: "readonly", "data-testid": "share-url", class: "fdx-share-url", hidden: "hidden" }));
    out.append(actions);
    actions.querySelector("[data-testid=copy-markdown]").onclick = copyMarkdown;
    actions.querySelector("[data-testid=download-json]").onclick = downloadJson;
    actions.querySelector("[data-testid=share]").onclick = makeShare;
  }
  setStatus(p ? `Done: ${p.title}` : "Done.", "done");
}

async function copyMarkdown() {
  const area = el("textarea", { "data-testid": "markdown-text", class: "fdx-md", readonly: "readonly" });
  area.value = lastMarkdown;
  const old = document.querySelector("[data-testid=markdown-text]");
  if (old) old.replaceWith(area); else $("#fdx-report").append(area);
  try { await navigator.clipboard.writeText(lastMarkdown); setStatus("Markdown ticket copied (redacted).", "done"); }
  catch { area.select(); setStatus("Select and copy the Markdown below.", "done"); }
}

function downloadJson() {
  const blob = new Blob([JSON.stringify(lastReport, null, 2)], { type: "application/json" });
  const a = el("a", { href: URL.createObjectURL(blob), download: "faildex-report.json" });
  document.body.append(a);
  a.click();
  a.remove();
}

async function deflate(text) {
  const stream = new Blob([text]).stream().pipeThrough(new CompressionStream("deflate-raw"));
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function inflate(b64) {
  const bin = atob(b64.replace(/-/g, "+").replace(/_/g, "/"));
  const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate-raw"));
  return await new Response(stream).text();
}

async function makeShare() {
  // The fragment (#...) is never sent to any server.
  const url = `${location.origin}${location.pathname}#share=${await deflate(lastShare)}`;
  const box = document.querySelector("[data-testid=share-url]");
  box.hidden = false;
  box.value = url;
  box.select();
  try { await navigator.clipboard.writeText(url); } catch { /* the box shows it */ }
}

async function openShared() {
  const m = location.hash.match(/^#share=([A-Za-z0-9_-]+)$/);
  if (!m) return false;
  try {
    const data = JSON.parse(await inflate(m[1]));
    renderReport({ timeline: [], inputs: [], ...data }, true);
  } catch {
    setStatus("This share link is damaged: it could not be decoded.", "error");
  }
  return true;
}

// ---------------------------------------------------------------- examples, drop zone

async function loadExamples() {
  const select = $("[data-testid=example]");
  try {
    const examples = await (await fetch(new URL("examples.json", HERE))).json();
    for (const ex of examples) select.append(el("option", { value: ex.id, text: ex.title }));
    select.onchange = () => {
      const ex = examples.find((x) => x.id === select.value);
      if (ex) $("[data-testid=log-input]").value = ex.log;
    };
  } catch {
    select.disabled = true;
  }
}

function setupDrop() {
  const zone = $("#fdx-drop");
  const list = $("#fdx-files");
  const show = () => {
    const files = Array.from($("[data-testid=file-input]").files || []).concat(droppedFiles);
    list.textContent = files.length ? files.map((f) => `${f.name} (${mb(f.size)} MB)`).join(", ") : "";
  };
  $("[data-testid=file-input]").onchange = show;
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("fdx-over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("fdx-over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("fdx-over");
    droppedFiles = droppedFiles.concat(Array.from(e.dataTransfer.files));
    show();
  });
}

async function main() {
  startWorker();  // Pyodide starts loading now, not when the button is pressed
  $("[data-testid=diagnose]").onclick = run;
  $("[data-testid=cancel]").onclick = () => worker.postMessage({ type: "cancel" });
  $("[data-testid=clear]").onclick = () => {
    droppedFiles = [];
    $("[data-testid=file-input]").value = "";
    $("[data-testid=log-input]").value = "";
    $("#fdx-files").textContent = "";
  };
  setupDrop();
  loadExamples();
  await openShared();
  window.addEventListener("hashchange", openShared);
}

main();
