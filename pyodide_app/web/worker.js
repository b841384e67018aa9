// faildex diagnoser worker: Pyodide and the engine, off the page's thread.
//
// The page starts one worker (the main one). It starts up to three more of itself
// as scanners: a large file is cut at line boundaries into one range per worker,
// each range is scanned by its own Pyodide, and the main worker merges the parts
// (faildex.scan.merge_ranges, the same code the CLI's processes use).
//
// Page -> main:   {type: "scan", inputs: [{name, file} | {name, text}]}, {type: "cancel"}
// Main -> page:   {type: "ready", ms}, {type: "workers", ready}, {type: "progress", done, total, file},
//                 {type: "report", report, markdown, share, excerpt, labels}, {type: "cancelled"},
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

const GLUE = `
import json
import pickle
from pyodide.ffi import to_js
from faildex import Diagnosis, DumpError, load_index
from faildex.suspects import is_artifact
from faildex.render import to_markdown, redact, fact_label

import js
from faildex import scan as _scan

# The anchors are found by JavaScript (see faildex.scan.set_hit_finder and faildexHits
# below): the same anchors, the same lines, several times faster than sre here.
def _js_hit_finder(anchors):
    automaton = js.faildexAnchors(to_js(b"\\n".join(anchors)))
    def find(buf, end, begin):
        return js.faildexHits(buf, begin, end, automaton).to_py()
    return find

_scan.set_hit_finder(_js_hit_finder)

_index = None
_d = None
_part = None
_parts = {}

_category = {}

def init(index_text):
    global _index, _category
    raw = json.loads(index_text)
    _category = {k: e.get("category") for k, e in raw["entries"].items()}
    _index = load_index(raw)
    start()

# one range of a large file (any worker): Diagnosis.scan_range, the CLI's own API
def part_start(name, order, offset, prev):
    global _part
    _part = _d.scan_range(name, offset, prev.to_bytes())
    _part.order = order

def part_feed(buf):
    _part.feed(buf.to_bytes())

def part_finish(is_last):
    return to_js(pickle.dumps(_part.end_range(is_last), protocol=5))

# the main worker puts the parts back together
def order_of(name):
    return _d._source(name, False).order

def part_adopt(name, k, buf):
    _parts.setdefault(name, []).append((k, pickle.loads(buf.to_bytes())))

def parts_merge(name):
    _d.adopt_ranges(name, [p for _, p in sorted(_parts.pop(name), key=lambda kp: kp[0])])

def start():
    global _d
    _d = Diagnosis(_index)

def prepare():
    _d.plan.prepare()
    # One small scan of made-up lines, most healthy and some holding anchors: a worker
    # started from the snapshot has run none of the engine's WebAssembly, and V8 compiles
    # a function for speed only once it has run a while. Measured 2026-12-04 on a 105 MB
    # log of bench/profiles.py's nccl-info dropped 3 s after the workers were ready: first scan 0.98 -> 0.89 s
    # (median of 4 pages; the second scan 0.76-0.78 s either way).
    healthy = b"\\n".join(b"[rank%d]:[2026-12-04 10:00:00] step %d loss 2.31 lr 1e-4 grad_norm 0.9" % (i % 8, i)
                         for i in range(40000))
    anchored = b"\\n".join(sorted(_d.plan.sigs_by_anchor)[:200])
    warm = Diagnosis(_index)
    for part in (healthy, anchored, healthy):
        warm.feed("warm-up.log", part + b"\\n")
    warm.close("warm-up.log", None)
    warm.report()

def feed(name, buf):
    _d.feed(name, buf.to_bytes())

def close(name, truncated):
    _d.close(name, truncated or None)

# flight-recorder and stack dumps are read whole, as bytes (a pickle is not text)
def dump_kind(head):
    return is_artifact(head.to_bytes()) or ""

def add_dump(name, buf):
    try:
        _d.add_dump(name, buf.to_bytes())
        return ""
    except DumpError as err:
        return str(err)

def share_payload(r):
    keep = {
        "v": 1,
        "primary": r["primary"] and {k: r["primary"].get(k) for k in ("id", "title", "confidence", "why", "url",
                                                                       "band")},
        "alternatives": [{k: a.get(k) for k in ("id", "title", "confidence", "why", "url", "band")}
                         for a in r["alternatives"][:5]],
        "collateral": [{k: c[k] for k in ("id", "title", "count", "ranks", "url")} for c in r["collateral"][:8]],
        "evidence": [{k: e.get(k) for k in ("role", "entry", "source", "line", "text", "rank", "url")}
                     for e in r["evidence"][:6]],
        "facts": {k: v for k, v in r["facts"].items() if k not in ("hosts", "ranks")},
        "missing": r["missing"],
        "next_action": r["next_action"],
        "suspects": [{k: s[k] for k in ("rank", "rank_scope", "pg", "host", "kind", "why") if k in s} for s in r["suspects"][:8]],
        "inputs": [{"name": i["name"], "status": i["status"], "messages": i["messages"]} for i in r["inputs"]],
        "labels": {k: fact_label(k) for k in set(r["facts"]) | {m["fact"] for m in r["missing"]}},
    }
    return redact(json.dumps(keep, sort_keys=True), r["facts"].get("hosts", []))

EXCERPT_MAX = 3000   # characters of log in a new-entry link (a URL of ~8 kB at most)

def excerpt(r):
    """The unmatched log's error lines with their context, redacted: the first example
    of a new entry ("add this failure to faildex")."""
    u = r.get("unmatched") or {}
    lines = []
    for f in (u.get("first_error"), u.get("last_exception")):
        if f:
            block = f.get("before", []) + [f["text"]] + f.get("after", [])
            lines += [x for x in block if x not in lines]
    text = "\\n".join(lines)[-EXCERPT_MAX:]
    return redact(text, r["facts"].get("hosts", [])) if text else ""

def finish():
    r = _d.report()
    keys = set(r["facts"]) | {m["fact"] for m in r["missing"]}
    return json.dumps({"report": r, "markdown": to_markdown(r, redact_it=True),
                       "share": share_payload(r), "excerpt": excerpt(r),
                       "categories": {n["id"]: _category.get(n["id"]) for n in
                                      (r.get("unmatched") or {}).get("nearest", [])},
                       "labels": {k: fact_label(k) for k in keys}})
`;

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
  py.runPython(GLUE);
  api = {};
  for (const f of ["init", "prepare", "start", "feed", "close", "finish", "part_start", "part_feed", "part_finish",
    "order_of", "part_adopt", "parts_merge", "dump_kind", "add_dump"]) api[f] = py.globals.get(f);
  api.init(indexText);
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
  const proxy = api.part_finish(isLast);
  return proxy;
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

// "fr" for a flight-recorder dump (pickle or JSON), "stacks" for a py-spy/faulthandler
// stack dump, told by the first bytes; either goes to the engine whole, as bytes.
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
        if (kind === "fr") {      // a stack dump is read as a log too
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
