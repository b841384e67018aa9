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
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const entryLink = (id, url, label) => el("a", { href: new URL(url, SITE).href }, label || id);
const mb = (n) => (n / 1e6).toFixed(n < 1e7 ? 1 : 0);
const plural = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;

let worker = null;
let ready = false;
let queued = false;         // Diagnose pressed while the engine was still loading
let busy = false;
let lastReport = null;
let lastMarkdown = "";
let lastShare = "";
let lastExcerpt = "";
let categories = {};        // nearest entry id -> its category (where a new entry goes)
let manifest = {};
let droppedFiles = [];
let lastTouched = "text";   // the input changed last: it wins when both are filled in
let runSource = null;       // what the running diagnosis reads: {kind, text}
let runStarted = 0;         // performance.now() when Diagnose started it

// ---------------------------------------------------------------- words for the report

// The confidence bands the engine gives (reason.band), in words.
const BANDS = {
  certain: { word: "Certain", say: "The log matches this failure's defining message." },
  likely: { word: "Likely", say: "The log fits this failure best, but not beyond doubt." },
  guess: { word: "A guess", say: "Not sure: the log fits the failures below about as well." },
};

// ---------------------------------------------------------------- status and state

function setStatus(text, kind = "") {
  const s = $("#fdx-status");
  s.textContent = text;
  s.dataset.state = kind;
}

function readyText() {
  return "Ready. Your logs stay on this machine.";
}

function resetProgress() {
  const bar = $("[data-testid=progress]");
  bar.value = 0;
  bar.max = 1;
  $("#fdx-progress-text").textContent = "";
}

function clearReport() {
  $("#fdx-report").replaceChildren();
  lastReport = null;
  lastMarkdown = lastShare = lastExcerpt = "";
  if (location.hash.startsWith("#share=")) history.replaceState(null, "", location.pathname + location.search);
}

function chosenFiles() {
  return Array.from($("[data-testid=file-input]").files || []).concat(droppedFiles);
}

// Pasted text and files are two inputs: one of them is diagnosed, and the page says which.
function source() {
  const text = $("[data-testid=log-input]").value;
  const files = chosenFiles();
  const hasText = text.trim() !== "";
  const both = hasText && files.length > 0;
  const kind = both ? lastTouched : hasText ? "text" : files.length ? "files" : null;
  return { kind, both, text, files };
}

function describe(src) {
  if (src.kind === "text") {
    const lines = src.text.split("\n").filter((l) => l.trim()).length;
    return `the pasted text (${plural(lines, "line")})`;
  }
  if (src.kind === "files") {
    const names = src.files.map((f) => f.name);
    const shown = names.slice(0, 4).join(", ") + (names.length > 4 ? ` and ${names.length - 4} more` : "");
    return `${plural(names.length, "file")} (${shown})`;
  }
  return "";
}

function showSource() {
  const src = source();
  const choice = $("[data-testid=source-choice]");
  choice.hidden = !src.both;
  if (src.both) choice.querySelector(`input[value=${src.kind}]`).checked = true;
  $("#fdx-files").textContent = src.files.map((f) => `${f.name} (${mb(f.size)} MB)`).join(", ");
  for (const box of document.querySelectorAll(".fdx-input")) {
    box.dataset.active = String(box.dataset.source === src.kind);
  }
  const other = src.both ? (src.kind === "text" ? " The chosen files are not used." : " The pasted text is not used.") : "";
  $("[data-testid=using]").textContent = src.kind ? `Will diagnose ${describe(src)}.${other}` : "";
}

function setDiagnoseButton() {
  const b = $("[data-testid=diagnose]");
  b.disabled = busy;
  b.textContent = queued ? "Queued…" : "Diagnose";
  b.setAttribute("aria-busy", String(busy || queued));
}

// ---------------------------------------------------------------- worker

function startWorker() {
  worker = new Worker(new URL("worker.js", HERE), { type: "module" });
  worker.onmessage = (ev) => onWorker(ev.data);
  worker.onerror = (ev) => { setStatus(`The diagnoser failed to start: ${ev.message || "worker error"}`, "error"); };
}

