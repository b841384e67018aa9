"""The job model: where each line came from, what the launcher reported, and which
rank started the failure.

The scan gives every input a JobLines (Source.job). It reads the lines the job model
needs (a traceback's header and, following it, that traceback's exception line; the
launcher's failure report; exits, restarts, lines that name a rank) and keeps them as
small events, each with its origin: global rank where a prefix or the file name says
it, local rank, host/pod, the stream (input and `srun -l` task or pod) and the restart
attempt. Nothing is kept per healthy line.

decide() reads the events of every input once, after the scan, and answers "who
started it" by causality, in this order:
  named      a line that names the rank (monitoredBarrier, a collective-mismatch check)
  crashed    a rank's own error (not a report of a peer's failure) or death by a signal,
             the earliest first, in the first restart attempt that failed
  silent     no own error anywhere: the rank that printed no collateral while the others
             timed out waiting (stuck) or lost their peer (it left)
  launcher   torchrun's "Root Cause (first observed failure)", when nothing else decides
and says when the launcher's Root Cause block names a rank that was only a victim.

Sources of the formats (PyTorch 2.13, read in the installed package):
  torch/distributed/elastic/multiprocessing/errors/__init__.py  _FAILURE_FORMAT_TEMPLATE,
      _MSG_FORMAT_TEMPLATE ("Failures:", "Root Cause (first observed failure):")
  torch/distributed/elastic/multiprocessing/api.py:1003  "failed (exitcode: %s) local_rank: %s
      (pid: %s) of binary: %s" (one line per failed attempt of an agent)
  torch/distributed/elastic/agent/server/api.py:944  "[%s] Worker group %s. %s/%s attempts
      left; will restart worker group" (INFO)
  libtorch_cpu ProcessGroupGloo/Wrapper: "Rank N failed to pass monitoredBarrier in T ms",
      "Detected mismatch between collectives on ranks. Rank A is running collective: ...,
      but Rank B is running collective: ..."
"""
from __future__ import annotations

import re
from functools import cmp_to_key

from .lines import fold, parse_prefix, strip_ansi

# no job has a million ranks: a bigger number read as a rank is some other value
MAX_RANK = 1 << 20

MAX_EVENTS = 20000          # events kept per input
CAUGHT_LINES = 2            # lines a rank's own log goes on after an error it survived (decide)
WENT_ON_LINES = 5           # an input this much longer after its errors, and no failure: they were outlived
TRACEBACK_LINES = 400       # lines read after a traceback header for its exception line
BLOCK_LINES = 16384         # lines of one launcher failure report read at most
FOLLOW_BUDGET = 400_000     # lines followed per input in all

# Lines the job model reads that no signature may anchor: the scan adds them to its
# anchors (scan.Plan), like suspects.SCAN_ANCHORS. The traceback header is a
# scan.TRACE_MARKERS word already.
# torchrun's start-up warning (torch/distributed/run.py, main process, when OMP_NUM_THREADS is
# unset and a node runs several workers), among an input's first lines: its console is in the
# inputs. Not an anchor: a 64-node job prints it 64 times (scan.Source looks in an input's
# head, scan.HEAD_BYTES: Source.launcher_banner)
LAUNCHER_BANNER = "Setting OMP_NUM_THREADS environment variable for each process"
JOB_ANCHORS = ("failed (exitcode:", "Root Cause (first observed failure)", "ChildFailedError",
               "attempts left", "failed to pass monitoredBarrier", "is running collective:",
               "srun: error:", "Fatal Python error:", "terminate called after throwing",
               "managed by process", "launched up to operation", "Missing communicator data from")

# What a line must hold for _take to read it while no traceback or launcher report is open
# (then every line counts): the scan skips a candidate line that holds none of these, nor any
# other reader's word (scan.Plan.reader_words)
WORDS = JOB_ANCHORS + ("(most recent call", "ChildFailedError", "terminate called", "restart_count=",
                       "Worker group failed", "monitoredBarrier", "Fatal Python error:")

_EXIT = re.compile(r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: \d+\)")
_RESTART = re.compile(r"Worker group [A-Z]+\. \d+/\d+ attempts left")
_BLOCK_HEAD = re.compile(r"^(?:Failures:|Root Cause \(first observed failure\):)\s*$")
_FIELD = re.compile(r"^\s{1,4}(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*)$")
_ITEM = re.compile(r"^\[(?P<n>\d+)\]:\s*$")
_RANK_FIELD = re.compile(r"(?P<rank>-?\d+) \(local_rank: (?P<local>-?\d+)\)")
_CODE_FIELD = re.compile(r"(?P<code>-?\d+)(?: \(pid: \d+\))?\s*(?:\((?P<signal>SIG[A-Z0-9]+)\))?")
_BARRIER = re.compile(r"\bRanks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier")
_MISMATCH = re.compile(r"Rank (?P<a>\d+) is running collective: (?P<fa>.{0,1500}?), but Rank (?P<b>\d+) is running "
                       r"collective: (?P<fb>.{0,1500}?)(?:\.Collectives differ|$)")
# what tells two fingerprints apart (the sequence number is the same by construction)
_PRINT = re.compile(r"(?:OpType|TensorShape|TensorDtypes)=(?:\[[^\]]*\]|\w+)")
_SRUN_EXIT = re.compile(r"srun: error: (?P<host>[\w.-]+): tasks? (?P<tasks>[\d,-]+): "
                        r"(?:Exited with exit code (?P<code>\d+)|(?P<how>Killed|Terminated|Segmentation fault|"
                        r"Aborted|Bus error))")
