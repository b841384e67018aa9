"""Streaming scan: bytes in, findings out, memory bounded whatever the input.

The hot loop never looks at every line. For each chunk it runs a few bytes.find
passes ("rror" and the anchors made of common letters) and one regex of literal
anchors nested by prefix (both chosen at build time, generator.regexes.
choose_anchors, so that every signature contains one anchor); only the lines
around a hit are decoded and tested against the signatures that own the anchors
on that line. Lines are split on \\n and \\r, so tqdm's carriage-return progress
lines and CRLF files read naturally; a line longer than WINDOW on either side of
a hit is read as a window, never whole.
"""
from __future__ import annotations

import codecs
import re

from . import context
from .lines import fold, parse_prefix, strip_ansi
from .suspects import HangLines

WINDOW = 4096            # bytes kept on each side of a hit inside a very long line
MAX_CARRY = 1 << 20      # a partial line longer than this is scanned in windows
HEAD_BYTES = 4 << 20     # context (versions, launcher) is read from every line here
CONTEXT_LINES = 2        # evidence lines shown before and after a finding
KEEP_FIRST = 3           # findings kept per signature and source (plus the last one)
MAX_SHAPES = 200_000     # distinct line shapes kept for --baseline

# Extra anchors used only when comparing with a baseline run: "events" are lines
# that look like warnings or errors.
BASELINE_ANCHORS = ("WARN", "arning", "ailed", "imeout", "imed out", "illed", "ignal",
                    "bort", "atal", "FATAL", "Traceback")

_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Z]\w*(?:Error|Exception|Exit))(?::|$)")
_ERRORISH = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)\b|ERROR\b|[Ee]rror:|FATAL|[Ff]atal error)")


_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27)) + b"\x7f"


class Plan:
    """The compiled index: anchors, and the signatures each anchor guards.

    find_anchors each get a bytes.find pass; alt_anchors are searched together
    by one compiled alternation (see generator.regexes.choose_anchors for why).
    """

    def __init__(self, index: dict, baseline_mode: bool = False):
        find = list(index["find_anchors"])
        alt = list(index["alt_anchors"])
        if baseline_mode:
            alt += [a for a in BASELINE_ANCHORS if a not in alt and a not in find]
        self.find_anchors = [a.encode() for a in find]
        alt_bytes = sorted({a.encode() for a in alt})
        self.alt_rx = re.compile(_trie(alt_bytes)) if alt_bytes else None
        self.all_anchors = [a.encode() for a in find + alt]
        pos = {a: i for i, a in enumerate(find + alt)}
        self.sigs_by_anchor: dict[int, list] = {i: [] for i in range(len(pos))}
        for n, s in enumerate(index["signatures"]):
            rx = re.compile(s["regex"])
            self.sigs_by_anchor[pos[s["anchor"]]].append((n, s, rx, s["literal"]))
        self.context_keys = [k.encode() for k in context.KEYS]


