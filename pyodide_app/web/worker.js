// faildex diagnoser worker: Pyodide and the engine, off the page's thread.
//
// The page starts one worker (the main one). It starts up to three more of itself
// as scanners: a large file is cut at line boundaries into one range per worker,
// each range is scanned by its own Pyodide, and the main worker merges the parts
// (faildex.scan.merge_ranges, the same code the CLI's processes use).
//
// Page -> main:   {type: "scan", inputs: [{name, file} | {name, text}]}, {type: "cancel"}
// Main -> page:   {type: "ready", ms}, {type: "workers", ready}, {type: "progress", done, total, file},
//                 {type: "report", report, view, markdown, share, excerpt, categories}, {type: "cancelled"},
//                 {type: "error", message}
// Main -> scanner: {type: "range", id, file, name, order, start, end, isLast}, {type: "cancel"}
// Scanner -> main: {type: "ready"}, {type: "part-progress", id, done}, {type: "part", id, data}
// Everything is loaded from this site's own origin; nothing leaves the machine.
import { loadPyodide } from "../pyodide/pyodide.mjs";
import { buildAutomaton, findHits } from "./anchors.mjs";

const HERE = new URL(".", import.meta.url);
const CHUNK = 8 << 20;           // bytes handed to Python per call
const PARALLEL_MIN = 64 << 20;   // smaller files are read by the main worker alone
const SCANNER_WAIT_MS = 8000;    // how long a large file waits for scanners still starting
const IS_SCANNER = self.name === "faildex-scanner";
const START_TIMEOUT_MS = 60000;  // loadPyodide hangs (not fails) when blocked by CSP

let py = null;
let api = null;
let cancelled = false;
let busy = false;

// The prefilter's anchor search, for the Python engine (faildex.scan.set_hit_finder):
// anchors.mjs's automaton, held by the Python side (the Plan keeps one per anchor set),
// so that it lives as long as the plan that uses it.
const LATIN1 = new TextDecoder("latin1");
self.faildexAnchors = (blob) => buildAutomaton(LATIN1.decode(blob).split("\n").filter((w) => w)
  .map((w) => Uint8Array.from(w, (c) => c.charCodeAt(0))));
// buf is a Python bytes object: read in place, through a view of Pyodide's memory
self.faildexHits = (buf, begin, end, automaton) => {
  const view = buf.getBuffer("u8");
  try {
    return findHits(automaton, view.data.subarray(begin, end), begin);
  } finally {
    view.release();
  }
};

// Pyodide starts from the build's snapshot (generator/pyodide_snapshot.mjs: its memory
// with the engine imported; gzip inflated here, so a host that compresses nothing still
// sends ~7 MB, not 31): ~0.5 s instead of ~5 for Python's bootstrap and the imports.
// Without the snapshot (a failed fetch, a Pyodide that refuses it), the plain start.
async function startPyodide(manifest) {
  const indexURL = new URL("../pyodide/", HERE).href;
  if (manifest.snapshot) {
    try {
      const res = await fetch(new URL(manifest.snapshot, HERE));
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const inflated = new Response(res.body.pipeThrough(new DecompressionStream("gzip")));
      const snapshot = new Uint8Array(await inflated.arrayBuffer());
      return { py: await loadPyodide({ indexURL, _loadSnapshot: snapshot }), snapshot: true };
    } catch (err) {
      console.warn(`faildex: starting Pyodide without its snapshot: ${(err && err.message) || err}`);
    }
  }
  const plain = await loadPyodide({ indexURL });
  await plain.loadPackage(new URL(manifest.wheel, HERE).href, { messageCallback: () => {} });
  return { py: plain, snapshot: false };
}

async function boot() {
  const t0 = performance.now();
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error("Pyodide did not start within 60 s (blocked by the page's security policy or a missing file)")), START_TIMEOUT_MS));
  const manifest = await (await fetch(new URL("manifest.json", HERE))).json();
  const started = await Promise.race([startPyodide(manifest), timeout]);
  py = started.py;
  const indexText = await (await fetch(new URL(manifest.index, HERE))).text();
  // the engine's browser API (faildex/browser.py): this file only moves bytes and messages
  const browser = py.pyimport("faildex.browser");
  browser.use_js_hit_finder();
  api = browser.Session(indexText);
  postMessage({ type: "ready", ms: Math.round(performance.now() - t0), pyodide: manifest.pyodide,
                snapshot: started.snapshot });
  api.prepare();   // while the reader picks a file: what the first scan would compile
}

const ready = boot().catch((err) => {
  postMessage({ type: "error", fatal: true, message: String(err && err.message || err) });
  throw err;
});