function onWorker(msg) {
  if (msg.type === "ready") {
    ready = true;
    $("#fdx-status").dataset.readyMs = msg.ms;
    $("#fdx-status").dataset.snapshot = msg.snapshot ? "1" : "0";   // started from the build's snapshot
    if (queued) {
      queued = false;
      run();
    } else {
      setStatus(readyText(), "ready");
      setDiagnoseButton();
    }
  } else if (msg.type === "workers") {
    $("#fdx-status").dataset.workers = msg.ready;   // Pyodide workers ready to share a large file
  } else if (msg.type === "progress") {
    if (!busy) return;   // a message sent before Cancel or Clear reached the worker
    const bar = $("[data-testid=progress]");
    bar.max = msg.total || 1;
    bar.value = msg.done;
    const rate = msg.done / Math.max(msg.seconds, 1e-3);
    const left = rate > 0 ? (msg.total - msg.done) / rate : 0;
    $("#fdx-progress-text").textContent =
      `${mb(msg.done)} / ${mb(msg.total)} MB · ${mb(rate)} MB/s · ${left.toFixed(0)} s left · ${msg.file}`;
  } else if (msg.type === "report") {
    if (!busy) return;
    finishRun();
    lastReport = msg.report;
    lastMarkdown = msg.markdown;
    lastShare = msg.share;
    lastExcerpt = msg.excerpt || "";
    categories = msg.categories || {};
    const rate = msg.bytes / Math.max(msg.seconds, 1e-3);
    // the size and speed only say something for a file of some size; for a paste they are noise
    $("#fdx-progress-text").textContent = msg.bytes >= 1e6
      ? `${mb(msg.bytes)} MB in ${msg.seconds.toFixed(2)} s (${mb(rate)} MB/s)` : "";
    const bar = $("[data-testid=progress]");
    bar.max = 1;
    bar.value = 1;
    bar.dataset.mbps = (rate / 1e6).toFixed(1);
    bar.dataset.engineSeconds = (msg.engineSeconds || 0).toFixed(3);
    bar.dataset.workers = msg.workers || 1;
    renderReport(msg.view, { source: runSource });
    // from Diagnose to the report on screen, by the page's clock (bench/browser.py)
    bar.dataset.seconds = ((performance.now() - runStarted) / 1000).toFixed(3);
  } else if (msg.type === "cancelled") {
    finishRun();
    resetProgress();
    setStatus("Cancelled. Nothing was kept.", "cancelled");
  } else if (msg.type === "error") {
    finishRun();
    setStatus(msg.fatal ? `The diagnoser could not start: ${msg.message}` : `Error: ${msg.message}`, "error");
  }
}

function finishRun() {
  busy = false;
  $("[data-testid=cancel]").disabled = true;
  setDiagnoseButton();
}

function run() {
  if (busy) return;
  const src = source();
  if (!src.kind) {
    queued = false;
    setDiagnoseButton();
    setStatus("Paste a log or choose files first.", "error");
    return;
  }
  if (!ready) {
    queued = true;
    setDiagnoseButton();
    setStatus("Queued: the diagnosis starts as soon as the engine has loaded.", "queued");
    return;
  }
  const inputs = src.kind === "text" ? [{ name: "pasted.log", text: src.text }]
    : src.files.map((f) => ({ name: f.name, file: f }));
  runSource = { kind: src.kind, text: describe(src) };
  runStarted = performance.now();
  clearReport();
  resetProgress();
  busy = true;
  $("[data-testid=cancel]").disabled = false;
  setDiagnoseButton();
  setStatus(`Diagnosing ${describe(src)}…`, "busy");
  worker.postMessage({ type: "scan", inputs });
}

function cancel() {
  if (queued) {
    queued = false;
    setDiagnoseButton();
    setStatus("Cancelled before it started.", "cancelled");
    return;
  }
  if (busy) worker.postMessage({ type: "cancel" });
}

function clearAll() {
  if (busy) worker.postMessage({ type: "cancel" });
  queued = false;
  droppedFiles = [];
  $("[data-testid=file-input]").value = "";
  $("[data-testid=log-input]").value = "";
  $("[data-testid=example]").value = "";
  lastTouched = "text";
  clearReport();
  resetProgress();
  busy = false;
  $("[data-testid=cancel]").disabled = true;
  setDiagnoseButton();
  showSource();
  setStatus(ready ? `Cleared. ${readyText()}` : "Cleared. Loading the diagnoser…", ready ? "ready" : "loading");
  $("[data-testid=log-input]").focus();
}

// ---------------------------------------------------------------- report

function section(title, ...children) {
  return el("section", { class: "fdx-section" }, el("h3", { text: title }), ...children);
}