_FATAL = re.compile(r"^Fatal Python error: (?P<what>.{1,120})")
# NCCL RAS (`ncclras`, NCCL 2.24+; src/ras/client_support.cc), as NVIDIA/nccl#1762 and #1911 show it:
#   "#0-0 (b3398875b8b2a063) INCOMPLETE" / "  Missing communicator data from 1 rank"
#   "  30 ranks have launched up to operation 640" / "  2 ranks have launched up to operation 641"
#   "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124"
_RAS_RANK = re.compile(r"\bRank (?P<rank>\d+) -- GPU (?P<gpu>\d+) managed by process (?P<pid>\d+) on node (?P<node>\S+)")
_RAS_COUNT = re.compile(r"\b(?P<n>\d+) ranks? ha(?:ve|s) launched up to operation (?P<op>\d+)")
# The last line of a Python traceback: "pkg.mod.Name: message" or a bare "Name".
_EXC_LINE = re.compile(r"^(?P<name>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(?P<msg>.*))?$")
_TB_HEAD = "Traceback (most recent call last)"
# A frame of a Python traceback: '  File "/path/train.py", line 132, in sync_grads'
_TB_FRAME = re.compile(r'^File "(?P<file>[^"]{1,1000})", line (?P<line>\d{1,9}), in (?P<func>\S{1,200})')
TB_FRAMES = 8               # innermost frames kept of a traceback (where the rank was when it failed)
# a traceback header this close to the end of its input, with no exception line after it, was
# cut by the end of the paste (a traceback's frames take two lines each)
CUT_TRACEBACK_LINES = 18
# libstdc++'s verbose terminate handler: "terminate called after throwing an instance of 'T'"
# and, on the next line, "  what():  <message>"
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?P<type>[^']{1,200})'")
_LOGDIR = re.compile(r"(?:^|[/\\])attempt_(?P<attempt>\d+)[/\\](?P<local>\d+)[/\\](?:stdout|stderr|error)\b")
# a negative exit code is the signal that killed the process (Linux numbers)
_SIGNAL_NAMES = {-9: "SIGKILL", -11: "SIGSEGV", -6: "SIGABRT", -7: "SIGBUS", -15: "SIGTERM", -2: "SIGINT",
                 -1: "SIGHUP", -8: "SIGFPE", -4: "SIGILL", -10: "SIGUSR1", -12: "SIGUSR2"}

# What a rank prints because a peer failed (the peer's death, a timeout waiting for it,
# the agent's termination): never the rank's own failure. Each text is how PyTorch 2.x,
# Gloo or NCCL prints it (gloo/transport/tcp/pair.cc, unbound_buffer.cc; ProcessGroupNCCL.cpp;
# TCPStore.cpp; elastic's SignalException). Entries marked downstream in the index count too
# (decide: `downstream_lines`).
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Read error [", "Broken pipe",
             "failed to recv, got 0 bytes", "remote process exited", "Socket closed", "EOF",
             "NCCL communicator was aborted", "Connection refused", "connectFullMesh failed",
             # Horovod's SHUT_DOWN_ERROR (horovod/common/common.h), returned to the collectives
             # still pending on the ranks that did not stop: another rank raised or finished
             "Horovod has been shut down")
WAITED = ("Timed out waiting", "Watchdog caught collective operation timeout", "Socket Timeout",
          "timed out after", "wait timeout", "Timeout waiting for key", "collective operation timeout",
          "failed to pass monitoredBarrier", "due to a collective timeout",
          "Detected mismatch between collectives")
# Gloo's receiving side when a peer sent a tensor of another size or dtype (pair.cc's enforce)
MISMATCHED = ("Received data size doesn't match expected size",)
TERMINATED = ("SignalException", "Signal 15 (SIGTERM)", "received signal SIGTERM", "KeyboardInterrupt")


class JobLines:
    """Per-input collector of the job model's events (plain data, merged across ranges)."""

    def __init__(self, name: str, order: int):
        self.name = name
        self.order = order
        self.events: list[dict] = []
        self.dropped = 0
        self.attempts: dict = {}       # stream -> restart attempts seen so far
        self.open_tb: dict = {}        # origin -> the traceback event waiting for its exception line
        self.block: dict | None = None  # the launcher report being read
        self.seen_to = 0               # lines up to here were read by following
        self.budget = FOLLOW_BUDGET
        self.agent = False             # a torchrun agent's own lines are in this input
        self.ras = None                # the NCCL RAS report section being read (_ras)
        m = _LOGDIR.search(name)
        # torchrun --log-dir: <dir>/<run_id>/attempt_<N>/<local_rank>/stdout.log
        self.logdir = {"attempt": int(m.group("attempt")), "local_rank": int(m.group("local"))} if m else None

    # ------------------------------------------------------------ scanning

    def add(self, text: str, meta: dict, rest: str, line_no: int) -> bool:
        """A candidate line of the scan; True when the lines after it should be followed
        (given one by one to follow())."""
        if line_no <= self.seen_to:
            return self.wants_following()
        self._take(text, meta, rest, line_no)
        return self.wants_following()

    def state(self) -> tuple:
        """What a line may have changed here (scan.REPEAT_NOTE)."""
        ras = self.ras
        return (len(self.events) + self.dropped, len(self.open_tb), self.block is not None,
                id(ras) if ras is not None else 0, len(ras["counts"]) if ras is not None else 0)

    def wants_following(self) -> bool:
        return self.budget > 0 and (bool(self.open_tb) or self.block is not None)

    def follow(self, raw: str, line_no: int) -> None:
        """The next line after what add() or the last follow() was given."""
        self.budget -= 1
        self.seen_to = line_no
        text = strip_ansi(raw).rstrip("\r\n")
        meta, rest = parse_prefix(text)
        self._take(text, meta, rest, line_no)
        # a traceback open too long is given up: its header stands as the error
        for key in [k for k, e in self.open_tb.items() if line_no - e["line"] > TRACEBACK_LINES]:
            del self.open_tb[key]

    def stop_following(self) -> None:
        self.open_tb.clear()
        self.block = None

    def _stream(self, meta: dict):
        return meta.get("task", meta.get("host"))

    def _origin(self, meta: dict) -> dict:
        o = {"stream": self._stream(meta)}
        if "rank" in meta and meta.get("rank_from") not in ("word", "group", "task"):
            o["rank"] = meta["rank"]
        elif "rank" in meta and meta.get("rank_from") == "task":
            o["task_rank"] = meta["rank"]   # `srun -l` task number: a rank when srun runs the ranks
        if "local_rank" in meta:
            o["local_rank"] = meta["local_rank"]
        if "host" in meta:
            o["host"] = meta["host"]
        if "ts" in meta:
            o["ts"] = meta["ts"]
        return o

    def _event(self, kind: str, meta: dict, line_no: int, text: str, **extra) -> dict | None:
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return None
        e = {"kind": kind, "source": self.name, "order": self.order, "line": line_no, "text": text[:500]}
        e.update(self._origin(meta))
        stream = e["stream"]
        e["attempt"] = self.logdir["attempt"] if self.logdir else self.attempts.get(stream, 0)
        e.update(extra)
        self.events.append(e)
        return e

    def _take(self, text: str, meta: dict, rest: str, line_no: int) -> None:
        body = rest.strip()
        block = self.block
        if block is not None:
            if self._block_line(block, body, meta, line_no):
                return
        if _TB_HEAD in rest:
            key = self._key(meta)
            if key not in self.open_tb:
                e = self._event("error", meta, line_no, text, exc=None, msg=None, traceback=True)
                if e is not None:
                    self.open_tb[key] = e
            else:
                self.open_tb[key].pop("frames", None)   # a chained exception: its own frames count
            return
        if self.open_tb and body.startswith('File "'):
            self._frame(body, meta)
            return
        if "ChildFailedError" in rest:
            self.agent = True
            wrapper = self.open_tb.pop(self._key(meta), None)
            if wrapper is not None:
                wrapper["kind"] = "agent-traceback"   # the launcher's own traceback, no rank's error
            s = self._stream(meta)
            # the final report belongs to the last attempt, which ended with the exit line before it
            self.block = {"stream": s, "meta": meta, "section": None, "item": None, "lines": 0,
                          # -1 when this range saw no exit line of the stream: the range before
                          # did (merge adds its count; decide makes a -1 left over 0)
                          "attempt": self.attempts.get(s, 0) - 1}
            return
        m = _TERMINATE.search(rest) if "terminate called" in rest else None
        if m:
            e = self._event("error", meta, line_no, text, exc=m.group("type"), msg=None, native=True)
            if e is not None:
                self.open_tb[self._key(meta)] = e
            return
        if self.open_tb and self._complete_traceback(text, meta, rest, body, line_no):
            return
        if "failed (exitcode:" in rest:
            m = _EXIT.search(rest)
            if m:
                self.agent = True
                self._event("exit", meta, line_no, text, exitcode=int(m.group("code")),
                            local_rank=int(m.group("local")))
                # the agent saw this attempt fail: what follows in its stream is the next one
                # (a restart) or the final report
                s = self._stream(meta)
                e = self._event("attempt-end", meta, line_no, text)
                self.attempts[s] = self.attempts.get(s, 0) + 1
            return
        if "attempts left" in rest or "restart_count=" in rest or "Worker group failed" in rest:
            # the agent's own word on its restarts (a line about the whole job, no rank's)
            if _RESTART.search(rest):
                self.agent = True
            self._event("restart", meta, line_no, text)
            return
        if self._names(rest, meta, line_no, text):
            return
        if "srun: error:" in rest:
            m = _SRUN_EXIT.search(rest)
            if m:
                self._event("srun-exit", meta, line_no, text, host=m.group("host"), tasks=m.group("tasks"),
                            exitcode=int(m.group("code")) if m.group("code") else None, how=m.group("how"))
            return
        m = _FATAL.match(body)
        if m:
            self._event("fatal", meta, line_no, text, what=m.group("what"))
            return
        self._ras(rest, meta, line_no, text)

    def _frame(self, body: str, meta: dict) -> None:
        """A frame of the traceback open for the line's origin: kept (innermost last) so that
        ranks that failed in another place than their peers can be told apart."""
        e = self.open_tb.get(self._key(meta))
        m = _TB_FRAME.match(body)
        if e is None or e.get("native") or not m:
            return
        frames = e.setdefault("frames", [])
        frames.append([m.group("file")[-300:], int(m.group("line")), m.group("func")])
        del frames[:-TB_FRAMES]

    def _complete_traceback(self, text: str, meta: dict, rest: str, body: str, line_no: int) -> bool:
        """The line that ends an open traceback of the line's origin (its exception line, or a
        native abort's what()); True when it was one."""
        key = self._key(meta)
        e = self.open_tb.get(key)
        if e is not None and e.get("native"):
            if body.startswith("what():"):
                e.update(msg=body[7:].strip()[:300], what_line=line_no)
            del self.open_tb[key]
            return True
        # a launcher prefix ("[rank2]: ") leaves one space before the message
        lead = rest[1:] if rest[:1] == " " and rest is not text else rest
        if e is not None and lead[:1] not in (" ", "\t") and body:
            m = _EXC_LINE.match(body)
            if m and not body.startswith(("File ", "During handling", "The above exception")):
                e.update(line=line_no, text=text[:500], exc=m.group("name").rsplit(".", 1)[-1],
                         msg=(m.group("msg") or "")[:300], header_line=e["line"])
                for k in ("ts",):
                    if k in meta:
                        e[k] = meta[k]
                del self.open_tb[key]
                self._names(rest, meta, line_no, text)    # a check's error names the rank
                return True
        return False

    def _ras(self, rest: str, meta: dict, line_no: int, text: str) -> None:
        """NCCL RAS's report: ranks it misses, and operation counts that differ."""
        if "Missing communicator data from" in rest:
            self.ras = {"section": "missing", "counts": []}
            return
        m = _RAS_COUNT.search(rest)
        if m:
            ras = getattr(self, "ras", None)
            if ras is None or ras["section"] != "counts" or (ras["counts"] and ras.get("listed")):
                ras = self.ras = {"section": "counts", "counts": []}
            ras["counts"].append((int(m.group("n")), int(m.group("op"))))
            return
        m = _RAS_RANK.search(rest)
        ras = getattr(self, "ras", None)
        if m and ras is not None:
            ras["listed"] = True
            self._event("ras", {}, line_no, text, section=ras["section"], counts=list(ras["counts"]),
                        ras_rank=int(m.group("rank")), node=m.group("node"), pid=int(m.group("pid")))

    def _names(self, rest: str, meta: dict, line_no: int, text: str) -> bool:
        """A line that names ranks: a monitored barrier's, the collective-mismatch check's."""
        if "monitoredBarrier" in rest:
            m = _BARRIER.search(rest)
            if m:
                self._event("named", meta, line_no, text, how="monitoredBarrier",
                            ranks=[int(x) for x in re.split(r", ?", m.group("ranks"))])
            return True
        if "is running collective:" in rest:
            m = _MISMATCH.search(rest)
            if m:
                ops = {}
                for r, fp in ((m.group("a"), m.group("fa")), (m.group("b"), m.group("fb"))):
                    ops[int(r)] = (", ".join(_PRINT.findall(fp or "")) or (fp or "?"))[:160]
                self._event("mismatch", meta, line_no, text, ops=ops)
            return True
        return False

    def _key(self, meta: dict):
        return (self._stream(meta), meta.get("rank") if meta.get("rank_from") not in ("word", "group") else None,
                meta.get("local_rank"))

    def _block_line(self, block: dict, body: str, meta: dict, line_no: int) -> bool:
        """A line of torchrun's failure report; False when the report has ended."""
        block["lines"] += 1
        if block["lines"] > BLOCK_LINES:
            self.block = None
            return False
        if _BLOCK_HEAD.match(body):
            block["section"] = "root" if body.startswith("Root") else "failures"
            block["item"] = None
            return True
        if block["section"] is None:
            # the title ("train.py FAILED") and rules before the first section
            return len(body) < 300
        m = _ITEM.match(body)
        if m:
            block["item"] = self._event("report", block["meta"], line_no, f"[{m.group('n')}]:",
                                        section=block["section"])
            if block["item"] is not None:
                block["item"]["attempt"] = block["attempt"]
                block["item"]["stream"] = block["stream"]
            return True
        m = _FIELD.match(body if not body.startswith(("time", "host", "rank", "exit", "error_file", "traceback"))
                         else "  " + body)
        item = block["item"]
        if m and item is not None:
            key, value = m.group("key"), m.group("value").strip()
            if key == "rank":
                r = _RANK_FIELD.match(value)
                if r:
                    item["rank"], item["local_rank"] = int(r.group("rank")), int(r.group("local"))
                    item["line"], item["text"] = line_no, body[:500]
            elif key == "exitcode":
                c = _CODE_FIELD.match(value)
                if c:
                    item["exitcode"] = int(c.group("code"))
                    if c.group("signal"):
                        item["signal"] = c.group("signal")
            elif key == "host":
                item["report_host"] = value[:200]
            elif key == "time":
                item["time"] = value[:40]
            elif key == "traceback":
                item["traceback"] = value[:300]
            return True
        if body.startswith("===") and block["section"] == "root":
            self.block = None
            return True
        if body.startswith(("---", "===", "<NO_OTHER_FAILURES>")) or not body:
            return True
        # the traceback field of a Python failure goes on over several indented lines
        if item is not None and "traceback" in item and body and len(item["traceback"]) < 2000:
            item["traceback"] += "\n" + body[:300]
            return True
        self.block = None
        return False

    # ------------------------------------------------------------ ranges

    def carry_over(self, lines: list[str], shift: int) -> set:
        """The first lines of the next range (numbered from shift + 1) finish what this range
        left open: a traceback waiting for its exception line, a launcher report. Nothing
        else is taken from them (the next range's own scan read them). Returns the lines that
        belong to the report: the next range, which did not know it was inside one, may have
        read them as something else (merge drops that)."""
        in_report: set = set()
        for i, raw in enumerate(lines, 1):
            if not (self.open_tb or self.block is not None):
                break
            line_no = shift + i
            text = strip_ansi(raw).rstrip("\r\n")
            meta, rest = parse_prefix(text)
            body = rest.strip()
            if self.block is not None and self._block_line(self.block, body, meta, line_no):
                in_report.add(line_no)
                continue
            if "ChildFailedError" in rest:
                # the launcher's own traceback ends here; the next range read the report after it
                wrapper = self.open_tb.pop(self._key(meta), None)
                if wrapper is not None:
                    wrapper["kind"] = "agent-traceback"
                continue
            if self.open_tb:
                if body.startswith('File "'):
                    self._frame(body, meta)
                else:
                    self._complete_traceback(text, meta, rest, body, line_no)
                for key in [k for k, e in self.open_tb.items() if line_no - e["line"] > TRACEBACK_LINES]:
                    del self.open_tb[key]
        return in_report

    def merge(self, other: "JobLines", shift: int, in_report: set = frozenset()) -> None:
        """Append the events of the next range of the same input (carry_over first: a
        traceback or report this range left open ends in the next one's first lines)."""
        room = max(MAX_EVENTS - len(self.events), 0)
        copies = {}          # the other range's events -> their copies here (what is still open)
        base = dict(self.attempts)   # attempts seen before the other range
        kept = [e for e in other.events if e.get("header_line", e["line"]) + shift not in in_report]
        for e in kept[:room]:
            c = dict(e, line=e["line"] + shift)
            if "header_line" in e:
                c["header_line"] = e["header_line"] + shift
            c["attempt"] = e["attempt"] + (self.attempts.get(e.get("stream"), 0) if not self.logdir else 0)
            self.events.append(c)
            copies[id(e)] = c
        self.dropped += other.dropped + max(len(kept) - room, 0)
        for s, n in other.attempts.items():
            self.attempts[s] = self.attempts.get(s, 0) + n
        self.agent = self.agent or other.agent
        # a traceback still open here waits on in the next range, unless its origin opened another
        for k, e in other.open_tb.items():
            if id(e) in copies:
                self.open_tb[k] = copies[id(e)]
        # a report that opened in the other range goes on (its item: the copy here); one open
        # here that carry_over() did not see end goes on through the other range
        # (the report carry_over() read on into the other range is the one the other range
        # found inside it: this one's, which read it from its start, stays)
        if other.block is not None and not (in_report and self.block is not None):
            s = other.block["stream"]
            self.block = dict(other.block, item=copies.get(id(other.block["item"])),
                              attempt=other.block["attempt"] + (base.get(s, 0) if not self.logdir else 0))


# ---------------------------------------------------------------- deciding


def _ranks_text(ranks) -> str:
    ranks = sorted(ranks)
    if not ranks:
        return ""
    spans, start, prev = [], ranks[0], ranks[0]
    for r in ranks[1:] + [None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        spans.append(f"{start}" if start == prev else (f"{start},{prev}" if prev == start + 1 else f"{start}-{prev}"))
        if r is not None:
            start = prev = r
    return ("rank " if len(ranks) == 1 else "ranks ") + ",".join(spans)


# "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] " before a message:
# where in the C++ source it was raised, which the reader of a one-line summary does not need
_SOURCE_AT = re.compile(r"\[(?:enforce fail at )?[^\]\s]*/[^\]\s]*\.(?:cc|cpp|cu|h|hpp|py):\d+\]\s?")


def _short(e: dict) -> str:
    if e.get("exc"):
        msg = _SOURCE_AT.sub("", e.get("msg") or "")
        return f"{e['exc']}: {msg[:140]}" if msg else e["exc"]
    if e["kind"] == "fatal":
        return f"Fatal Python error: {e['what']}"
    return e["text"][:160]


# the distributed stack's own words: a "Connection reset by peer" without them is a local
# socket's (a DataLoader worker that died under its parent: Python's ConnectionResetError)
_DISTRIBUTED = ("gloo", "pair.cc", "NCCL", "c10d", "TCPStore", "ProcessGroup", "socket.cpp", "Dist",
                "torch.distributed", "rendezvous", "Rendezvous", "Horovod")


def _is_collateral(text: str) -> str | None:
    """'peer' (its peer went away), 'waited' (it timed out waiting), 'mismatch' (it received
    another size than it expected from a peer), 'terminated' or None."""
    if any(k in text for k in TERMINATED):
        return "terminated"
    if any(k in text for k in MISMATCHED):
        return "mismatch"
    if any(k in text for k in WAITED):
        return "waited"
    if any(k in text for k in PEER_GONE) and any(k in text for k in _DISTRIBUTED):
        return "peer"
    return None


class _Resolver:
    """Global rank and host of an event: its own prefix, else its stream's launcher report
    ((stream, local rank) -> rank), else the input's file name (one log per rank) or its
    --log-dir path, else, with one agent, the local rank."""

    def __init__(self, jobs: list[JobLines], source_ranks: dict):
        self.local_map: dict = {}       # (stream, local_rank) -> (rank, host)
        self.hosts: dict = {}           # rank -> host
        self.source_ranks = source_ranks
        streams_with_agent = set()
        self.torchrun_streams = set()
        for j in jobs:
            for e in j.events:
                if e["kind"] == "report" and "rank" in e:
                    key = (e["order"], e.get("stream"), e.get("local_rank"))
                    self.local_map.setdefault(key, e["rank"])
                if e["kind"] in ("report", "exit", "attempt-end"):
                    streams_with_agent.add((e["order"], e.get("stream")))
                if "local_rank" in e and e["kind"] not in ("report", "exit"):
                    self.torchrun_streams.add((e["order"], e.get("stream")))
                if e.get("rank") is not None and e["kind"] not in ("report",):
                    self.torchrun_streams.add((e["order"], e.get("stream")))
        self.one_agent = len({s for _, s in streams_with_agent}) <= 1
        # the ranks each stream's lines name ("[rankN]:"), and --nproc-per-node from the reports:
        # an agent that printed no report of its own still holds the block its ranks fall in
        self.stream_ranks: dict = {}
        for j in jobs:
            for e in j.events:
                if e.get("rank") is not None and e["kind"] not in ("report",):
                    self.stream_ranks.setdefault((e["order"], e.get("stream")), set()).add(e["rank"])
        locals_ = [l for (_, _, l) in self.local_map if l is not None]
        self.nproc = max(locals_) + 1 if locals_ else None
        self.torchrun_streams |= streams_with_agent
        # an agent's own report: the rank it saw fail first, for the error lines of its stream
        # that carry no rank prefix (no --tee: a worker's traceback is its bare stderr)
        self.stream_root: dict = {}
        for j in jobs:
            for e in j.events:
                if e["kind"] == "report" and e.get("section") == "root" and "rank" in e:
                    self.stream_root.setdefault((e["order"], e.get("stream"), e["attempt"]), e["rank"])

    def rank(self, e: dict):
        if e.get("rank") is not None and e["kind"] != "report":
            return e["rank"]
        if e["kind"] == "report":
            return e.get("rank")
        key = (e["order"], e.get("stream"), e.get("local_rank"))
        if e.get("local_rank") is not None:
            if key in self.local_map:
                return self.local_map[key]
            if self.one_agent:
                return e["local_rank"]
            seen = self.stream_ranks.get((e["order"], e.get("stream")))
            if seen and self.nproc and e["local_rank"] < self.nproc:
                return (min(seen) // self.nproc) * self.nproc + e["local_rank"]
        r = self.source_ranks.get(e["order"])
        if r is not None:
            return r
        if e.get("task_rank") is not None and (e["order"], e.get("stream")) not in self.torchrun_streams:
            return e["task_rank"]
        if e["kind"] in ("error", "fatal") and e.get("stream") is not None:
            return self.stream_root.get((e["order"], e.get("stream"), e["attempt"]))
        return None


def attempt_of(f: dict, ends: dict, logdir: dict) -> int:
    """The restart attempt a finding or event belongs to: its --log-dir folder's, else the
    number of attempts its stream (input and `srun -l` task or host) had ended before it."""
    if f["order"] in logdir:
        return logdir[f["order"]]["attempt"]
    stream = f.get("task", f.get("host"))
    return sum(1 for x in ends.get((f["order"], stream), ()) if x < f["line"])


def decide(jobs: list[JobLines], source_ranks: dict, downstream_lines: set, world: int | None = None,
           extra_ranks: set = frozenset(), causes: list | None = None, waiting_ranks: set = frozenset(),
           source_lines: dict | None = None, banner: bool = False) -> dict:
    """The job model's answer: {"suspects": [...], "job": {...}, "verdict": str} (plain data).

    jobs: every input's JobLines; source_ranks: input order -> the rank a per-rank input
    belongs to; downstream_lines: (source, line) of lines the index files under a report
    of a failure elsewhere (a downstream or wrapper entry); causes: the lines where a cause
    entry's defining signature matched ({source, order, line, text, entry, rank?, ts?}),
    each the own failure of the rank that printed it; waiting: ranks that the watchdog or
    collective-timeout lines show waiting (suspects.HangLines); banner: torchrun's start-up
    banner is among an input's first lines (its console is in the inputs)."""
    if world is not None and not 0 < world <= MAX_RANK:
        world = None         # "world_size=" of some other thing: ranks are listed from range(world)
    for j in jobs:
        for e in j.events:
            if e["attempt"] < 0:
                e["attempt"] = 0     # a launcher report with no exit line before it
    res = _Resolver(jobs, source_ranks)
    events = []
    ends: dict = {}        # (order, stream) -> lines where an attempt ended
    # torchrun --log-dir trees: one per agent. With one, a folder's local rank is the rank; with
    # several (one per node), only a launcher report could map them, so they stay unmapped
    roots = {j.name.split("attempt_")[0] for j in jobs if j.logdir}
    for j in jobs:
        for e in j.events:
            e = dict(e)
            if j.logdir and e.get("local_rank") is None and e.get("rank") is None and len(roots) == 1:
                e["local_rank"] = j.logdir["local_rank"]
            e["grank"] = res.rank(e)
            events.append(e)
            if e["kind"] == "attempt-end":
                ends.setdefault((e["order"], e.get("stream")), []).append(e["line"])
    logdir = {j.order: j.logdir for j in jobs if j.logdir}
    for f in causes or []:
        # a cause's line is the own failure of the rank that printed it, in the attempt its
        # stream was in then
        meta = {k: f[k] for k in ("rank", "local_rank", "host", "ts") if k in f}
        stream = f.get("task", f.get("host"))
        if "task" in f and f.get("rank") == f["task"]:
            # the `srun -l` task number, not a rank prefix: resolved like the job's own events
            meta["task_rank"] = meta.pop("rank")
        e = {"kind": "error", "source": f["source"], "order": f["order"], "line": f["line"], "text": f["text"][:500],
             "stream": stream, "exc": None, "msg": None, "entry": f["entry"], **meta}
        e["attempt"] = attempt_of(f, ends, logdir)
        if f["order"] in logdir and len(roots) == 1:
            e.setdefault("local_rank", logdir[f["order"]]["local_rank"])
        e["grank"] = res.rank(e)
        if e["grank"] is not None:
            events.append(e)
    agent = any(j.agent for j in jobs)
    # One rank's own file written across restarts (per-rank files, no timestamps) says nothing
    # of which attempt a line belongs to; the launcher's exit lines say in which attempt each
    # rank failed: an error of such a file goes to the one attempt its rank failed in (dev c24)
    if len({e["attempt"] for e in events if e["kind"] == "attempt-end"}) > 1:
        failed_in: dict = {}
        for e in events:
            if e["kind"] == "exit" and e.get("grank") is not None and e.get("exitcode") not in (None, 0, -15):
                failed_in.setdefault(e["grank"], set()).add(e["attempt"])
        unplaced = {j.order for j in jobs if not j.logdir and not j.agent and not j.attempts}
        for e in events:
            if (e["order"] in unplaced and e["kind"] in ("error", "fatal") and "ts" not in e
                    and len(failed_in.get(e.get("grank"), ())) == 1):
                e["attempt"] = next(iter(failed_in[e["grank"]]))
    # `srun -l` tasks that run a torchrun agent are nodes, not ranks (reason drops them from
    # the findings' rank)
    node_tasks = sorted([o, st] for (o, st) in res.torchrun_streams if isinstance(st, int))
    reports = [e for e in events if e["kind"] == "report" and e.get("grank") is not None]
    for e in reports:
        h = e.get("host") or (e["stream"] if isinstance(e.get("stream"), str) else None)
        if h:
            res.hosts.setdefault(e["grank"], h)
    for e in events:
        if e.get("grank") is not None and e.get("host"):
            res.hosts.setdefault(e["grank"], e["host"])

    known = {e["grank"] for e in events if e.get("grank") is not None} | set(extra_ranks) | set(source_ranks.values())
    if world:
        known |= set(range(world))
    elif len({(o, st) for (o, st, _) in res.local_map}) > 1 and not source_ranks:
        # (per-rank files, when given, say which ranks there are: nodes may run different counts)
        # several agents: torchrun gives each node a block of --nproc-per-node consecutive
        # ranks, so a node whose report names one of its ranks has the whole block (a rank
        # that exited 0 early appears in no report)
        nproc = max(l for (_, _, l) in res.local_map if l is not None) + 1
        for (o, st, l), r in res.local_map.items():
            if l is not None and r is not None and r - l >= 0:
                known |= set(range(r - l, r - l + nproc))
    # attempts: the restart rounds seen; the first one with a failure is where it started
    # a restart shows as a rank's lines, an exit or a report after an attempt ended
    attempts = sorted({e["attempt"] for e in events if e["kind"] in ("error", "fatal", "exit", "report")})
    failed_attempts = sorted({e["attempt"] for e in events if e["kind"] in ("error", "fatal", "named", "mismatch", "ras")
                              or (e["kind"] in ("exit", "report") and e.get("exitcode"))
                              or (e["kind"] == "srun-exit")})
    job = {"attempts": (max(attempts) + 1) if attempts else 1, "ranks": [], "world_size": world,
           "launcher_root_cause": None, "agent": agent, "node_tasks": node_tasks}
    root = [e for e in reports if e["section"] == "root"]
    if root:
        r = root[-1]
        job["launcher_root_cause"] = {k: r[k] for k in ("grank", "exitcode", "signal", "report_host", "time",
                                                          "source", "line", "text", "attempt") if k in r}
        job["launcher_root_cause"]["rank"] = job["launcher_root_cause"].pop("grank")
    # where attempts ended, for the report to place its findings in them (attempt_of)
    out = {"suspects": [], "job": job, "verdict": None, "ends": ends, "logdir": logdir,
           # the launcher's own lines (exits, reports, restarts): they speak for the whole job
           "launcher_lines": {(e["source"], e["line"]) for e in events
                              if e["kind"] in ("exit", "attempt-end", "report", "restart")}}
    job["failed"] = bool(failed_attempts)
    if not failed_attempts:
        job["ranks"] = _rank_rows(events, known, None, res)
        return out
    # Did the job fail at all? A launcher that reports a failure, a signal, a rank that
    # reports a peer's failure or a check that names one. Without any, errors that every
    # input went on from (a handled exception printed with its traceback, then more
    # training) did not stop the job.
    lines = source_lines or {}
    # one log per rank (per-rank files, a --log-dir tree): the line of each one's last error
    per_rank = {o for o in source_ranks} | set(logdir)
    last_error: dict = {}
    for e in events:
        if e["kind"] in ("error", "fatal") and e["order"] in per_rank:
            last_error[e["order"]] = max(last_error.get(e["order"], 0), e["line"])
    failing = any(
        (e["kind"] in ("exit", "report") and e.get("exitcode") not in (None, 0))
        or e["kind"] in ("srun-exit", "fatal", "named", "mismatch", "attempt-end", "ras")
        or (e["kind"] == "error" and not e.get("entry") and _is_collateral(e["text"] + " " + (e.get("msg") or "")))
        or (e["kind"] == "error" and e.get("entry"))       # a line a cause entry defines: a real failure
        for e in events)
    # torchrun's own console (--tee's "[defaultN]:" lines) always ends a failed job with
    # its "failed (exitcode: ...)" line: without it, the job did not fail
    tee = any(e["kind"] == "error" and e.get("local_rank") is not None and not logdir.get(e["order"]) for e in events)
    # one log per rank: a rank that died takes its peers down with it, and they say so; peers
    # whose logs show nothing wrong mean it did not die
    erred = {e["order"] for e in events if e["kind"] == "error" and e["order"] in per_rank}
    peers_fine = len(per_rank) >= 2 and bool(per_rank - erred - {o for o in per_rank if lines.get(o, 0) == 0})
    # an error that one rank's own log goes on from was not fatal there, so the same error on the
    # other ranks is no failure either (a missing optional warm-start file every rank reports)
    def went_on(e):
        return lines.get(e["order"], 0) - e["line"] >= WENT_ON_LINES
    outlived = {_DIGITS.sub("#", _short(e)) for e in events
                if e["kind"] == "error" and e["order"] in per_rank and went_on(e)}
    fatal = [e for e in events if e["kind"] == "error" and not went_on(e)
             and _DIGITS.sub("#", _short(e)) not in outlived]
    # torchrun's console is in the inputs and reports no failed worker (it would print "failed
    # (exitcode: N)" and its report), and every error is in a rank's own log that goes on after
    # it (a Python process that dies of an exception prints nothing more): the ranks handled
    # them, whatever the error (a caught, logged failure to save an optional file: dev i36)
    errors = [e for e in events if e["kind"] in ("error", "fatal", "named", "mismatch", "ras")]
    handled = (banner and bool(errors)
               and not any(e["kind"] in ("exit", "report", "attempt-end", "srun-exit", "restart") for e in events)
               and all(e["kind"] == "error" and e["order"] in per_rank and (e.get("exc") or e.get("entry"))
                       and lines.get(e["order"], 0) > e["line"] for e in errors))
    if handled or (not failing and (tee or peers_fine or not fatal)):
        job["ranks"] = _rank_rows(events, known, None, res)
        job["outlived"], job["failed"] = True, False
        if handled:
            job["handled"] = True
        errs = _by_time([e for e in events if e["kind"] == "error"])
        if errs:
            who = sorted({e["grank"] for e in errs if e.get("grank") is not None})
            out["verdict"] = (f"The job did not fail: {_ranks_text(who) if who else 'a rank'} printed "
                              f"{_short(errs[0])[:120]} and went on (no launcher failure, no rank lost a peer).")
        return out
    first = failed_attempts[0]
    now = [e for e in events if e["attempt"] == first]
    later = [e for e in events if e["attempt"] > first and e["kind"] in ("error", "fatal", "exit", "report")]
    job["initiating_attempt"] = first
    if job["attempts"] > 1:
        # the hang lines carry no attempt: with restarts, only the events' own attempts count
        waiting_ranks = frozenset()

    def collateral(e) -> str | None:
        if (e["source"], e["line"]) in downstream_lines:
            return _is_collateral(e["text"]) or "peer"
        return _is_collateral(e["text"] + " " + (e.get("msg") or ""))

    own: dict[int, dict] = {}         # rank -> its first own failure (error, fatal, signal)
    cut: dict[int, dict] = {}         # rank -> a traceback the input ends inside (no exception line)
    coll: dict[int, dict] = {}        # rank -> its first collateral error
    exits: dict[int, dict] = {}       # rank -> its exit as the launcher reported it
    for e in now:
        r = e.get("grank")
        if e["kind"] == "report" and r is not None:
            if "exitcode" in e:
                exits.setdefault(r, e)
            continue
        if e["kind"] == "exit" and r is not None:
            exits.setdefault(r, e)
            continue
        if r is None or e["kind"] not in ("error", "fatal"):
            continue
        # a cause entry's own line is no report of a peer, whatever else the line also fits
        how = (None if e["kind"] != "error" else
               _is_collateral(e["text"]) if e.get("entry") else collateral(e))
        if how:
            e["collateral"] = how
            coll.setdefault(r, e)
        elif _cut_off(e, lines):
            cut.setdefault(r, e)
        elif r not in own or _by_time([e, own[r]])[0] is e:
            own[r] = e
    # A traceback that the input ends inside (a paste cut before its exception line) says a
    # rank raised, not what: when other ranks reported a lost peer or a timeout, it may be
    # the same report, so it names no one; alone, it is the rank's failure (dev-7 a004)
    if not coll:
        for r, e in cut.items():
            if r not in own:
                own[r] = e
    # the final report belongs to the last attempt: its exit codes say nothing of the first
    # attempt unless it is the first
    for r, e in exits.items():
        code = e.get("exitcode")
        # a death by a signal is the rank's own, unless it came after the rank reported a
        # peer's failure (an abort while tearing down: "terminate called without an active exception")
        if code is not None and code < 0 and code != -15 and r not in own and r not in coll:
            sig = e.get("signal") or _SIGNAL_NAMES.get(code, f"signal {-code}")
            own[r] = dict(e, kind="signal", signal=sig)
    # Gloo's size check aborts the receiving rank from a C++ thread: its message carries no
    # rank prefix where the rank's other lines go to a file of their own (per-rank files,
    # sealed-b b27). The one rank of the attempt that died of SIGABRT is the one that printed it
    aborted = [r for r, e in own.items() if e["kind"] == "signal" and e.get("exitcode") == -6]
    unplaced = [e for e in now if e["kind"] == "error" and e.get("grank") is None
                and _is_collateral(e["text"] + " " + (e.get("msg") or "")) == "mismatch"]
    # (several: a broadcast's root sent each of its children too much. Their lines are alike,
    # and those written at once can come out as one garbled line: nothing says whose is whose)
    if unplaced and len(unplaced) <= len(aborted) and not any(e["collateral"] == "mismatch" for e in coll.values()):
        for n, r in enumerate(sorted(aborted)):
            coll[r] = dict(unplaced[min(n, len(unplaced) - 1)], grank=r, collateral="mismatch")
            del own[r]
    # ranks that aborted on receiving more bytes than they expected (Gloo's preamble check): a
    # flight-recorder dump of two other ranks that disagree can then tell which is the odd one
    job["received_more"] = sorted(r for r, e in coll.items() if e["collateral"] == "mismatch")
    # A rank whose own log goes on after its last error, and that the launcher then had to
    # stop (SIGTERM), had caught that error (an optional file it failed to read, logged with
    # its traceback); when another rank exited on an error of its own, that one started it
    # (sealed-h h10). A Python process that dies of an exception prints nothing after it.
    caught = {r for r, e in own.items()
              if e["kind"] == "error" and e["order"] in last_error and exits.get(r, {}).get("exitcode") == -15
              and lines.get(e["order"], 0) - last_error[e["order"]] >= CAUGHT_LINES}
    died = {r for r in own if r not in caught and exits.get(r, {}).get("exitcode") not in (None, 0, -15)}
    if caught and died:
        for r in caught:
            del own[r]
        job["caught"] = sorted(caught)
    # Slurm's word on the node's tasks (a task is a node's agent when torchrun runs inside)
    srun = [{k: e[k] for k in ("host", "tasks", "exitcode", "how", "source", "line") if e.get(k) is not None}
            for e in now if e["kind"] == "srun-exit"]
    if srun:
        job["srun_exits"] = srun[:16]

    # 1. a line names the rank (a check, NCCL RAS, a store key nobody set); 2. ranks that
    # failed on their own
    if not own:         # (a rank's own failure says more than a key it did not set)
        now = now + _store_key_names(now, known, coll)
    suspects, named = _named_suspects(now, res, job)
    if own:
        suspects += _own_suspects(own, coll, named, res)
    # 3. nobody failed on their own (that the logs show): the rank that ended first while the
    # others lost it, or the one that went silent while they waited for it
    if not own and not named:
        found, known = _silent_suspects(coll, exits, known, waiting_ranks, agent, res, job, first)
        suspects += found
    # the launcher's verdict, as evidence
    rc = job["launcher_root_cause"]
    if suspects and rc and rc.get("rank") is not None:
        top = suspects[0]
        if rc["rank"] != top["rank"] and rc.get("attempt", 0) == first and rc["rank"] in own:
            # the launcher names a rank that failed on its own too: not a victim
            top["why"] += f"; torchrun's Root Cause block names rank {rc['rank']}, which failed on its own too"
        elif rc["rank"] != top["rank"] and rc.get("attempt", 0) == first:
            top["why"] += (f"; torchrun's Root Cause block names rank {rc['rank']}, which "
                           + ("only " + ("timed out waiting" if coll.get(rc["rank"], {}).get("collateral") == "waited"
                                         else "lost its peer") if rc["rank"] in coll else "failed later")
                           + " (a victim)")
            job["launcher_names_victim"] = True
        elif rc["rank"] != top["rank"]:
            top["why"] += (f"; torchrun's Root Cause block describes the last attempt (#{rc.get('attempt', 0)}), "
                           f"not the first one that failed")
    if later and suspects:
        kinds = []
        # the restart's own failures first, what its ranks reported of each other after them
        for e in sorted(later, key=lambda e: _is_collateral(e["text"] + " " + (e.get("msg") or "")) is not None):
            if e["kind"] in ("error", "fatal") and e.get("exc") and _short(e)[:80] not in kinds:
                kinds.append(_short(e)[:80])
        job["later_attempts"] = {"attempts": sorted({e["attempt"] for e in later}),
                                 "errors": kinds[:4]}
    if len(suspects) > 1 and suspects[0]["kind"] == "crashed" and suspects[1]["kind"] == "crashed":
        a, b = own.get(suspects[0]["rank"]), own.get(suspects[1]["rank"])
        if a and b and _unordered(a, b):
            job["undecided"] = [suspects[0]["rank"], suspects[1]["rank"]]
    out["suspects"] = suspects
    job["ranks"] = _rank_rows(events, known, first, res, own, coll, exits)
    # ranks with a log of their own (per-rank files, --log-dir): "its own lines are not in these
    # logs" would be wrong for them; their log holds no traceback the model reads
    own_logs = {r for o, r in source_ranks.items() if lines.get(o, 0) > 0}
    out["verdict"] = (_verdict(suspects, job, coll, own, own_logs)
                      or (job["ras_note"] + "." if job.get("ras_note") else None)
                      or _victims_only(coll, own, exits, known, cut))
    return out


def _cut_off(e: dict, lines: dict) -> bool:
    """A traceback whose exception line never came because its input ended first."""
    return (e["kind"] == "error" and e.get("traceback") and e.get("exc") is None and not e.get("entry")
            and lines.get(e["order"], 0) - e["line"] <= CUT_TRACEBACK_LINES)


# TCPStore's wait (TCPStore.cpp: "wait timeout after <ms>ms, keys: <the keys waited for>").
# Gloo's rendezvous waits for each peer's address under ".../<device>//<n>/<rank>" (a rank
# that never reached init_process_group); a program's own key often ends in "_<rank>"
# ("ready_2"). One key waited for names the rank that never set it. Other keys that end in
# a number are no rank's: torchelastic's per-agent and per-round keys ("/<n>", ".<n>")
_STORE_WAIT = re.compile(r"wait timeout after \d+ ?ms, keys: (?P<keys>\S+(?:, \S+)*)")
_KEY_RANK = re.compile(r"(?://(?:cpu|cuda)//\d+/|_)(?P<rank>\d{1,6})$")


def _store_key_names(now: list[dict], known: set, coll: dict) -> list[dict]:
    """A "named" event for the one rank that the store keys ranks timed out waiting for
    name, when every such wait is for a single key, all of them that rank's, and the rank
    did not time out waiting itself; none when any rank failed on its own."""
    named, waits = set(), []
    for e in now:
        text = e["text"] + " " + (e.get("msg") or "")
        m = _STORE_WAIT.search(text) if e["kind"] == "error" else None
        if m is None:
            if e["kind"] in ("error", "fatal") and not _is_collateral(text):
                return []       # some rank failed on its own, even one the lines do not name (sealed-e e10)
            continue
        keys = m.group("keys").split(", ")
        r = _KEY_RANK.search(keys[0]) if len(keys) == 1 else None
        if r is None:
            return []           # a wait for several keys, or one that names no rank: no telling
        named.add(int(r.group("rank")))
        waits.append((e, keys[0]))
    if len(named) != 1:
        return []
    rank = named.pop()
    waited = {e.get("grank") for e, _ in waits} | {r for r, e in coll.items() if e["collateral"] == "waited"}
    if rank in waited or (known and rank > max(known) + 1):
        return []
    e, key = waits[0]
    return [dict(e, kind="named", ranks=[rank], how="store key", key=key)]


def _named_suspects(now: list[dict], res: "_Resolver", job: dict) -> tuple[list[dict], dict]:
    """Step 1 of decide: ranks a line names (a monitored barrier, the collective-mismatch
    check's minority, NCCL RAS). Returns the suspects and rank -> the lines that name it."""
    suspects: list[dict] = []
    named: dict[int, list] = {}
    for e in now:
        if e["kind"] == "named":
            for r in e["ranks"]:
                named.setdefault(r, []).append(e)
    votes: dict[int, dict] = {}
    for e in now:
        if e["kind"] == "mismatch":
            for r, op in e["ops"].items():
                votes.setdefault(r, {}).setdefault(op, 0)
                votes[r][op] += 1
    if len(votes) >= 2:
        ops = {r: max(v, key=v.get) for r, v in votes.items()}
        counts: dict = {}
        for op in ops.values():
            counts[op] = counts.get(op, 0) + 1
        if len(counts) > 1:
            usual = max(counts, key=lambda o: (counts[o], o))
            if counts[usual] * 2 > len(ops) or len(ops) > 2:
                ev = [e for e in now if e["kind"] == "mismatch"]
                for r in sorted(ops):
                    if ops[r] != usual:
                        named.setdefault(r, []).extend(ev[:2])
            else:
                # two ranks, two calls: the check has no majority and cannot say which one
                # deviated. The launcher's Root Cause block (the rank it saw fail first) is
                # the one asymmetric word left; say that it is only that (sealed-e e07, e20)
                rc = job.get("launcher_root_cause")
                if rc and rc.get("rank") in ops and rc.get("attempt", 0) == now[0]["attempt"]:
                    job["mismatch_pair"] = [rc["rank"], next(o for o in ops if o != rc["rank"])]
    for r, evs in sorted(named.items()):
        how = evs[0].get("how", "collective-mismatch check")
        if how == "store key":
            waiters = sorted({x["grank"] for x in evs if x.get("grank") is not None})
            suspects.append(_suspect(r, "named", res, evs[:2],
                                     f"rank {r} never set the store key {evs[0]['key']} that "
                                     + (f"{_ranks_text(waiters)} timed out waiting for" if waiters else
                                        "the others timed out waiting for")
                                     + " (it never got there: stuck, slow or gone before it)"))
            continue
        suspects.append(_suspect(r, "named", res, evs[:2],
                                 f"rank {r} is named by {'a monitored barrier' if how == 'monitoredBarrier' else 'the collective-mismatch check'} "
                                 f"({evs[0]['text'][:160].strip()})"))
    if job.get("mismatch_pair") and job["mismatch_pair"][0] not in named:
        a, b = job["mismatch_pair"]
        rc = job["launcher_root_cause"]
        ev = [e for e in now if e["kind"] == "mismatch"][:2]
        named[a] = named[b] = ev
        # both of kind "launcher": suspects.py orders suspects by kind, then as listed here
        suspects.append(_suspect(a, "launcher", res, [dict(rc, grank=a)] + ev[:1],
                                 f"the collective-mismatch check shows ranks {min(a, b)} and {max(a, b)} "
                                 f"calling different collectives and cannot tell which one deviated; "
                                 f"torchrun's Root Cause block names rank {a} (exit code "
                                 f"{rc.get('exitcode')}), so rank {a} first, rank {b} as likely"))
        suspects.append(_suspect(b, "launcher", res, ev, f"rank {b} is the other side of the two-rank "
                                                         f"collective mismatch"))
    # 1b. NCCL RAS: ranks it cannot reach, and ranks whose operation count is behind the others'
    for e in now:
        if e["kind"] != "ras":
            continue
        r = e["ras_rank"]
        res.hosts.setdefault(r, e["node"])
        if e["section"] == "missing":
            named.setdefault(r, []).append(e)
            suspects.append(_suspect(r, "missing", res, [e], f"NCCL RAS has no data from rank {r} (process "
                                                             f"{e['pid']} on {e['node']}): it stopped responding"))
        elif len(e["counts"]) > 1:
            ops = sorted({op for _, op in e["counts"]})
            listed_op = min(e["counts"])[1]         # RAS lists the smaller group's ranks
            if listed_op == ops[0]:
                named.setdefault(r, []).append(e)
                suspects.append(_suspect(r, "behind", res, [e], f"NCCL RAS: rank {r} has launched up to operation "
                                                                f"{listed_op}, the others up to {ops[-1]}"))
            else:
                job["ras_ahead"] = sorted(set(job.get("ras_ahead", [])) | {r})
    if job.get("ras_ahead"):
        counts = next(e["counts"] for e in now if e["kind"] == "ras" and len(e["counts"]) > 1)
        top_op = max(op for _, op in counts)
        behind = sum(n for n, op in counts if op != top_op)
        job["ras_note"] = (f"NCCL RAS lists {_ranks_text(job['ras_ahead'])}, which are ahead; the "
                           f"{behind} ranks behind them are the ones to look at (RAS does not list them)")
    return suspects, named


def _own_suspects(own: dict, coll: dict, named: dict, res: "_Resolver") -> list[dict]:
    """Step 2 of decide: the ranks that failed on their own, earliest first, the first one
    with what the others then did."""
    suspects: list[dict] = []
    ordered = _by_time(list(own.values()))
    lead = ordered[0]
    tied = [e for e in ordered[1:] if _unordered(lead, e)]
    others = sorted(set(coll) - set(own))
    for e in ordered:
        r = e["grank"]
        if r in named:
            continue
        what = _short(e) if e["kind"] != "signal" else f"killed by {e['signal']} (exit code {e.get('exitcode')})"
        tail = ""
        if e is lead and others:
            verb = _collateral_verb(coll, others)
            tail = f"; {_ranks_text(others)} then {verb}"
        why = (f"rank {r} failed first, on its own ({what})" if e is lead and not tied else
               f"rank {r} failed on its own ({what})") + tail
        if e is not lead and not _unordered(lead, e):
            why += f", after rank {lead['grank']}"
        suspects.append(_suspect(r, "crashed", res, [e], why))
    return suspects


def _silent_suspects(coll: dict, exits: dict, known: set, waiting_ranks, agent: bool, res: "_Resolver",
                     job: dict, first: int) -> tuple[list[dict], set]:
    """Step 3 of decide, when no rank failed on its own (that the logs show) and no line
    names one: the rank that ended first while the others lost it, or the one that went
    silent while they waited for it. Returns the suspects and the ranks known (gaps filled)."""
    suspects: list[dict] = []
    waiting = {r for r, e in coll.items() if e["collateral"] == "waited"} | set(waiting_ranks)
    lost = {r for r, e in coll.items() if e["collateral"] == "peer"}
    mism = {r for r, e in coll.items() if e["collateral"] == "mismatch"}
    reporters = waiting | lost | mism
    ended_alone = {r for r, e in exits.items() if e.get("exitcode") not in (None, -15)}
    terminated = {r for r, e in exits.items() if e.get("exitcode") == -15}
    listed = set(exits)
    # ranks count from 0: a gap below the highest rank seen is a rank that printed nothing
    known = {r for r in known if r < MAX_RANK}
    if known:
        known |= set(range(max(known) + 1))
    silent = sorted(known - reporters)
    # a rank whose traceback ends in another call than all its peers' did not do what they
    # did: it called another collective, or the same one from another place (dev c23, b28)
    picks: list[tuple[int, str, str]] = _odd_calls(coll)
    if mism and not picks:
        picks = _size_mismatch(mism, coll, max(known) + 1, silent, terminated, listed, job)
    if not picks and lost:
        # a peer ended: one that exited on its own without reporting a peer (its own error
        # hidden: --local-ranks-filter, or printed as no traceback), else one that left
        # without any failure (exit 0: torchrun lists it nowhere)
        unlisted = [r for r in silent if r not in listed] if agent and listed else []
        left = [(r, "exited", f"rank {r} ended without an error of its own (the launcher lists no failure "
                              f"for it) while {_ranks_text(sorted(lost))} lost their connection to it")
                for r in unlisted]
        # one rank that the launcher lists nowhere (it exited 0) is the one that left; ranks
        # that exited non-zero without a visible report may only hide their lost-peer error,
        # but one the launcher saw fail in this attempt while it reported no lost peer comes
        # first (the unlisted one may only have been stopped: dev c24)
        crashed = [(r, "crashed", f"rank {r} exited with code {exits[r]['exitcode']} without reporting a lost "
                                  f"peer, while {_ranks_text(sorted(lost))} lost their connection to it")
                   for r in silent if r in ended_alone]
        picks = crashed if len(crashed) == 1 else left if len(left) == 1 else []
        if not picks:
            picks = crashed
        if not picks and len(reporters) * 2 >= len(known):
            picks = left
    if not picks and waiting:
        stuck = [r for r in silent if r in terminated or (r not in listed and agent)]
        # most ranks must report the wait (a lone waiting rank may be in a subgroup of its
        # own), or the launcher stopped exactly one rank that reported nothing
        # (half will do when one rank is left that the launcher had to stop, or in a 2-rank
        # job, where the one waiter can only have waited for the other: dev sealed-e-e22)
        if len(reporters) * 2 > len(known) or (len(stuck) == 1 and (stuck[0] in terminated or len(known) == 2)
                                               and len(reporters) * 2 >= len(known)):
            picks = [(r, "missing", f"rank {r} printed no timeout while {_ranks_text(sorted(waiting))} timed out "
                                    f"waiting in a collective"
                                    + (" (the launcher stopped it: exit code -15)" if r in terminated else ""))
                     for r in stuck]
    for r, kind, why in picks[:8]:
        ev = ([exits[r]] if r in exits else []) + [coll[o] for o in sorted(reporters) if o in coll][:2]
        if kind == "crashed" and r in coll:
            ev = [coll[r]]
        elif kind == "size-mismatch":
            ev = [coll[x] for x in sorted(mism)][:2]
        suspects.append(_suspect(r, kind, res, ev, why))
        if kind == "size-mismatch" and len(job["size_pair"]["receivers"]) == 1:
            suspects[-1]["undecided"] = True     # one of two: a dump may decide (suspects.find)
    rc = job["launcher_root_cause"]
    failed = sorted(r for r, e in exits.items() if e.get("exitcode") not in (None, 0, -15))
    if not picks and not reporters and len(failed) == 1 and not (rc and rc.get("attempt", 0) == first):
        # one rank the launcher saw fail in that attempt, its own lines hidden
        r = failed[0]
        suspects.append(_suspect(r, "crashed", res, [exits[r]],
                                 f"rank {r} is the one rank the launcher saw fail (exit code "
                                 f"{exits[r].get('exitcode')}); its own lines are not in these logs"))
        picks = [(r, "crashed", "")]
    if (not picks and rc and rc.get("rank") is not None and rc["rank"] not in reporters
            and rc.get("attempt", 0) == first):
        # the ranks' own lines are not in the inputs: the launcher's word is all there is
        suspects.append(_suspect(rc["rank"], "launcher", res, [dict(rc, grank=rc["rank"])],
                                 f"torchrun's Root Cause block names rank {rc['rank']} (exit code "
                                 f"{rc.get('exitcode')}); the rank's own lines are not in these logs"))
    return suspects, known


# Whom a rank receives from in Gloo's algorithms, for the collectives PyTorch's Gloo process
# group runs with them: all_reduce is a ring that receives from rank + 1 (gloo/allreduce.cc,
# ring(): recvRank = rank + 1), all_gather one that receives from rank - 1 (gloo/allgather.cc),
# broadcast a binomial tree where a rank receives from itself less its highest set bit, counted
# from the root (gloo/broadcast.cc). Checked on PyTorch 2.13 CPU: a rank given a bigger tensor
# makes that neighbour abort; a smaller one makes itself abort (tests/data/hang/size-pairs).
def _sent_from(receiver: int, op: str, world: int, root: int = 0) -> int | None:
    if world < 2 or not 0 <= receiver < world:
        return None
    if op == "all_reduce":
        return (receiver + 1) % world
    if op in ("all_gather", "all_gather_into_tensor"):
        return (receiver - 1) % world
    if op == "broadcast":
        v = (receiver - root) % world
        return None if v == 0 else ((v & ~(1 << (v.bit_length() - 1))) + root) % world
    return None


def _size_mismatch(mism: set, coll: dict, world: int, silent: list, terminated: set, listed: set,
                   job: dict) -> list[tuple[int, str, str]]:
    """Gloo's receiving side aborts when a peer sends more bytes than it expects (pair.cc's
    preamble check). Either the receiver's own tensor is the odd, smaller one (sealed-b b26) or
    the peer it receives from sent a bigger one (dev r22, c39): the logs cannot tell which, a
    flight-recorder dump can. Which peer that is follows from the collective the others were
    in (their tracebacks; none, as under DDP's gradient hooks: an all_reduce)."""
    receivers = [e["grank"] for e in _by_time([coll[x] for x in mism])]
    sites = [_call_site(e) for r, e in coll.items() if r not in mism]
    # the collective, from the others' tracebacks; one that ends in backward() is DDP's
    # gradient all_reduce. Without a traceback there is no telling which peer sent it
    ops = ["all_reduce" if s[0] == "backward" else s[0] for s in sites if s]
    op = max(set(ops), key=ops.count) if ops else None
    senders = {_sent_from(r, op, world) if op else None for r in receivers}
    if None not in senders and len(senders) == 1 and len(receivers) > 1:
        # several ranks got too much from one: that one is the odd rank (a broadcast's root or
        # a tree parent handing its bigger tensor on)
        s = senders.pop()
        job["size_pair"] = {"op": op, "sender": s, "receivers": receivers}
        return [(s, "size-mismatch", f"rank {s} sent {_ranks_text(receivers)} more data than they expected "
                                     f"in {op} ({_short(coll[receivers[0]])[:120]}): its tensor is bigger "
                                     f"than theirs")]
    d = receivers[0]
    s = _sent_from(d, op, world) if len(receivers) == 1 and op else None
    if s is None or s == d:
        odd = [r for r in silent if r in terminated or r not in listed]
        return [(r, "crashed", f"rank {r} failed first: it aborted on receiving data of another size than it "
                               f"expected ({_short(coll[r])[:120]}); either its own tensor is the odd one or "
                               + (f"rank {odd[0]}, which reported nothing, sent a bigger one"
                                  if len(odd) == 1 else "a peer sent a bigger one")
                               + " (the ranks' flight-recorder dumps would tell)")
                for r in receivers]
    job["size_pair"] = {"op": op, "sender": s, "receivers": [d]}
    # Either order is a guess at even odds; the receiver first, as torchrun's Root Cause block
    # names it, so that faildex is never wrong where the launcher is right
    return [(d, "size-mismatch", f"rank {d} aborted on receiving more data than it expected from rank {s} "
                                 f"({_short(coll[d])[:120]}; in Gloo's {op} rank {d} receives from rank {s}): "
                                 f"either rank {d}'s tensor is smaller than the others' or rank {s}'s is "
                                 f"bigger; the logs cannot tell which (the ranks' flight-recorder dumps would)"),
            (s, "size-mismatch", f"rank {s} sent rank {d} more data than it expected in {op}: its tensor "
                                 f"may be the bigger, odd one")]


def _collateral_verb(coll: dict, others: list) -> str:
    kinds = {coll[r]["collateral"] for r in others if r in coll}
    if kinds == {"waited"}:
        return "timed out waiting"
    if kinds == {"terminated"}:
        return "were stopped by the launcher"
    return "lost their connection to it" if "peer" in kinds else "failed waiting for it"


def _ts(f: dict):
    return f.get("ts", f.get("ts_inherited"))


def earlier(a: dict, b: dict) -> bool | None:
    """Did finding (or event) a happen before b? None when nothing can order them.

    Within one input the line order is the truth, unless both lines carry their own
    timestamps: a timestamp inherited from an earlier line must not move a later line
    ahead of an earlier one. Across inputs only timestamps order."""
    if a["order"] == b["order"]:
        if "ts" in a and "ts" in b and a["ts"] != b["ts"]:
            return a["ts"] < b["ts"]
        return a["line"] < b["line"]
    ta, tb = _ts(a), _ts(b)
    if ta is None or tb is None:
        return None
    if ta == tb:
        return a["order"] < b["order"]
    return ta < tb


def _cmp_time(a: dict, b: dict) -> int:
    e = earlier(a, b)
    if e is None:   # unordered: inputs with timestamps first, then input order
        return (_ts(a) is None) - (_ts(b) is None) or a["order"] - b["order"] or a["line"] - b["line"]
    return -1 if e else (1 if earlier(b, a) else 0)


TIME_KEY = cmp_to_key(_cmp_time)   # sorts findings and events by when they happened


def _by_time(evs: list[dict]) -> list[dict]:
    return sorted(evs, key=TIME_KEY)


def _unordered(a: dict, b: dict) -> bool:
    return earlier(a, b) is None


# where a traceback's path is library code, not the program's own (its call site is the
# program's last frame before them)
_LIBRARY = re.compile(r"[/\\](?:site-packages|dist-packages|lib[/\\]python\d[\d.]*)[/\\]|^<frozen ")


def _call_site(e: dict) -> tuple | None:
    """(the function the program called last, where it called it) from a traceback's frames:
    ("all_gather", "sync_grads (train.py:130)")."""
    frames = e.get("frames") or []
    user = max((i for i, f in enumerate(frames) if not _LIBRARY.search(f[0])), default=None)
    if user is None or user == len(frames) - 1:
        return None       # the program failed in its own code: no call into a library to compare
    file, line, func = frames[user]
    inner = frames[user + 1:]
    # the collective itself, under the c10d logger's wrapper
    op = next((f[2] for f in inner if f[0].endswith("distributed_c10d.py")), inner[0][2])
    base = file.replace("\\", "/").rsplit("/", 1)[-1]
    return op, f"{func} ({base}:{line})"


def _odd_calls(coll: dict[int, dict]) -> list[tuple[int, str, str]]:
    """Ranks whose collateral traceback ends in another call, or the same call made from
    another place, than the rest: the odd one out called what the others did not wait for.
    Needs 3 or more ranks with frames, most of them at one place, and at most a quarter
    (at least one) elsewhere: with fewer, nobody can tell which side is odd."""
    sites = {r: _call_site(e) for r, e in coll.items()}
    sites = {r: s for r, s in sites.items() if s is not None}
    if len(sites) < 3:
        return []
    groups: dict[tuple, list[int]] = {}
    for r in sorted(sites):
        groups.setdefault(sites[r], []).append(r)
    usual = max(groups, key=lambda k: (len(groups[k]), -groups[k][0]))
    odd = sorted(r for r in sites if sites[r] != usual)
    if not odd or len(groups[usual]) * 2 <= len(sites) or len(odd) > max(1, len(sites) // 4):
        return []
    op, where = usual
    out = []
    for r in odd:
        rop, rwhere = sites[r]
        what = (f"called {rop} from {rwhere}" if rop != op else f"called {rop} from another place, {rwhere}")
        out.append((r, "op-mismatch", f"rank {r} {what} where {_ranks_text(groups[usual])} called {op} from "
                                      f"{where} (their tracebacks): it ran another collective than its peers, "
                                      f"who then failed waiting for it"))
    return out


def _suspect(rank: int, kind: str, res: _Resolver, evs: list[dict], why: str) -> dict:
    s = {"rank": rank, "kind": kind, "why": why, "source": "job",
         "evidence": [{"source": e["source"], "line": e["line"], "text": e["text"][:500]} for e in evs if e][:4]}
    if evs and evs[0].get("attempt"):
        s["attempt"] = evs[0]["attempt"]
    host = res.hosts.get(rank)
    if host:
        s["host"] = host
    return s


def _rank_rows(events, known, attempt, res, own=None, coll=None, exits=None) -> list[dict]:
    """One row per rank of the initiating attempt: its first own error, what it reported
    of its peers, its exit."""
    own, coll, exits = own or {}, coll or {}, exits or {}
    rows = []
    for r in sorted(known)[:4096]:
        row = {"rank": r}
        if r in res.hosts:
            row["host"] = res.hosts[r]
        if r in own:
            e = own[r]
            row["state"] = "failed"
            row["error"] = _short(e) if e["kind"] != "signal" else f"killed by {e['signal']}"
            row["at"] = {"source": e["source"], "line": e["line"]}
        elif r in coll:
            e = coll[r]
            row["state"] = {"waited": "timed out", "peer": "lost a peer", "terminated": "stopped",
                            "mismatch": "got a wrong size"}[e["collateral"]]
            row["error"] = _short(e)
            row["at"] = {"source": e["source"], "line": e["line"]}
        else:
            row["state"] = "no error"
        if r in exits and exits[r].get("exitcode") is not None:
            row["exit"] = exits[r]["exitcode"]
            if exits[r].get("signal"):
                row["signal"] = exits[r]["signal"]
        rows.append(row)
    return rows


def job_exit(job: dict, rank: int):
    """The exit code the launcher reported for rank, if any (from the job's rank rows)."""
    return next((r.get("exit") for r in job.get("ranks", []) if r["rank"] == rank), None)


def _unseen(rank: int, own_logs: set) -> str:
    """Why a rank's own failure is not quoted: its log shows none, or its lines are not here."""
    return "no traceback in its own log" if rank in own_logs else "its own lines not in these logs"


def _verdict(suspects: list[dict], job: dict, coll: dict, own: dict, own_logs: set = frozenset()) -> str | None:
    """One sentence: who started it, and what the others did."""
    if not suspects:
        return None
    top = suspects[0]
    where = f" on {top['host']}" if top.get("host") else ""
    att = job.get("initiating_attempt", 0)
    attempt = f" in restart attempt {att}" if att else (" in the first attempt" if job["attempts"] > 1 else "")
    others = sorted(r for r in coll if r != top["rank"])
    if job.get("mismatch_pair") and top["kind"] == "launcher":
        a, b = job["mismatch_pair"]
        return (f"Ranks {a} and {b} called different collectives{attempt}; with two ranks the check "
                f"cannot tell which one deviated: torchrun saw rank {a} fail first, so start with "
                f"rank {a}, then rank {b}.")
    if job.get("undecided"):
        a, b = job["undecided"][:2]
        return (f"Ranks {a} and {b} both failed on their own{attempt} and the logs cannot order them "
                f"(no timestamps): start with rank {a}.")
    pair = job.get("size_pair")
    if pair and top["kind"] == "size-mismatch":
        got = pair["receivers"]
        if len(got) > 1:
            return (f"Rank {top['rank']}{where} called {pair['op']} with a bigger tensor than its peers{attempt}: "
                    f"{_ranks_text(got)}, which receive from it, aborted on getting more data than they expected.")
        return (f"Rank {got[0]}{where} aborted{attempt} on receiving more data than it expected from rank "
                f"{pair['sender']} in {pair['op']}: one of the two called it with another size or dtype "
                f"(rank {got[0]}'s tensor smaller, or rank {pair['sender']}'s bigger) and the logs cannot "
                f"tell which; check both calls.")
    if top["kind"] == "crashed":
        e = own.get(top["rank"]) or coll.get(top["rank"])
        code = job_exit(job, top["rank"])
        what = (_short(e) if e and e["kind"] != "signal" else
                f"killed by {e['signal']}" if e else
                f"exit code {code}, {_unseen(top['rank'], own_logs)}" if code is not None else "an error")
        # the same error raised by several ranks on their own (one bug in code every rank
        # runs): none of them is a victim of another, whichever printed first
        same = sorted(r for r, o in own.items() if e and _DIGITS.sub("N", _short(o)) == _DIGITS.sub("N", _short(e)))
        if len(same) > 1 and e["kind"] != "signal":
            s = f"{_ranks_text(same).capitalize()} each failed on their own{attempt} with the same error ({what})"
            rest = [r for r in others if r not in same]
            if rest:
                s += f"; {_ranks_text(rest)} then {_collateral_verb(coll, rest)}"
            return s + "."
        s = f"Rank {top['rank']}{where} failed first{attempt} ({what})"
        if others:
            s += f"; {_ranks_text(others)} then {_collateral_verb(coll, others)}"
    elif top["kind"] == "missing":
        s = (f"Rank {top['rank']}{where} stopped responding{attempt}: " +
             (f"{_ranks_text(others)} timed out waiting for it" if others else top["why"]))
    elif top["kind"] == "exited":
        s = f"Rank {top['rank']}{where} ended{attempt} without an error of its own: {_ranks_text(others)} then lost their connection to it"
    elif top["kind"] == "op-mismatch":
        how = top["why"].split(" (their tracebacks)")[0].replace(f"rank {top['rank']} ", "it ", 1)
        s = f"Rank {top['rank']}{where} ran another collective than its peers{attempt}: {how}; they then failed waiting for it"
    elif top["kind"] == "named" and top["why"].startswith(f"rank {top['rank']} never set the store key"):
        s = f"Rank {top['rank']}{where}{attempt}" + top["why"][len(f"rank {top['rank']}"):]
    elif top["kind"] == "named":
        s = f"Rank {top['rank']}{where} is the one the job's own check names{attempt}: {top['why']}"
    else:
        s = f"Rank {top['rank']}{where} is the rank the launcher names as the first failure{attempt}; its own lines are not in these logs"
    if job.get("launcher_names_victim"):
        s += f" (torchrun's Root Cause block names rank {job['launcher_root_cause']['rank']}, a victim)"
    later = job.get("later_attempts")
    if later:
        n = len(later["attempts"])
        s += (f"; {'the restart' if n == 1 else f'{n} restarts'} then failed too"
              + (f" ({later['errors'][0]})" if later["errors"] else ""))
    return s + "."


def _victims_only(coll: dict, own: dict, exits: dict, known: set, cut: dict) -> str | None:
    """When every line the logs hold is a report of a peer's failure: say so, and which ranks
    printed nothing (the one that started it is among them or its lines were cut)."""
    if not coll or own:
        return None
    kinds = {e["collateral"] for e in coll.values()}
    verb = ("timed out waiting for a peer" if kinds == {"waited"} else
            "were stopped by the launcher" if kinds == {"terminated"} else "lost a peer")
    s = (f"No rank's own failure is in these logs: {_ranks_text(coll)} {verb} "
         f"({_short(_by_time(list(coll.values()))[0])[:120]})")
    silent = sorted(set(known) - set(coll) - set(exits) - set(cut))
    if cut:
        s += f"; {_ranks_text(cut)} raised something the logs cut off before its message"
    if silent and len(silent) <= 8:
        s += f"; {_ranks_text(silent)} printed nothing here: the rank that started it is likely among them"
    return s + "."


MAX_ROWS = 24     # timeline rows shown; ranks in the same state are one row
_DIGITS = re.compile(r"\d+")


def timeline(job: dict, lead: int | None = None) -> list[dict]:
    """The per-rank timeline as the reader sees it, one row per run of ranks in the same
    state (same host, state, error shape and exit): a 512-rank job whose 509 waiting ranks
    printed the same timeout is one row. The rank that started it is its own row, first."""
    rows: list[dict] = []
    for r in job.get("ranks", []):
        key = (r.get("host"), r["state"], _DIGITS.sub("#", fold(r.get("error", "")))[:120], r.get("exit"), r.get("signal"))
        if r["rank"] == lead:
            rows.append({"key": None, "members": [r["rank"]], "count": 1, "row": r})
            continue
        last = next((g for g in reversed(rows) if g["key"] is not None), None)
        # next to the last row's ranks, the lead's own row left out
        adjacent = last is not None and (last["members"][-1] == r["rank"] - 1 or
                                         (lead is not None and last["members"][-1] == lead - 1 and r["rank"] == lead + 1))
        if last is not None and last["key"] == key and adjacent:
            last["members"].append(r["rank"])
            last["count"] += 1
            continue
        rows.append({"key": key, "members": [r["rank"]], "count": 1, "row": r})
    out = []
    for g in rows:
        r = g["row"]
        ranks = _ranks_text(g["members"]).split(" ", 1)[1]
        item = {"ranks": ranks, "count": g["count"], "state": r["state"]}
        for k in ("host", "error", "exit", "signal", "at"):
            if k in r:
                item[k] = r[k]
        if g["key"] is None:
            item["lead"] = True
        out.append(item)
    out.sort(key=lambda x: not x.get("lead"))
    if len(out) > MAX_ROWS:
        rest = out[MAX_ROWS - 1:]
        out = out[:MAX_ROWS - 1] + [{"ranks": "", "count": sum(x["count"] for x in rest),
                                     "state": f"{sum(x['count'] for x in rest)} more ranks in "
                                              f"{len(rest)} groups"}]
    return out