// A Uint8Array reaches Python as a JsProxy; to_bytes() copies it once (~1.5 ms per 8 MB).
let engineMs = 0;   // time spent inside Python, reported with the result (bench/browser.py)
function feedBytes(name, bytes) {
  const t = performance.now();
  api.feed(name, bytes);
  engineMs += performance.now() - t;
}

// Read a gzip file through DecompressionStream, counting compressed bytes for progress.
async function scanGzip(input, report) {
  let read = 0;
  const counter = new TransformStream({
    transform(chunk, ctl) { read += chunk.byteLength; ctl.enqueue(chunk); },
  });
  const reader = input.file.stream().pipeThrough(counter)
    .pipeThrough(new DecompressionStream("gzip")).getReader();
  let parts = [], size = 0;
  const flush = () => {
    if (!size) return;
    const buf = new Uint8Array(size);
    let off = 0;
    for (const p of parts) { buf.set(p, off); off += p.byteLength; }
    feedBytes(input.name, buf);
    parts = []; size = 0;
  };
  try {
    for (;;) {
      if (cancelled) return false;
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value); size += value.byteLength;
      if (size >= CHUNK) { flush(); report(read); }
    }
    flush();
    api.close(input.name, null);
  } catch (err) {
    flush();
    api.close(input.name, "the .gz file is truncated or corrupt: diagnosed what could be read");
  }
  report(read);
  return true;
}

// ---------------------------------------------------------------- ranges of large files

const scanners = [];        // {worker, ready}
const pending = new Map();  // range id -> {resolve, onProgress}
let nextRangeId = 0;

function startScanners() {
  const cores = self.navigator.hardwareConcurrency || 1;
  for (let i = 0; i < Math.min(cores - 1, 3); i++) {
    const w = new Worker(new URL("worker.js", import.meta.url), { type: "module", name: "faildex-scanner" });
    const s = { worker: w, ready: false };
    s.started = new Promise((resolve) => { s.resolveStarted = resolve; });
    w.onmessage = (ev) => {
      const m = ev.data;
      if (m.type === "ready") {
        s.ready = true;
        s.resolveStarted();
        postMessage({ type: "workers", ready: 1 + scanners.filter((x) => x.ready).length });
      }
      else if (m.type === "part-progress") pending.get(m.id)?.onProgress(m.done);
      else if (m.type === "part") { const p = pending.get(m.id); pending.delete(m.id); p?.resolve(m); }
      else if (m.type === "error") { s.ready = false; s.error = m.message; s.resolveStarted(); }
    };
    scanners.push(s);
  }
}

async function splitPoints(file, parts) {
  const points = [0];
  for (let i = 1; i < parts; i++) {
    const at = Math.floor((file.size * i) / parts);
    const probe = new Uint8Array(await file.slice(at, at + (4 << 20)).arrayBuffer());
    const nl = probe.indexOf(10);
    if (nl >= 0 && at + nl + 1 > points[points.length - 1] && at + nl + 1 < file.size) points.push(at + nl + 1);
  }
  points.push(file.size);
  return points;
}

// Scan [start, end) of a file in this worker; returns the pickled part, or null if cancelled.
async function scanRange(file, name, order, start, end, isLast, onProgress) {
  const prev = new Uint8Array(await file.slice(Math.max(0, start - 8192), start).arrayBuffer());
  api.part_start(name, order, start, prev);
  // The next slice is read while Python scans this one: a Blob read is a round trip
  // to the browser process, which would otherwise leave this core idle.
  const read = (off) => off < end ? file.slice(off, Math.min(off + CHUNK, end)).arrayBuffer() : null;
  let next = read(start);
  for (let off = start; off < end; off += CHUNK) {
    if (cancelled) return null;
    const buf = new Uint8Array(await next);
    next = read(off + CHUNK);
    const t = performance.now();
    api.part_feed(buf);
    engineMs += performance.now() - t;
    onProgress(Math.min(off + CHUNK, end) - start);
  }
  // Python's bytes, copied out of Pyodide's memory to be posted to the main worker
  const part = api.part_finish(isLast);
  const view = part.getBuffer("u8");
  try {
    return view.data.slice();
  } finally {
    view.release();
    part.destroy();
  }
}