function badge(band) {
  return el("span", { class: `fdx-badge fdx-badge--${band}`, "data-testid": "band" }, BANDS[band].word);
}

function copyButton(text, what, testid) {
  const b = el("button", { type: "button", class: "md-button fdx-copy", "data-testid": testid }, `Copy ${what}`);
  b.onclick = () => copyText(text, b, what);
  return b;
}

async function copyText(text, button, what) {
  let ok = true;
  try { await navigator.clipboard.writeText(text); } catch { ok = false; }
  confirmDone(button, ok ? `Copied ${what}` : `Select and copy the ${what} (the browser refused the clipboard)`);
  return ok;
}

// A short confirmation on the button itself and in the live status line.
function confirmDone(button, words) {
  const before = button.dataset.label || button.textContent;
  button.dataset.label = before;
  button.textContent = `✓ ${words}`;
  button.dataset.confirmed = "true";
  setStatus(`${words}.`, "done");
  clearTimeout(button.restore);
  button.restore = setTimeout(() => { button.textContent = before; delete button.dataset.confirmed; }, 4000);
}

function nextAction(na) {
  if (!na) return null;
  const box = el("div", { class: "fdx-next", "data-testid": "next-action" },
    el("p", {}, el("strong", { text: "Next: " }), na.do));
  if (na.command) {
    box.append(el("pre", {}, el("code", { "data-testid": "next-command", text: na.command })),
      copyButton(na.command, "command", "copy-command"));
  }
  return box;
}

function altCard(a) {
  return el("article", { class: `fdx-card fdx-band-${a.band}`, "data-entry-id": a.id },
    el("p", {}, badge(a.band), ` confidence ${a.confidence.toFixed(2)}`),
    el("h4", {}, entryLink(a.id, a.url, a.title)),
    a.why ? el("p", { class: "fdx-why", text: a.why }) : null);
}

// The page renders the engine's view of the report (render.view, the same the CLI's text
// and Markdown render): what to say is decided there, how it looks here.
function head(v, opts) {
  const p = v.primary;
  const band = v.band;
  const box = el("section", {
    class: `fdx-head fdx-band-${band}`, "data-testid": "primary", "data-entry-id": p ? p.id : "",
    "data-band": band, tabindex: "-1", "aria-labelledby": "fdx-head-title",
  });
  // Who started it, in one sentence, and each rank's state (the job model's, as the CLI prints)
  if (v.verdict) box.append(el("p", { class: "fdx-story", "data-testid": "verdict", text: v.verdict }));
  if (v.ranks.length) box.append(rankRows(v.ranks));
  if (p) {
    box.append(
      el("p", { class: "fdx-verdict" }, badge(band), " ",
        el("span", { "data-testid": "confidence" }, `${BANDS[band].say} (confidence ${p.confidence.toFixed(2)})`)),
      el("h2", { id: "fdx-head-title" }, entryLink(p.id, p.url, p.title)));
    if (v.first_seen) box.append(el("p", { class: "fdx-where", "data-testid": "where" }, el("strong", { text: "First seen: " }), v.first_seen.where));
    if (p.why) box.append(el("p", { class: "fdx-why", "data-testid": "why" }, el("strong", { text: "Why: " }), p.why));
    if (band === "guess") {
      const alts = v.alternatives.slice(0, 2);
      box.append(el("p", { class: "fdx-unsure", "data-testid": "not-sure" },
        el("strong", { text: "Not sure. " }),
        alts.length ? "Compare the candidates side by side; the entry pages say how to tell them apart."
          : "Only this entry matched, and only weakly: read its page and check that it fits."));
      box.append(el("div", { class: "fdx-compare", "data-testid": "compare" }, [p, ...alts].map(altCard)));
    }
    box.append(nextAction(v.next));
  } else if (v.unmatched) {
    box.append(...unmatchedHead(v.unmatched));
  } else if (v.verdict || v.suspects.length) {
    // dumps or the job model name a rank, but no entry names what it did
    box.append(el("h2", { id: "fdx-head-title", text: "Which rank stopped the others" }),
      el("p", { text: "No entry matches what that rank printed; the suspects below say how it was found and what it was doing." }));
  } else {
    box.append(el("h2", { id: "fdx-head-title", text: "No known failure and no error line found" }),
      el("p", { text: "None of the known failures appears in this input, and no line looks like an error. "
        + "If the job failed, the cause may be in another rank's log or in the scheduler's." }));
  }
  // The rank or host that stopped the others, with the evidence: after the next step
  const suspects = el("div", { class: "fdx-suspects", "data-testid": "suspects-slot" });
  box.append(suspects);
  renderSuspects(v, suspects);
  if (opts.source) box.append(el("p", { class: "fdx-from", "data-testid": "used" }, `Diagnosed ${opts.source.text}.`));
  return box;
}