class Source:
    """Scan state for one input (one file or stream)."""

    def __init__(self, name: str, order: int, plan: Plan, collect_shapes: bool = False,
                 offset: int = 0, prev_tail: bytes = b""):
        self.name = name
        self.order = order
        self.plan = plan
        self.collect_shapes = collect_shapes
        self.offset = offset      # where this scan starts in the input (parallel ranges)
        self.bytes = 0
        self.lines = 0            # newlines before the current buffer
        self.carry = b""
        # Context lines are kept as lines, not bytes, so that evidence is the same
        # however the input was cut into chunks.
        self.recent: list[str] = _complete_lines(prev_tail)[-CONTEXT_LINES:]  # lines before the buffer
        self.pending: list[dict] = []   # findings still waiting for lines after them
        self.ended_cr = False           # the last buffer ended in \r (a \n may follow)
        self.first_lines: list[str] | None = None  # first lines of this scan (parallel merge)
        self._end = 0
        self._final = False
        self.status = "ok"
        self.messages: list[str] = []
        self.started = offset > 0   # only the start of an input is sniffed
        self.decoder = None       # set for UTF-16 input
        self.findings: dict[int, list] = {}   # signature index -> kept findings
        self.counts: dict[int, int] = {}
        self.facts: dict = {}
        self.hosts: set = set()
        self.ranks: set = set()
        self.first_error: dict | None = None
        self.last_exception: dict | None = None
        self.error_lines = 0
        self.shapes: dict[str, dict] = {}
        self.last_ts = None
        self.hang = HangLines()   # watchdog / collective-timeout lines, for suspects

    # ------------------------------------------------------------ input

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if not self.started:
            self.started = True
            chunk = self._sniff(chunk)
        self.bytes += len(chunk)
        if self.decoder is not None:
            chunk = self.decoder.decode(chunk).encode("utf-8", "replace")
        buf = self.carry + chunk if self.carry else chunk
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        if cut == 0 or len(buf) - cut > MAX_CARRY:
            # No line end for a long way: scan what we have as a window and keep
            # only enough for an anchor or a context window spanning the seam.
            if len(buf) > MAX_CARRY:
                keep = WINDOW
                self._scan(buf, len(buf) - keep, final=False)
                self.carry = buf[-keep:]
            else:
                self.carry = buf
            return
        self._scan(buf, cut, final=False)
        self.carry = buf[cut:]

    def close(self, truncated: str | None = None) -> None:
        if self.decoder is not None:
            self.carry += self.decoder.decode(b"", final=True).encode("utf-8", "replace")
        if self.carry:
            self._scan(self.carry, len(self.carry), final=True)
            if not self.carry.endswith((b"\n", b"\r")):
                self.lines += 1
        self.carry = b""
        if truncated:
            self.status = "truncated"
            self.messages.append(truncated)
        if self.bytes == 0 and self.offset == 0:
            self.status = "empty"
            self.messages.append("the input is empty")

    def _sniff(self, chunk: bytes) -> bytes:
        if chunk.startswith(codecs.BOM_UTF16_LE) or chunk.startswith(codecs.BOM_UTF16_BE):
            self.decoder = codecs.getincrementaldecoder("utf-16")("replace")
            self.messages.append("UTF-16 text: decoded")
            return chunk
        if chunk.startswith(codecs.BOM_UTF8):
            chunk = chunk[3:]
        sample = chunk[:65536]
        # Binary data is still scanned (a log may start with NUL padding), but the
        # reader is told: a checkpoint dropped by mistake should not look "healthy".
        control = len(sample) - len(sample.translate(None, _CONTROL))
        if sample and control > len(sample) // 10:
            self.status = "binary"
            self.messages.append("this looks like binary data, not a text log")
        return chunk

    # ------------------------------------------------------------ the scan

    def _scan(self, buf: bytes, end: int, final: bool) -> None:
        plan = self.plan
        self._end, self._final = end, final
        if self.first_lines is None:
            self.first_lines = _complete_lines(buf[:min(end, 4 * WINDOW)], final)[:CONTEXT_LINES]
        if self.pending:
            self._complete_pending(buf, end, final)
        # Context (versions, launcher) from every line near the start of the input.
        if self.offset + self.bytes - len(buf) < HEAD_BYTES:
            self._head(buf, end)
        spans: dict[int, int] = {}   # candidate segment start -> end
        find = buf.find
        for a in plan.find_anchors:
            pos = find(a, 0, end)
            while pos != -1:
                start, stop = _segment(buf, pos)
                spans[start] = max(spans.get(start, 0), stop)
                pos = find(a, max(stop, pos + 1), end)
        if plan.alt_rx is not None:
            search = plan.alt_rx.search
            m = search(buf, 0, end)
            while m:
                pos = m.start()
                start, stop = _segment(buf, pos)
                spans[start] = max(spans.get(start, 0), stop)
                m = search(buf, max(stop, pos + 1), end)
        if spans:
            counted_to, line_no = 0, self.lines
            for start in sorted(spans):
                line_no += buf.count(b"\n", counted_to, start)
                counted_to = start
                seg = buf[start:spans[start]]
                present = [ai for ai, a in enumerate(plan.all_anchors) if a in seg]
                self._candidate(buf, start, spans[start], line_no + 1, present)
            self.lines = line_no + buf.count(b"\n", counted_to, end)
        else:
            self.lines += buf.count(b"\n", 0, end)
        lo = max(0, end - 4 * WINDOW)
        region = buf[lo:end]
        if lo == 0 and self.ended_cr and region.startswith(b"\n"):
            region = region[1:]
        tail = _complete_lines(region, final)
        self.recent = ((self.recent if lo == 0 else []) + tail)[-CONTEXT_LINES:]
        self.ended_cr = buf[end - 1:end] == b"\r"

    def _complete_pending(self, buf: bytes, end: int, final: bool) -> None:
        hi = min(end, 2 * WINDOW)
        region = buf[:hi]
        if self.ended_cr and region.startswith(b"\n"):
            region = region[1:]
        got = _complete_lines(region, final and hi == end)
        still = []
        for d in self.pending:
            d["after"] += got[:CONTEXT_LINES - len(d["after"])]
            if len(d["after"]) < CONTEXT_LINES and hi == end and not final:
                still.append(d)
        self.pending = still

    def _attach_context(self, d: dict, buf: bytes, start: int, stop: int) -> dict:
        lo = max(0, start - 2 * WINDOW)
        region = buf[lo:start]
        if lo == 0 and self.ended_cr and region.startswith(b"\n"):
            region = region[1:]
        before = _complete_lines(region)
        d["before"] = ((self.recent if lo == 0 else []) + before)[-CONTEXT_LINES:]
        hi = min(self._end, stop + 2 * WINDOW)
        after = _complete_lines(buf[stop:hi], self._final and hi == self._end)[1:]
        d["after"] = after[:CONTEXT_LINES]
        if len(d["after"]) < CONTEXT_LINES and hi == self._end and not self._final:
            self.pending.append(d)
        return d

    def _head(self, buf: bytes, end: int) -> None:
        region = buf[:min(end, HEAD_BYTES)]
        for key in self.plan.context_keys:
            pos = region.find(key)
            while pos != -1:
                start, stop = _segment(region, pos)
                context.extract(strip_ansi(region[start:stop].decode("utf-8", "replace")), self.facts)
                pos = region.find(key, stop)

    def _candidate(self, buf: bytes, start: int, stop: int, line_no: int, anchors: list) -> None:
        raw = buf[start:stop]
        text = strip_ansi(raw.decode("utf-8", "replace")).rstrip("\r\n")
        meta, rest = parse_prefix(text)
        ts = meta.get("ts")
        if ts is not None:
            self.last_ts = ts
        if "host" in meta:
            self.hosts.add(meta["host"])
        if "rank" in meta:
            self.ranks.add(meta["rank"])
        context.extract(text, self.facts)
        self.hang.add(text, meta, line_no, self.name)
        where = None
        for ai in anchors:
            for n, sig, rx, literal in self.plan.sigs_by_anchor.get(ai, ()):
                if literal and literal not in text:
                    continue
                m = rx.search(text)
                if not m:
                    continue
                if where is None:
                    where = self._where(line_no, text, meta)
                facts = {k: v for k, v in m.groupdict().items() if v is not None}
                self._record(n, self._attach_context(dict(where, facts=facts), buf, start, stop))
        if "rror" in text or "RROR" in text or "xception" in text:
            self._error_like(buf, start, stop, line_no, text, meta, rest)
        if self.collect_shapes:
            sh = fold(rest)
            if sh and sh not in self.shapes and len(self.shapes) < MAX_SHAPES:
                self.shapes[sh] = {"source": self.name, "line": line_no, "text": text[:500]}

    def _where(self, line_no, text, meta) -> dict:
        w = {"source": self.name, "order": self.order, "line": line_no, "text": text[:1000]}
        for k in ("ts", "rank", "local_rank", "host", "pid"):
            if k in meta:
                w[k] = meta[k]
        if "ts" not in w and self.last_ts is not None:
            w["ts_inherited"] = self.last_ts
        return w

    def _record(self, n: int, finding: dict) -> None:
        c = self.counts.get(n, 0) + 1
        self.counts[n] = c
        kept = self.findings.setdefault(n, [])
        if len(kept) <= KEEP_FIRST:
            kept.append(finding)          # the first ones, then one slot for the latest
        else:
            kept[-1] = finding

    def _error_like(self, buf, start, stop, line_no, text, meta, rest) -> None:
        if _ERRORISH.search(rest):
            self.error_lines += 1
            if self.first_error is None:
                self.first_error = self._attach_context(self._where(line_no, text, meta), buf, start, stop)
        m = _EXCEPTION.match(rest)
        if m and m.group("name") not in ("ChildFailedError",):
            self.last_exception = self._attach_context(self._where(line_no, text, meta), buf, start, stop)