// A plain file: one range per ready worker (a single range when none is, or the file
// is small), each scanned into a part that the main worker merges.
async function scanFile(input, report) {
  const file = input.file;
  const helpers = await readyScanners(file.size);
  const points = await splitPoints(file, helpers.length + 1);
  const order = api.order_of(input.name);
  const done = new Array(points.length - 1).fill(0);
  const progress = (k) => (n) => { done[k] = n; report(done.reduce((a, b) => a + b, 0)); };
  const jobs = [];
  for (let k = 1; k < points.length - 1; k++) {
    const id = nextRangeId++;
    jobs.push(new Promise((resolve) => {
      pending.set(id, { resolve, onProgress: progress(k) });
      helpers[k - 1].worker.postMessage({ type: "range", id, file, name: input.name, order,
        start: points[k], end: points[k + 1], isLast: k === points.length - 2 });
    }));
  }
  const local = await scanRange(file, input.name, order, points[0], points[1], points.length === 2, progress(0));
  const remote = await Promise.all(jobs);
  if (cancelled || local === null || remote.some((m) => m.cancelled)) return false;
  api.part_adopt(input.name, 0, local);
  remote.forEach((m, i) => api.part_adopt(input.name, i + 1, m.data));
  api.parts_merge(input.name);
  return true;
}

async function onRange(m) {
  await ready;
  cancelled = false;
  const data = await scanRange(m.file, m.name, m.order, m.start, m.end, m.isLast,
    (done) => postMessage({ type: "part-progress", id: m.id, done }));
  if (data === null) postMessage({ type: "part", id: m.id, cancelled: true });
  else postMessage({ type: "part", id: m.id, data }, [data.buffer]);
}

// A large file is worth waiting a few seconds for scanners that are still starting.
async function readyScanners(size) {
  if (size < PARALLEL_MIN || !scanners.length) return [];
  const wait = Math.min(SCANNER_WAIT_MS, size / 100e3);   // ~100 MB/s: don't wait longer than a serial scan
  await Promise.race([Promise.all(scanners.map((s) => s.started)),
    new Promise((resolve) => setTimeout(resolve, wait))]);
  return scanners.filter((s) => s.ready);
}

// "fr" for a flight-recorder dump (pickle or JSON), "ras" for an NCCL RAS JSON status,
// "stacks" for a py-spy/faulthandler stack dump, told by the first bytes; each goes to the
// engine whole, as bytes.
const DUMP_MAX = 256 << 20;
async function dumpKind(file) {
  if (file.size > DUMP_MAX) return "";
  return api.dump_kind(new Uint8Array(await file.slice(0, 8192).arrayBuffer()));
}

async function scan(inputs) {
  await ready;
  cancelled = false;
  busy = true;
  api.start();
  engineMs = 0;
  const total = inputs.reduce((n, i) => n + (i.file ? i.file.size : i.text.length), 0);
  let before = 0;
  const t0 = performance.now();
  try {
    for (const input of inputs) {
      const report = (done) => postMessage({
        type: "progress", done: before + done, total, file: input.name,
        seconds: (performance.now() - t0) / 1000,
      });
      let finished;
      if (input.text !== undefined) {
        feedBytes(input.name, new TextEncoder().encode(input.text));
        api.close(input.name, null);
        finished = true;
        report(input.text.length);
      } else if (/\.gz$/i.test(input.name)) {
        finished = await scanGzip(input, report);
      } else {
        const kind = await dumpKind(input.file);
        if (kind) {
          const problem = api.add_dump(input.name, new Uint8Array(await input.file.arrayBuffer()));
          if (problem) { postMessage({ type: "error", message: problem }); return; }
        }
        if (kind === "fr" || kind === "ras") {      // a stack dump is read as a log too
          finished = true;
          report(input.file.size);
        } else {
          finished = await scanFile(input, report);
        }
      }
      if (!finished) { postMessage({ type: "cancelled" }); return; }
      before += input.file ? input.file.size : input.text.length;
    }
    const out = JSON.parse(api.finish());
    postMessage({ type: "report", ...out, seconds: (performance.now() - t0) / 1000, bytes: total,
                  engineSeconds: engineMs / 1000, workers: 1 + scanners.filter((x) => x.ready).length });
  } finally {
    busy = false;
  }
}

onmessage = (ev) => {
  const msg = ev.data;
  if (msg.type === "cancel") {
    if (busy || IS_SCANNER) cancelled = true;
    for (const s of scanners) s.worker.postMessage({ type: "cancel" });
    return;
  }
  if (msg.type === "scan") {
    scan(msg.inputs).catch((err) =>
      postMessage({ type: "error", message: String(err && err.message || err) }));
  }
  if (msg.type === "range") {
    onRange(msg).catch((err) => postMessage({ type: "part", id: msg.id, cancelled: true, error: String(err) }));
  }
};

// Scanners start once the main worker is ready, so that they do not slow its start.
if (!IS_SCANNER) ready.then(startScanners, () => {});
