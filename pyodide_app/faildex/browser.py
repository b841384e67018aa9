"""The in-browser diagnoser's API: what pyodide_app/web/worker.js calls, nothing else.

The worker only moves bytes and messages; everything it asks of the engine is here, in
plain Python, so that it runs (and is tested: tests/test_browser_api.py) under CPython
like the rest of the package. One Session per worker:

    s = Session(index_text)                    # the main worker, or a scanner
    s.feed(name, chunk); s.close(name, None)   # a file read whole by this worker
    s.add_dump(name, data)                     # a flight-recorder or stack dump ("" or why not)
    s.finish()                                 # JSON: report, markdown, share, excerpt, labels

A large file is cut into ranges, one per scanner worker:

    part = s.part_start(name, order, offset, prev_tail); ...; s.part_feed(chunk)
    data = s.part_finish(is_last)              # plain data (pickle), posted to the main worker
    main.part_adopt(name, k, data) for each range k; main.parts_merge(name)

Bytes arrive as bytes (CPython) or as Pyodide's JsProxy of a Uint8Array (to_bytes()).
"""
from __future__ import annotations

import json
import pickle

from . import Diagnosis, DumpError, load_index
from . import scan
from .render import redact, to_markdown, view
from .suspects import is_artifact

EXCERPT_MAX = 3000   # characters of log in a new-entry link (a URL of ~8 kB at most)
WARM_LINES = 40000   # made-up healthy lines scanned once while the reader picks a file


def _bytes(buf) -> bytes:
    """bytes from bytes, a memoryview, or Pyodide's JsProxy of a Uint8Array."""
    return bytes(buf) if isinstance(buf, (bytes, bytearray, memoryview)) else buf.to_bytes()


def use_js_hit_finder() -> None:
    """Under Pyodide: the prefilter's anchors are found by the worker's JavaScript
    (self.faildexAnchors / self.faildexHits, anchors.mjs): the same anchors and lines,
    several times faster than sre there (scan.set_hit_finder)."""
    import js                              # Pyodide's module of the worker's globals
    from pyodide.ffi import to_js

    def finder(anchors):
        automaton = js.faildexAnchors(to_js(b"\n".join(anchors)))

        def find(buf, end, begin):
            return js.faildexHits(buf, begin, end, automaton).to_py()
        return find
    scan.set_hit_finder(finder)