def _trie(words: list[bytes]) -> bytes:
    """One regex for many literals, nested by shared prefix (A(?:ssert|ttempt)|C...).

    re tries the alternatives of a flat alternation one after another at every
    position whose byte starts any of them; nesting by prefix makes that one test
    per byte of input, which more than doubles the scan speed with ~100 anchors.
    A word that is a prefix of another is enough on its own: any hit only marks a
    candidate line, whose anchors are then checked one by one."""
    groups: dict[bytes, list[bytes]] = {}
    for w in words:
        groups.setdefault(w[:1], []).append(w[1:])
    parts = []
    for first, rests in sorted(groups.items()):
        if b"" in rests:
            parts.append(re.escape(first))
        elif len(rests) == 1:
            parts.append(re.escape(first + rests[0]))
        else:
            parts.append(re.escape(first) + b"(?:" + _trie(rests) + b")")
    return b"|".join(parts)


def _segment(buf: bytes, pos: int) -> tuple[int, int]:
    """The line (between \\n or \\r) around pos, at most WINDOW bytes on either side."""
    start = max(buf.rfind(b"\n", 0, pos), buf.rfind(b"\r", 0, pos)) + 1
    if pos - start > WINDOW:
        start = pos - WINDOW
    stop = _line_end(buf, pos, len(buf))
    if stop - pos > WINDOW:
        stop = pos + WINDOW
    return start, stop