// One line per run of ranks in the same state (job.timeline); a list, not a table, so that
// it fits a phone
function rankRows(rows) {
  return el("ul", { class: "fdx-ranks", "data-testid": "rank-rows" }, rows.map((x) => el("li", {
    class: x.lead ? "fdx-rank-lead" : "", "data-ranks": x.ranks, "data-state": x.state },
  x.ranks ? el("b", { text: `${x.count === 1 ? "rank" : "ranks"} ${x.ranks}` }) : null,
  x.host ? ` on ${x.host}` : "", x.ranks ? " · " : "", x.state,
  x.error ? el("code", { text: x.error }) : null,
  x.exit !== undefined ? ` · exit ${x.exit}${x.signal ? ` (${x.signal})` : ""}` : "")));
}

function errorLine(title, f) {
  if (!f) return null;
  return el("div", { class: "fdx-errline" }, el("p", {}, el("strong", { text: title }), ` ${f.where}`),
    el("pre", {}, el("code", { text: f.text })));
}

// Nothing matched: the error lines, the nearest entries, a search, and a new entry.
function unmatchedHead(u) {
  const out = [el("h2", { id: "fdx-head-title", text: "No known failure matched, but the log holds errors" }),
    el("p", { text: `faildex does not know this failure yet (${plural(u.error_lines, "error line")} found). Start from these:` })];
  out.push(el("div", { "data-testid": "unmatched" },
    errorLine("First error:", u.first_error), errorLine("Last exception:", u.last_exception)));
  if (u.nearest.length) {
    out.push(el("p", { "data-testid": "nearest" }, el("strong", { text: "Nearest entries: " }),
      ...u.nearest.flatMap((n, i) => [i ? ", " : "", entryLink(n.id, n.url, n.title)])));
  }
  const probe = (u.last_exception || u.first_error || { text: "" }).text;
  const words = probe.replace(/^.*?(\w+(?:Error|Exception)\b)/, "$1").slice(0, 80);
  const search = new URL("errors/", SITE);
  search.searchParams.set("text", words.split(/[:(]/)[0].trim() || words);
  const actions = el("p", { class: "fdx-actions" },
    el("a", { class: "md-button", href: search.href, "data-testid": "search-error" }, "Search the error index"));
  const add = newEntryLink(u);
  if (add) actions.append(add);
  out.push(actions);
  return out;
}

function kebab(text) {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").split("-").slice(0, 6).join("-") || "new-failure";
}

// GitHub's web editor, with entries/<category>/<id>.yaml prefilled from `faildex new`'s
// skeleton and the redacted error lines as the first example.
function newEntryLink(u) {
  const target = manifest.new_entry;
  if (!target) return null;
  const probe = (u.last_exception || u.first_error || { text: "" }).text;
  const name = kebab((probe.match(/(\w+(?:Error|Exception))/) || [probe])[0]);
  const near = u.nearest.map((n) => categories[n.id]).find((c) => target.categories.includes(c));
  const category = near || target.categories[0];
  const log = (lastExcerpt || probe).split("\n").map((l) => "      " + l).join("\n");
  const yaml = target.template.replace("{id}", name).replace("{category}", category)
    .replace("      TODO paste the log as printed", log)
    .replace('TODO "reproduced: <how>" or the URL of the report', "TODO where this log came from (redacted by the faildex diagnoser)");
  const url = new URL(`${target.url}${category}`);
  url.searchParams.set("filename", `${name}.yaml`);
  url.searchParams.set("value", yaml);
  return el("a", { class: "md-button md-button--primary", href: url.href, target: "_blank", rel: "noopener",
    "data-testid": "add-entry" }, "Add this failure to faildex");
}

function evidenceBlock(e) {
  const pre = el("pre", { class: "fdx-evidence" });
  for (const b of e.before || []) pre.append(el("span", { class: "fdx-ctx", text: b + "\n" }));
  pre.append(el("mark", { text: e.text }));
  for (const a of e.after || []) pre.append(el("span", { class: "fdx-ctx", text: "\n" + a }));
  const role = { initiating: "cause", alternative: "alternative", collateral: "consequence" }[e.role] || e.role;
  return el("div", { class: `fdx-ev fdx-${e.role}`, "data-role": e.role },
    el("p", { class: "fdx-ev-head" }, el("strong", { text: role }), ` · ${e.where} · `,
      e.entry && e.url ? entryLink(e.entry, e.url, e.entry) : ""),
    pre);
}

// ---------------------------------------------------------------- timeline

const ROLE_WORDS = { initiating: "first failure (the cause)", alternative: "another candidate",
  collateral: "consequence on another rank", other: "other match" };
const clock = (t) => new Date(t * 1000).toISOString().slice(11, 19);

// The lanes (view.timeline: one per rank or input, folded past eight) drawn as marks on a
// shared time axis, or, without timestamps, each lane on its own line scale.
function timeline(t) {
  if (!t) return null;
  const byTime = t.by_time;
  const pos = (x) => (byTime ? x.time : x.line);
  const wrap = el("div", { class: "fdx-timeline", "data-testid": "timeline", "data-scale": byTime ? "time" : "line" });
  for (const lane of t.lanes) {
    const [llo, lhi] = byTime ? [t.start, t.end]
      : [Math.min(...lane.items.map(pos)), Math.max(...lane.items.map(pos))];
    const row = el("div", { class: "fdx-lane" + (lane.folded ? " fdx-lane--folded" : ""), "data-folded": lane.folded || null },
      el("span", { class: "fdx-lane-name", title: lane.name, text: lane.name }));
    const track = el("div", { class: "fdx-track" });
    for (const x of [...lane.items].sort((a, b) => (a.role === "initiating") - (b.role === "initiating"))) {
      const at = lhi > llo ? ((pos(x) - llo) / (lhi - llo)) * 100 : 0;
      const mark = el("span", {
        class: `fdx-mark fdx-${x.role}`, "data-role": x.role, "data-x": at.toFixed(2),
        title: `${ROLE_WORDS[x.role] || x.role}: ${x.entry} · ${x.where}${byTime ? " · " + clock(x.time) : ""}`,
      });
      mark.style.left = `${at.toFixed(2)}%`;
      track.append(mark);
    }
    row.append(track);
    wrap.append(row);
  }
  if (byTime) {
    const axis = el("div", { class: "fdx-axis", "data-testid": "axis", "aria-hidden": "true" }, el("span", { class: "fdx-lane-name" }));
    const ticks = el("div", { class: "fdx-ticks" });
    for (const f of t.end > t.start ? [0, 0.5, 1] : [0]) {
      const at = t.start + f * (t.end - t.start);
      const tick = el("span", { class: "fdx-tick", text: f === 0 ? `${clock(at)} UTC` : `+${fmtSpan(at - t.start)}` });
      tick.style.left = `${f * 100}%`;
      ticks.append(tick);
    }
    axis.append(ticks);
    wrap.append(axis);
  }
  const legend = el("ul", { class: "fdx-legend", "data-testid": "legend" },
    ["initiating", "alternative", "collateral", "other"].filter((x) => t.roles.includes(x)).map((role) =>
      el("li", {}, el("span", { class: `fdx-swatch fdx-${role}`, "aria-hidden": "true" }), ROLE_WORDS[role])));
  const title = byTime ? "Timeline" : "Timeline (by line within each file: the logs carry no timestamps, so files are not ordered against each other)";
  return section(title, t.story ? el("p", { "data-testid": "story", text: t.story }) : null, wrap, legend);
}

// Which rank stopped the others (view.suspects): shown first, with the host to drain.
function renderSuspects(v, slot) {
  if (!v.suspects.length) return null;
  return slot.append(el("section", { class: "fdx-section fdx-suspects", "data-testid": "suspects" },
    el("h3", { text: "Suspect ranks" }),
    el("ul", {}, v.suspects.map((s) => el("li", { "data-rank": s.rank, "data-kind": s.kind, "data-rank-scope": s.rank_scope },
      el("b", { text: `rank ${s.rank}` }), s.scope, s.host ? ` on ${s.host}` : "", " · ",
      el("code", { text: s.kind }), ` · ${s.why}`,
      s.evidence.length
        ? el("ul", {}, s.evidence.map((e) => el("li", {}, `${e.at} `, el("code", { text: e.text }))))
        : null)))));
}

function fmtSpan(s) {
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 120) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} days`;
}

// ---------------------------------------------------------------- the whole report

function renderReport(v, opts = {}) {
  const out = $("#fdx-report");
  out.replaceChildren();
  if (opts.shared) out.append(el("p", { class: "fdx-shared", text: "Shared report (redacted). The logs themselves were never uploaded." }));
  if (v.notes.length) {
    out.append(el("div", { class: "fdx-notes", "data-testid": "notes" }, v.notes.map((n) => el("p", { text: n }))));
  }
  const top = head(v, opts);
  out.append(top);
  const tl = timeline(v.timeline);
  if (tl) out.append(tl);
  if (v.evidence.length) out.append(section("Evidence", v.evidence.map(evidenceBlock)));
  const p = v.primary;
  const guess = v.band === "guess";
  const alts = v.alternatives.slice(p && guess ? 2 : 0);
  if (alts.length) {
    out.append(section(p && guess ? "Other candidates" : "Alternatives",
      el("ul", { class: "fdx-alts", "data-testid": "alternatives" }, alts.map((a) =>
        el("li", { "data-entry-id": a.id }, badge(a.band), " ", entryLink(a.id, a.url, a.title),
          ` · confidence ${a.confidence.toFixed(2)}`, a.why ? el("span", { class: "fdx-why", text: ` · ${a.why}` }) : null)))));
  }
  if (v.collateral.length) {
    // Who reported it: the ranks, else the files (the engine's count is of matching lines,
    // several per report, so it is not shown as a number of reports).
    out.append(section("Consequences (not causes)", el("ul", { "data-testid": "collateral" }, v.collateral.map((c) =>
      el("li", { "data-entry-id": c.id }, entryLink(c.id, c.url, c.title),
        c.ranks && c.ranks.length ? el("span", { "data-testid": "ranks" }, ` · ${plural(c.ranks.length, "rank")}: ${c.ranks_text}`)
          : c.files > 1 ? ` · in ${c.files} files` : "")))));
  }
  if (v.fact_rows.length) {
    out.append(section("What the log says", el("dl", { class: "fdx-facts", "data-testid": "facts" }, v.fact_rows.flatMap((f) =>
      [el("dt", { text: f.label }), el("dd", { "data-fact": f.key, text: f.text })]))));
  }
  if (v.missing.length) {
    out.append(section("Needed to decide, not in the log", el("ul", { "data-testid": "missing" }, v.missing.map((m) =>
      el("li", {}, el("strong", { text: m.label }), `: ${m.why}`, m.how ? el("pre", {}, el("code", { text: m.how })) : null)))));
  }
  if (!opts.shared) out.append(actions());
  const done = p ? `Done: ${p.title} (${BANDS[v.band].word.toLowerCase()}).`
    : v.unmatched ? "Done: no known failure matched; the report shows where to start." : "Done: no failure found.";
  setStatus(done, "done");
  // The head is what a tired reader needs: bring it into view and give it focus.
  top.scrollIntoView({ block: "start" });
  top.focus({ preventScroll: true });
}

function actions() {
  const box = el("div", { class: "fdx-actions" },
    el("button", { type: "button", "data-testid": "copy-markdown", class: "md-button" }, "Copy as Markdown (redacted)"),
    el("button", { type: "button", "data-testid": "download-json", class: "md-button" }, "Download JSON"),
    el("button", { type: "button", "data-testid": "share", class: "md-button" }, "Share link (redacted)"));
  const shareBox = el("p", { class: "fdx-share", hidden: "hidden" },
    el("label", { for: "fdx-share-url", text: "Link to this report (redacted; the report is in the link, nothing is uploaded)" }),
    el("input", { id: "fdx-share-url", type: "text", readonly: "readonly", "data-testid": "share-url", class: "fdx-share-url" }));
  box.append(shareBox);
  box.querySelector("[data-testid=copy-markdown]").onclick = (ev) => copyMarkdown(ev.currentTarget);
  box.querySelector("[data-testid=download-json]").onclick = (ev) => downloadJson(ev.currentTarget);
  box.querySelector("[data-testid=share]").onclick = (ev) => makeShare(ev.currentTarget, shareBox);
  return box;
}

async function copyMarkdown(button) {
  const area = el("textarea", { "data-testid": "markdown-text", class: "fdx-md", readonly: "readonly",
    "aria-label": "The report as a Markdown ticket (redacted)" });
  area.value = lastMarkdown;
  const old = document.querySelector("[data-testid=markdown-text]");
  if (old) old.replaceWith(area); else button.parentElement.after(area);
  const ok = await copyText(lastMarkdown, button, "Markdown ticket (redacted)");
  if (!ok) area.select();
}

function downloadJson(button) {
  const blob = new Blob([JSON.stringify(lastReport, null, 2)], { type: "application/json" });
  const a = el("a", { href: URL.createObjectURL(blob), download: "faildex-report.json" });
  document.body.append(a);
  a.click();
  a.remove();
  confirmDone(button, "Saved faildex-report.json");
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

async function makeShare(button, shareBox) {
  // The fragment (#...) is never sent to any server.
  const url = `${location.origin}${location.pathname}#share=${await deflate(lastShare)}`;
  const box = shareBox.querySelector("input");
  shareBox.hidden = false;
  box.value = url;
  box.select();
  await copyText(url, button, "share link");
}