class Session:
    """One worker's engine: a Diagnosis, the ranges it scans, the parts it merges."""

    def __init__(self, index_text: str):
        raw = json.loads(index_text)
        self.categories = {k: e.get("category") for k, e in raw["entries"].items()}
        self.index = load_index(raw)
        self.part = None
        self.parts: dict[str, list] = {}
        self.start()

    def start(self) -> None:
        """A new diagnosis (the next scan)."""
        self.d = Diagnosis(self.index)

    def prepare(self) -> None:
        """Compile what the first scan would, and run the engine once on made-up lines: a
        worker started from the snapshot has run none of the engine's WebAssembly, and V8
        compiles a function for speed only once it has run a while. Measured 2026-12-04 on a
        105 MB log of bench/profiles.py's nccl-info dropped 3 s after the workers were ready:
        first scan 0.98 -> 0.89 s (median of 4 pages; the second 0.76-0.78 s either way)."""
        self.d.plan.prepare()
        healthy = b"\n".join(b"[rank%d]:[2026-12-04 10:00:00] step %d loss 2.31 lr 1e-4 grad_norm 0.9" % (i % 8, i)
                             for i in range(WARM_LINES))
        anchored = b"\n".join(sorted(self.d.plan.sigs_by_anchor)[:200])
        warm = Diagnosis(self.index)
        for part in (healthy, anchored, healthy):
            warm.feed("warm-up.log", part + b"\n")
        warm.close("warm-up.log", None)
        warm.report()

    # ------------------------------------------------------------ whole files

    def feed(self, name: str, buf) -> None:
        self.d.feed(name, _bytes(buf))

    def close(self, name: str, truncated: str | None) -> None:
        self.d.close(name, truncated or None)

    def dump_kind(self, head) -> str:
        """What a file's first bytes say it is ("fr", "ras" or "stacks"), "" for a log. Dumps are read
        whole, as bytes (a pickle is not text)."""
        return is_artifact(_bytes(head)) or ""

    def add_dump(self, name: str, buf) -> str:
        """"" when read, else the one-line reason it was refused."""
        try:
            self.d.add_dump(name, _bytes(buf))
            return ""
        except DumpError as err:
            return str(err)

    # ------------------------------------------------------------ ranges of a large file

    def part_start(self, name: str, order: int, offset: int, prev) -> None:
        self.part = self.d.scan_range(name, offset, _bytes(prev))
        self.part.order = order

    def part_feed(self, buf) -> None:
        self.part.feed(_bytes(buf))

    def part_finish(self, is_last: bool) -> bytes:
        data, self.part = pickle.dumps(self.part.end_range(is_last), protocol=5), None
        return data

    def order_of(self, name: str) -> int:
        """The input's place among the inputs (its ranges' parts carry it)."""
        return self.d.order_of(name)

    def part_adopt(self, name: str, k: int, buf) -> None:
        # a part comes from another worker of this page, made by part_finish
        self.parts.setdefault(name, []).append((k, pickle.loads(_bytes(buf))))

    def parts_merge(self, name: str) -> None:
        self.d.adopt_ranges(name, [p for _, p in sorted(self.parts.pop(name), key=lambda kp: kp[0])])

    # ------------------------------------------------------------ the result

    def finish(self) -> str:
        """The report, the view the page renders (render.view: the same the CLI prints) and
        what the page offers beside it, as one JSON text."""
        r = self.d.report()
        v = view(r, "")
        return json.dumps({"report": r, "view": v, "markdown": to_markdown(r, redact_it=True),
                           "share": share_payload(v, r["facts"].get("hosts", [])), "excerpt": excerpt(r),
                           "categories": {n["id"]: self.categories.get(n["id"]) for n in
                                          (r.get("unmatched") or {}).get("nearest", [])}})


SHARE_VERSION = 2      # 2: the view (render.view); 1 (before 2026-12-05): report fields


def share_payload(v: dict, hosts: list) -> str:
    """What a share link carries: the view's (render.view) head and findings, redacted (the
    hosts the report names, and what redact() finds), with no log context around the
    evidence, no unmatched lines and no timeline; versioned."""
    keep = {k: v[k] for k in ("verdict", "ranks", "band", "primary", "missing", "next", "notes")}
    keep.update(
        v=SHARE_VERSION, one_input=True, timeline=[], unmatched=None,
        primary=v["primary"] and {k: v["primary"].get(k) for k in ("id", "title", "confidence", "why", "url", "band")},
        alternatives=[{k: a.get(k) for k in ("id", "title", "confidence", "why", "url", "band")}
                      for a in v["alternatives"]],
        collateral=[{k: c[k] for k in ("id", "title", "count", "url", "ranks_text", "ranks", "files")}
                    for c in v["collateral"][:8]],
        evidence=[{k: e.get(k) for k in ("role", "entry", "where", "text", "url")} for e in v["evidence"][:6]],
        suspects=[dict(s, evidence=[]) for s in v["suspects"][:8]],
        fact_rows=[f for f in v["fact_rows"] if f["key"] not in ("hosts", "ranks")],
        first_seen=None,
    )
    return redact(json.dumps(keep, sort_keys=True), hosts)


def excerpt(r: dict) -> str:
    """The unmatched log's error lines with their context, redacted: the first example
    of a new entry ("add this failure to faildex")."""
    u = r.get("unmatched") or {}
    lines: list[str] = []
    for f in (u.get("first_error"), u.get("last_exception")):
        if f:
            block = f.get("before", []) + [f["text"]] + f.get("after", [])
            lines += [x for x in block if x not in lines]
    text = "\n".join(lines)[-EXCERPT_MAX:]
    return redact(text, r["facts"].get("hosts", [])) if text else ""
