// faildex diagnoser worker: Pyodide and the engine, off the page's thread.
//
// Messages in:  {type: "scan", inputs: [{name, file} | {name, text}]}, {type: "cancel"}
// Messages out: {type: "ready", ms}, {type: "progress", done, total, file},
//               {type: "report", report, markdown, share}, {type: "cancelled"},
//               {type: "error", message}
// Everything is loaded from this site's own origin; nothing leaves the machine.
import { loadPyodide } from "../pyodide/pyodide.mjs";

const HERE = new URL(".", import.meta.url);
const CHUNK = 8 << 20;           // bytes handed to Python per call
const START_TIMEOUT_MS = 60000;  // loadPyodide hangs (not fails) when blocked by CSP

let py = null;
let api = null;
let cancelled = false;
let busy = false;

const GLUE = `
import json
from faildex_engine import Diagnosis, load_index
from faildex_engine.render import to_markdown, redact

_index = None
_d = None

def init(index_text):
    global _index
    _index = load_index(json.loads(index_text))

def start():
    global _d
    _d = Diagnosis(_index)

def feed(name, buf):
    _d.feed(name, buf.to_bytes())

def close(name, truncated):
    _d.close(name, truncated or None)

def share_payload(r):
    keep = {
        "v": 1,
        "primary": r["primary"] and {k: r["primary"][k] for k in ("id", "title", "confidence", "why", "url")},
        "alternatives": [{k: a[k] for k in ("id", "title", "confidence", "url")} for a in r["alternatives"][:5]],
        "collateral": [{k: c[k] for k in ("id", "title", "count", "ranks", "url")} for c in r["collateral"][:8]],
        "evidence": [{k: e.get(k) for k in ("role", "entry", "source", "line", "text", "rank", "url")}
                     for e in r["evidence"][:6]],
        "facts": {k: v for k, v in r["facts"].items() if k not in ("hosts", "ranks")},
        "missing": r["missing"],
        "next_action": r["next_action"],
        "inputs": [{"name": i["name"], "status": i["status"], "messages": i["messages"]} for i in r["inputs"]],
    }
    return redact(json.dumps(keep, sort_keys=True), r["facts"].get("hosts", []))

def finish():
    r = _d.report()
    return json.dumps({"report": r, "markdown": to_markdown(r, redact_it=True),
                       "share": share_payload(r)})
`;

async function boot() {
  const t0 = performance.now();
  const timeout = new Promise((_, reject) =>
    setTimeout(() => reject(new Error("Pyodide did not start within 60 s (blocked by the page's security policy or a missing file)")), START_TIMEOUT_MS));
  py = await Promise.race([loadPyodide({ indexURL: new URL("../pyodide/", HERE).href }), timeout]);
  const manifest = await (await fetch(new URL("manifest.json", HERE))).json();
  await py.loadPackage(new URL(manifest.wheel, HERE).href, { messageCallback: () => {} });
  const indexText = await (await fetch(new URL(manifest.index, HERE))).text();
  py.runPython(GLUE);
  api = {
    init: py.globals.get("init"), start: py.globals.get("start"), feed: py.globals.get("feed"),
    close: py.globals.get("close"), finish: py.globals.get("finish"),
  };
  api.init(indexText);
  postMessage({ type: "ready", ms: Math.round(performance.now() - t0), pyodide: manifest.pyodide });
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

async function scanFile(input, report) {
  const file = input.file;
  for (let off = 0; off < file.size; off += CHUNK) {
    if (cancelled) return false;
    const buf = new Uint8Array(await file.slice(off, off + CHUNK).arrayBuffer());
    feedBytes(input.name, buf);
    report(Math.min(off + CHUNK, file.size));
  }
  api.close(input.name, null);
  return true;
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
        finished = await scanFile(input, report);
      }
      if (!finished) { postMessage({ type: "cancelled" }); return; }
      before += input.file ? input.file.size : input.text.length;
    }
    const out = JSON.parse(api.finish());
    postMessage({ type: "report", ...out, seconds: (performance.now() - t0) / 1000, bytes: total,
                  engineSeconds: engineMs / 1000 });
  } finally {
    busy = false;
  }
}

onmessage = (ev) => {
  const msg = ev.data;
  if (msg.type === "cancel") { if (busy) cancelled = true; return; }
  if (msg.type === "scan") {
    scan(msg.inputs).catch((err) =>
      postMessage({ type: "error", message: String(err && err.message || err) }));
  }
};