async function openShared() {
  const m = location.hash.match(/^#share=([A-Za-z0-9_-]+)$/);
  if (!m) return false;
  try {
    const data = JSON.parse(await inflate(m[1]));
    if (data.v !== 2) {
      setStatus("This share link was made by an older version of the diagnoser and cannot be shown.", "error");
      return true;
    }
    renderReport(data, { shared: true });
  } catch {
    setStatus("This share link is damaged: it could not be decoded.", "error");
  }
  return true;
}

// ---------------------------------------------------------------- examples, inputs, keys

async function loadExamples() {
  const select = $("[data-testid=example]");
  try {
    manifest = await (await fetch(new URL("manifest.json", HERE))).json();
  } catch { /* no "add this failure" link without it */ }
  try {
    const examples = await (await fetch(new URL("examples.json", HERE))).json();
    for (const ex of examples) select.append(el("option", { value: ex.id, text: ex.title }));
    select.onchange = () => {
      const ex = examples.find((x) => x.id === select.value);
      if (!ex) return;
      // An example is pasted text: it replaces the text, and chosen files are dropped.
      if (busy) worker.postMessage({ type: "cancel" });
      busy = false;
      $("[data-testid=cancel]").disabled = true;
      droppedFiles = [];
      $("[data-testid=file-input]").value = "";
      $("[data-testid=log-input]").value = ex.log;
      lastTouched = "text";
      clearReport();
      resetProgress();
      setDiagnoseButton();
      showSource();
      setStatus(`Example loaded: ${ex.title}. Press Diagnose.`, ready ? "ready" : "loading");
    };
  } catch {
    select.disabled = true;
  }
}

function onNewFiles() {
  lastTouched = "files";
  clearReport();
  resetProgress();
  showSource();
}

function setupInputs() {
  const zone = $("#fdx-drop");
  $("[data-testid=file-input]").onchange = onNewFiles;
  $("[data-testid=log-input]").addEventListener("input", () => {
    if ($("[data-testid=log-input]").value.trim()) lastTouched = "text";
    showSource();
  });
  for (const radio of document.querySelectorAll("[data-testid=source-choice] input")) {
    radio.onchange = () => { lastTouched = radio.value; showSource(); };
  }
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("fdx-over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("fdx-over"));
  zone.addEventListener("drop", (e) => {
    e.preventDefault();
    zone.classList.remove("fdx-over");
    droppedFiles = droppedFiles.concat(Array.from(e.dataTransfer.files));
    onNewFiles();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      run();
    }
  });
}

async function main() {
  startWorker();  // Pyodide starts loading now, not when the button is pressed
  $("[data-testid=diagnose]").onclick = run;
  $("[data-testid=cancel]").onclick = cancel;
  $("[data-testid=clear]").onclick = clearAll;
  setupInputs();
  setDiagnoseButton();
  showSource();
  loadExamples();
  const shared = await openShared();
  window.addEventListener("hashchange", openShared);
  // The page's one job is the log box: start there (not on touch screens, where focus
  // would pop up the keyboard over the page).
  if (!shared && matchMedia("(pointer: fine)").matches && document.activeElement === document.body) {
    $("[data-testid=log-input]").focus({ preventScroll: true });
  }
}

main();