def _line_end(buf: bytes, pos: int, limit: int) -> int:
    a = buf.find(b"\n", pos, limit)
    b = buf.find(b"\r", pos, limit)
    if a == -1:
        return limit if b == -1 else b
    return a if b == -1 else min(a, b)


_SPLIT = re.compile(rb"\r\n|\n|\r")


def _complete_lines(region: bytes, final: bool = False) -> list[str]:
    """The lines of region; the last piece counts only when final (it may be cut)."""
    if not region:
        return []
    parts = _SPLIT.split(region)
    if final:
        while parts and not parts[-1]:
            parts.pop()
    else:
        parts = parts[:-1]
    return [strip_ansi(x.decode("utf-8", "replace"))[:300] for x in parts]


def merge_ranges(parts: list[Source]) -> Source:
    """Join the scans of consecutive ranges of one input into one Source."""
    head = parts[0]
    for part in parts[1:]:
        for d in head.pending:
            d["after"] += (part.first_lines or [])[:CONTEXT_LINES - len(d["after"])]
        head.pending = part.pending
        shift = head.lines
        head.hang.merge(part.hang, shift)
        for kept in part.findings.values():
            for f in kept:
                f["line"] += shift
        for n, kept in part.findings.items():
            mine = head.findings.setdefault(n, [])
            merged = mine + kept
            head.findings[n] = merged[:KEEP_FIRST] + merged[-1:] if len(merged) > KEEP_FIRST + 1 else merged
            head.counts[n] = head.counts.get(n, 0) + part.counts[n]
        for k, v in part.facts.items():
            head.facts.setdefault(k, v)
        head.hosts |= part.hosts
        head.ranks |= part.ranks
        if part.first_error and head.first_error is None:
            head.first_error = dict(part.first_error, line=part.first_error["line"] + shift)
        if part.last_exception:
            head.last_exception = dict(part.last_exception, line=part.last_exception["line"] + shift)
        head.error_lines += part.error_lines
        for sh, where in part.shapes.items():
            if sh not in head.shapes and len(head.shapes) < MAX_SHAPES:
                head.shapes[sh] = dict(where, line=where["line"] + shift)
        head.lines += part.lines
        head.bytes += part.bytes
        head.messages += [m for m in part.messages if m not in head.messages]
        if part.last_ts is not None:
            head.last_ts = part.last_ts
    return head
