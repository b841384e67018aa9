"""Which rank, on which host, stopped the others: the report's `suspects`.

Three kinds of evidence, each optional:
  - plain logs: the watchdog and collective-timeout lines every waiting rank
    prints (HangLines collects them during the scan, bounded per input);
  - flight-recorder dumps, one per rank (frdump.py);
  - Python stack dumps of the hung ranks (stacks.py).
Each gives suspect dicts {rank, host?, kind, why, evidence: [{source, line, text}]};
kind is one of KINDS. A rank named by several kinds of evidence is one suspect
listed once, under its most specific kind, with every reason.
"""
from __future__ import annotations

import re

from . import frdump, ncclras, stacks

# In order of how specifically each kind names what the rank did wrong; a rank named by
# several kinds of evidence is listed once, under the first of its kinds here. A line that
# names the rank (a monitored barrier, the collective-mismatch check) comes first. A mismatch
# comes before a crash: with Gloo the rank that aborts ("Received data size doesn't match")
# is the one that received the odd rank's bigger tensor (tests/data/hang/dtype). Within a
# kind, the job model's order (earliest first) holds.
KINDS = ("named", "op-mismatch", "size-mismatch", "dtype-mismatch", "order-mismatch", "crashed", "late",
         "missing", "exited", "behind", "launcher")
MAX_LINES = 4096          # hang lines kept per input
MAX_SUSPECTS = 64
MISMATCH_KINDS = KINDS[1:5]
MAX_EVIDENCE = 6

# What the waiting ranks print, across PyTorch releases (ProcessGroupNCCL.cpp; Gloo's
# unbound_buffer.cc). The log prefix (ProcessGroupNCCL::createLogPrefix) was "[Rank R] ",
# "[PG N Rank R] ", "[PG N (desc) Rank R] " (2.4-2.5) and is "[PG ID N PG GUID G(desc) Rank R] ";
# R is the rank within that process group: the global rank is the "[rankN]:" prefix.
_PG = (r"(?:\[PG (?:ID )?(?P<pg>\d+)(?: PG GUID (?P<guid>[^\s\]]+)| \([^()\]]{1,80}\))? )?"
       r"\[?Rank (?P<rank>\d+)\] ")
# WorkNCCL::checkTimeout (operator<< of WorkNCCL)
_WATCHDOG = re.compile(_PG + r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), "
                       r"OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel_in>\d+), NumelOut=(?P<numel_out>\d+))?"
                       r"(?:, Timeout\(ms\)=(?P<timeout_ms>\d+))?")
# A rank's progress in its process group, every wording the watchdog has used:
#   ProcessGroupNCCL::workCleanupLoop / watchdogHandler (2.2-2.5):
#     "Timeout at NCCL work: S, last enqueued NCCL work: E, last completed NCCL work: C."
#   watchdogHandler (2.4-2.6): "Exception (either an error or timeout) detected by watchdog at
#     work: S, last enqueued NCCL work: E, last completed NCCL work: C." (and "NCCL error is
#     detected by watchdog at work: S, ...")
#   Watchdog::runLoop (2.7 on): " failure detected by watchdog at work sequence id: S PG status:
#     last enqueued work: E, last completed work: C"
_PROGRESS = re.compile(_PG + r".{0,200}?(?:at work|at NCCL work|work sequence id): (?P<seq>\d+)[,.]? "
                       r"(?:PG status: )?last enqueued (?:NCCL )?work: (?P<enqueued>-?\d+)"
                       r"(?:, last completed (?:NCCL )?work: (?P<completed>-?\d+))?")
#   HeartbeatMonitor::getNCCLWatchdogTimeoutErrorMsg (2.5 on), printed by every rank of the
#   group when one times out, the waiting ones and the one they wait for alike:
#     "Received a dump signal due to a collective timeout from {this local rank| rank R} and we
#     will try our best to dump the debug info. Last enqueued NCCL work: E, last completed NCCL work: C."
_DUMP_SIGNAL = re.compile(_PG + r"Received a dump signal due to a collective timeout from .{1,40}? and we will "
                          r"try our best to dump the debug info\. Last enqueued NCCL work: (?P<enqueued>-?\d+), "
                          r"last completed NCCL work: (?P<completed>-?\d+)")
# WorkNCCL::printTraceback (2.6 on), right after the "failure detected" line: the Python stack
# that created the failed collective, as the flight recorder captured it; the frames follow on
# lines of their own, "#0 all_reduce from .../distributed_c10d.py:2696" (FlightRecorder's
# Entry::getTraceback: '#' idx ' ' funcname " from " filename ':' lineno).
_STACK_HEAD = re.compile(r"Stack trace of the failed collective:\s*$")
_FRAME = re.compile(r"^#(?P<n>\d{1,4}) (?P<func>\S{1,300}) from (?P<file>\S{1,1000}):(?P<line>\d{1,9})\s*$")
MAX_FRAMES = 24           # frames kept of one stack
FRAME_BYTES = 2048        # a longer line is no frame (func and file as _FRAME bounds them)
_GLOO = re.compile(r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<op>send|recv) operation to complete")
# Gloo: a rank waiting in a collective whose peer has gone (exited after its own timeout)
_PEER_GONE = re.compile(r"(?:Connection closed by peer|Read error) \[[^\]]{1,80}\]:\d+")
_WORLD = re.compile(r"\bsize: (?P<size>\d+), global rank: (?P<rank>\d+)")
# a line holding none of these leaves HangLines as it was (add)
WORDS = ("Watchdog caught", "last enqueued", "Last enqueued", "Timed out waiting", "global rank:",
         "Connection closed by peer", "Read error [", "failed collective:")
# Lines above that no signature's anchor need catch: the scan adds these to its anchors
# (scan.Plan), so that HangLines sees them. Each is absent from entries/healthy/*.log.
SCAN_ANCHORS = ("failure detected by watchdog", "failed collective:")


class HangLines:
    """Per-input collector of the lines that say where a rank was stuck.

    The frames of a "Stack trace of the failed collective:" are the lines after it,
    which hold no anchor: the scan gives them one by one (add_frame) from the header
    on, across read chunks. A scan of a range that starts inside an input (lead=True)
    keeps the frame-shaped lines it starts with, for the stack whose header ended the
    range before (merge)."""

    def __init__(self, lead: bool = False):
        self.items: list[dict] = []
        self.dropped = 0
        self.world_size = None
        # the global rank of a line ("[rankN]:"; None when the line has none) -> the
        # process group of its latest progress line: a stack header names no group
        self._group: dict = {}
        self._orphans: list[tuple] = []     # (index, key) of stacks whose group was not seen yet
        self.lead = {"texts": [], "n": None} if lead else None
        self._stack = self.lead             # the stack waiting for its next frame

    def state(self) -> tuple:
        """What a line may have changed here (scan.REPEAT_NOTE)."""
        return (len(self.items) + self.dropped, self.world_size, len(self._group), len(self._orphans),
                self._stack is not None)

    def add(self, text: str, meta: dict, line_no: int, source: str) -> bool:
        """Keep a line that says where a rank was; True when it opens a stack whose
        frames are the next lines (the caller gives them to add_frame)."""
        if not any(k in text for k in WORDS):
            return False
        self._stack = None
        m = _WATCHDOG.search(text)
        kind = "watchdog"
        if not m:
            m, kind = _PROGRESS.search(text), "progress"
        if not m:
            m, kind = _DUMP_SIGNAL.search(text), "progress"
        if not m:
            m, kind = _STACK_HEAD.search(text), "stack"
        if not m:
            m, kind = _GLOO.search(text), "gloo"
        if not m:
            m, kind = _PEER_GONE.search(text), "peer-gone"
        if not m:
            w = _WORLD.search(text)
            if w:
                self.world_size = max(self.world_size or 0, int(w.group("size")))
            return False
        if len(self.items) >= MAX_LINES:
            self.dropped += 1
            return False
        item = {k: v for k, v in m.groupdict().items() if v is not None}
        item.update(kind=kind, source=source, line=line_no, text=text[:500])
        if "rank" in item:
            # "[Rank R]" is the rank in the process group; "[rankN]:" the global one. Old
            # logs have only the first (parse_prefix then reads it as a word of the line):
            # the rank is then marked as a group rank.
            item["group_rank"] = int(item["rank"])
            own = "rank" in meta and meta.get("rank_from") != "group" and not (
                meta.get("rank_from") == "word" and meta["rank"] == item["group_rank"])
            item["rank"] = meta["rank"] if own else item["group_rank"]
            item["rank_scope"] = "global" if own else "group"
        elif "rank" in meta and meta.get("rank_from") != "group":
            item["rank"] = meta["rank"]
            item["rank_scope"] = "global"
        if "host" in meta:
            item["host"] = meta["host"]
        key = meta.get("rank") if meta.get("rank_from") != "group" else None
        if kind == "progress":
            self._group[key] = {k: item[k] for k in ("pg", "guid") if k in item}
        elif kind == "stack":
            # the stack belongs to the failure the same rank reported just before it
            if key in self._group:
                item.update(self._group[key])
            else:
                self._orphans.append((len(self.items), key))
            item["frames"] = []
            self._stack = item
        self.items.append(item)
        return kind == "stack"

    def wants_following(self) -> bool:
        """Is a stack waiting for a frame on the next line?"""
        return self._stack is not None

    def stop_following(self) -> None:
        self._stack = None

    def add_frame(self, text: str) -> None:
        """The next line after a stack header or its last frame: "#k func from file:line"
        with k the next index is a frame; anything else ends the stack."""
        item = self._stack
        if item is None:
            return
        f = _FRAME.match(text.strip())
        if item is self.lead:
            # the numbers go on from wherever the previous range's stack stopped
            n = int(f.group("n")) if f else -1
            if not f or (item["n"] is not None and n != item["n"] + len(item["texts"])):
                self._stack = None
                return
            if item["n"] is None:
                item["n"] = n
            item["texts"].append(text)
            if len(item["texts"]) >= MAX_FRAMES:
                self._stack = None
            return
        k = len(item["frames"])
        if not f or int(f.group("n")) != k:
            self._stack = None
            return
        item["frames"].append({"func": f.group("func"), "file": f.group("file"), "line": int(f.group("line")),
                               "at": item["line"] + 1 + k, "text": text.strip()[:300]})
        if k + 1 >= MAX_FRAMES:
            self._stack = None

    def merge(self, other: "HangLines", shift: int) -> None:
        """Append the lines of the next range of the same input (parallel scan), as if one
        scan had read both: a stack cut by the range's end takes its frames from the
        start of the next, a stack whose rank's progress line was in an earlier range
        takes that line's process group."""
        room = max(MAX_LINES - len(self.items), 0)
        base = len(self.items)
        copies = []
        for i in other.items[:room]:
            c = dict(i, line=i["line"] + shift)
            if "frames" in i:
                c["frames"] = [dict(f, at=f["at"] + shift) for f in i["frames"]]
            copies.append(c)
        if self._stack is not None and self._stack is not self.lead:
            for text in (other.lead or {}).get("texts", []):
                self.add_frame(text)
            if other.lead is None or other._stack is not other.lead:
                self._stack = None      # the frames ended inside the other range
        elif self._stack is self.lead and other.lead is not None and other._stack is other.lead:
            # this whole range was frames, and so is the start of the next one
            for text in other.lead["texts"]:
                self.add_frame(text)
        for idx, key in other._orphans:
            if idx >= room:
                continue
            if key in self._group:
                copies[idx].update(self._group[key])
            else:
                self._orphans.append((base + idx, key))
        self._group.update(other._group)
        if other._stack is not None and other._stack is not other.lead:
            at = next((k for k, i in enumerate(other.items) if i is other._stack), room)
            self._stack = copies[at] if at < room else None
        self.items += copies
        self.dropped += other.dropped + max(len(other.items) - room, 0)
        if other.world_size:
            self.world_size = max(self.world_size or 0, other.world_size)


class Artifacts:
    """Dumps given next to the logs: flight-recorder dumps and stack dumps."""

    def __init__(self):
        self.fr: list[dict] = []
        self.stacks: list[dict] = []
        self.ras: list[dict] = []
        self.inputs: list[dict] = []

    def add(self, name: str, data: bytes) -> str:
        """Read one dump (kind from its content); raises frdump.DumpError with a one-line message."""
        if frdump.looks_like_dump(data[:8192]):
            d = frdump.load(name, data)
            self.fr.append(d)
            kind = f"flight-recorder dump ({d['form']}, rank {d['rank']}, {len(d['entries'])} entries)"
        elif ncclras.looks_like_ras(data[:8192]):
            d = ncclras.load(name, data)
            self.ras.append(d)
            kind = (f"NCCL RAS status (JSON{', NCCL ' + d['nccl_version'] if d['nccl_version'] else ''}, "
                    f"{len(d['comms'])} communicator{'s' if len(d['comms']) != 1 else ''})")
        elif stacks.looks_like_stacks(data[:8192]):
            # not listed in inputs: diagnose() and the browser read a stack dump as a log too
            d = stacks.load(name, data)
            self.stacks.append(d)
            return f"{d['form']} stack dump" + (f" (rank {d['rank']})" if d["rank"] is not None else
                                                " (no rank in the file name: not compared)")
        else:
            raise frdump.DumpError(f"{name}: neither a flight-recorder dump, an NCCL RAS JSON status nor a "
                                   f"py-spy/faulthandler stack dump")
        self.inputs.append({"name": name, "bytes": len(data), "lines": 0, "status": "ok",
                            "messages": [], "kind": kind})
        return kind


def is_artifact(head: bytes) -> str | None:
    """'fr' for a flight-recorder dump, 'ras' for an NCCL RAS JSON status, 'stacks' for a
    stack dump, None for a log."""
    if frdump.looks_like_dump(head):
        return "fr"
    if ncclras.looks_like_ras(head):
        return "ras"
    if stacks.looks_like_stacks(head):
        return "stacks"
    return None


def find(report: dict, sources: list, artifacts: Artifacts | None = None, index: dict | None = None,
         decided: list | None = None, received_more=()) -> list[dict]:
    """The suspects of a report: the job model's (decided, job.decide), then what the hang
    lines, flight-recorder and stack dumps add; one per rank, sorted, plain data."""
    found = from_logs(report, sources, index or {}, crashed=next(
        (s["rank"] for s in decided or [] if s["kind"] == "crashed"), None))
    if artifacts is not None:
        found += frdump.analyze(artifacts.fr, received_more)
        found += ncclras.analyze(artifacts.ras)
        found += stacks.analyze(artifacts.stacks)
    found = [dict(s, evidence=list(s["evidence"]), order=n) for n, s in enumerate(decided or [])] + found
    hosts = _hosts(sources)
    # One suspect per rank: the most specific kind names it, every reason is kept. A rank
    # within a process group is another rank than the global rank of the same number.
    merged: dict[tuple, dict] = {}
    for s in sorted(found, key=lambda s: KINDS.index(s["kind"])):
        key = (s.setdefault("rank_scope", "global"), s.get("pg"), s["rank"])
        m = merged.get(key)
        if m is None:
            merged[key] = dict(s, evidence=list(s["evidence"]))
            continue
        if s["why"] not in m["why"]:
            m["why"] += "; " + s["why"]
        if s.get("source") != "job" and s["kind"] in MISMATCH_KINDS and m.pop("undecided", None):
            m["kind"] = s["kind"]           # a dump's own mismatch decides the job model's pair
        m["evidence"] += [e for e in s["evidence"] if e not in m["evidence"]]
        if "host" in s and "host" not in m:
            m["host"] = s["host"]
    out = []
    for (scope, _, rank), s in merged.items():
        s["evidence"] = s["evidence"][:MAX_EVIDENCE]
        if "host" not in s and rank in hosts and scope == "global":
            s["host"] = hosts[rank]
        out.append(s)
    # one of the job model's undecided pair comes after every mismatch a dump decides
    out.sort(key=lambda s: (KINDS.index(s["kind"]) if "undecided" not in s else len(MISMATCH_KINDS) + 0.5,
                            s.get("order", MAX_SUSPECTS), s["rank_scope"] != "global", s["rank"], s.get("pg", "")))
    for s in out:
        s.pop("order", None)
        s.pop("undecided", None)
    return out[:MAX_SUSPECTS]


def _hosts(sources: list) -> dict[int, str]:
    """rank -> host, where a log line says both."""
    hosts: dict[int, str] = {}
    for src in sources:
        for item in getattr(src, "hang", HangLines()).items:
            if "host" in item and item.get("rank_scope") == "global":
                hosts.setdefault(item["rank"], item["host"])
    return hosts


def source_rank(src, one_of_several: bool = True) -> int | None:
    """The one rank an input belongs to: a single rank in its lines, else its file name
    when it is one of several inputs (one log per rank): the trailing number of a lone
    log's name ("learner-killed-137.log") is no rank."""
    if len(src.ranks) == 1:
        return next(iter(src.ranks))
    if not src.ranks and one_of_several:
        return frdump.rank_from_name(src.name.rsplit(".", 1)[0] if src.name.endswith(".gz") else src.name)
    return None


def from_logs(report: dict, sources: list, index: dict, crashed: int | None = None) -> list[dict]:
    """What the watchdog and collective-timeout lines say (crashed: the rank the job
    model found failing on its own, which the waiting ranks' lines do not name again)."""
    suspects: list[dict] = []

    items: list[dict] = []
    seen_ranks: set = set()
    world = None
    for src in sources:
        hang = getattr(src, "hang", None)
        if hang is None:
            continue
        own = source_rank(src, len(sources) > 1)
        seen_ranks |= set(src.ranks)
        if own is not None:
            seen_ranks.add(own)
        if hang.world_size:
            world = max(world or 0, hang.world_size)
        for it in hang.items:
            # a log of one rank (its lines or its file name say which) gives its lines
            # that global rank, over the rank within the group they print
            if own is not None and ("rank" not in it or it.get("rank_scope") == "group"):
                it = dict(it, rank=own, rank_scope="global")
            if "rank" in it:
                items.append(it)
    if not items:
        return suspects
    ws = report.get("facts", {}).get("world_size")
    if world is None and ws and str(ws).isdigit():
        world = int(ws)
    # Ranks within a process group ("[Rank R]" with no "[rankN]:" and no per-rank file)
    # are compared only with each other, and the suspects they name say so.
    suspects += _analyze([it for it in items if it.get("rank_scope") != "group"], world, seen_ranks, crashed)
    in_group = [it for it in items if it.get("rank_scope") == "group"]
    for s in _analyze(in_group, world, set(), None):
        pgs = {_pg(it) for it in in_group if it["rank"] == s["rank"]} - {""}
        s["rank_scope"] = "group"
        if len(pgs) == 1:
            s["pg"] = pgs.pop()
        s["why"] += "; rank numbers are within the process group (\"[Rank R]\"): the log names no global rank"
        suspects.append(s)
    return suspects


def _analyze(items: list[dict], world: int | None, seen_ranks: set, crashed: int | None) -> list[dict]:
    """The suspects that the hang lines of ranks in one numbering (global, or within groups) name."""
    suspects: list[dict] = []
    if not items:
        return suspects
    # The collective the ranks time out in, per process group.
    waiting: dict[int, dict] = {}     # rank -> first watchdog/gloo line
    for it in items:
        if it["kind"] in ("watchdog", "gloo"):
            waiting.setdefault(it["rank"], it)
    # ranks that were inside a collective when a peer went away were there too
    present = set(waiting) | {it["rank"] for it in items if it["kind"] == "peer-gone"}
    if waiting:
        reporters = sorted(present)
        if world:
            expected = set(range(world))
        else:
            # ranks count from 0: a gap below the highest reporter is a rank that did not report
            expected = set(range(max(reporters) + 1)) | seen_ranks
        # Only when most expected ranks report the wait: a single waiting rank may be
        # in a subgroup of its own (tests/data/hang/two-groups), and names nobody.
        if len(reporters) * 2 > len(expected):
            first = waiting[min(waiting)]
            what = (f"#{first['seq']} {first['op']}" if "seq" in first else
                    f"a {first['op']} that timed out after {first['timeout_ms']} ms")
            for r in sorted(expected - set(reporters)):
                if r == crashed:
                    continue
                suspects.append({
                    "rank": r, "kind": "missing",
                    "why": f"{_ranks(reporters)} report waiting in {what}"
                           + (" or losing a peer there" if present != set(waiting) else "")
                           + f"; rank {r} " + ("is in the world size " + str(world) if world
                                               else "is within the ranks seen")
                           + (" but reports neither" if present != set(waiting) else
                              " but reports no such timeout"),
                    "evidence": [_ev(waiting[o]) for o in sorted(waiting)[:2]]})
        # same sequence number, different operation or size
        by_seq: dict[tuple, dict[int, dict]] = {}
        for r, it in waiting.items():
            if "seq" in it:
                by_seq.setdefault((_pg(it), it["seq"]), {})[r] = it
        for (pg, seq), per in sorted(by_seq.items()):
            for kind, key in (("op-mismatch", "op"), ("size-mismatch", "numel_in"), ("size-mismatch", "numel_out")):
                values = {r: it.get(key) for r, it in per.items() if it.get(key) is not None}
                groups: dict = {}
                for r, v in sorted(values.items()):
                    groups.setdefault(v, []).append(r)
                if len(groups) < 2:
                    continue
                usual = max(groups, key=lambda v: (len(groups[v]), -groups[v][0]))
                for v, rs in groups.items():
                    if v == usual:
                        continue
                    for r in rs:
                        suspects.append({
                            "rank": r, "kind": kind,
                            "why": f"at SeqNum {seq}{' in PG ' + pg if pg else ''} rank {r} reports "
                                   f"{key}={v} where {_ranks(groups[usual])} report{'s' if len(groups[usual]) == 1 else ''} {usual}",
                            "evidence": [_ev(per[r]), _ev(per[groups[usual][0]])]})
                break
        # A rank whose watchdog fires on an earlier collective of the same process group
        # than the others': they completed that collective, which they could only do with
        # this rank's call at that place, yet this rank still waits in it. Its call there
        # was another collective or size than theirs (the ranks' collectives did not line
        # up; a rank merely late would have no timeout of its own below theirs).
        per_pg_seq: dict[str, dict[int, int]] = {}
        for r, it in waiting.items():
            if "seq" in it:
                per_pg_seq.setdefault(_pg(it), {})[r] = int(it["seq"])
        for pg, seqs in sorted(per_pg_seq.items()):
            if len(set(seqs.values())) < 2 or len(seqs) < 3:
                continue
            common = max(set(seqs.values()), key=lambda v: (list(seqs.values()).count(v), v))
            at = sorted(r for r, v in seqs.items() if v == common)
            if len(at) < 2:
                continue
            for r, v in sorted(seqs.items()):
                if v < common:
                    mine, theirs = waiting[r], waiting[at[0]]
                    suspects.append({
                        "rank": r, "kind": "order-mismatch",
                        "why": f"rank {r} times out in SeqNum {v}{' of PG ' + pg if pg else ''} "
                               f"({mine.get('op', '?')}, NumelIn={mine.get('numel_in', '?')}), which "
                               f"{_ranks(at)} completed: they time out later, in SeqNum {common} "
                               f"({theirs.get('op', '?')}, NumelIn={theirs.get('numel_in', '?')})",
                        "evidence": [_ev(mine), _ev(theirs)]})
    # the rank whose last completed work is lowest
    # per process group and rank: its first progress line with a completed count (for
    # `behind`) and its progress line that names the work it times out in, else its first
    per_pg: dict[str, dict[int, tuple]] = {}
    enq: dict[str, dict[int, dict]] = {}
    for it in (it for it in items if it["kind"] == "progress"):
        pg = _pg(it)
        if "completed" in it:
            per_pg.setdefault(pg, {}).setdefault(it["rank"], (int(it["completed"]), it))
        cur = enq.setdefault(pg, {}).get(it["rank"])
        if cur is None or (cur.get("seq") is None and it.get("seq") is not None):
            enq[pg][it["rank"]] = it
    # a rank whose last enqueued work is below the collective the others time out in
    # never entered it (ProcessGroupNCCL's progress lines print both numbers)
    for pg, ranks in sorted(enq.items()):
        stuck = [int(it["seq"]) for it in ranks.values() if it.get("seq") is not None]
        if len(ranks) < 2 or not stuck:
            continue
        target = max(set(stuck), key=lambda v: (stuck.count(v), v))
        at = [r for r, it in ranks.items() if it.get("seq") is not None and int(it["seq"]) == target]
        for r, it in sorted(ranks.items()):
            if int(it["enqueued"]) < target and r not in at:
                suspects.append({"rank": r, "kind": "missing",
                                 "why": f"{_ranks(sorted(at))} time out in #{target}"
                                        f"{' of PG ' + pg if pg else ''}; rank {r}'s last enqueued work "
                                        f"is #{it['enqueued']}: it never entered that collective",
                                 "evidence": [_ev(it), _ev(ranks[at[0]])]})
    for pg, ranks in sorted(per_pg.items()):
        values = {r: v[0] for r, v in ranks.items()}
        if len(ranks) < 2 or len(set(values.values())) < 2:
            continue
        low, high = min(values.values()), max(values.values())
        for r in sorted(ranks):
            if values[r] == low:
                suspects.append({"rank": r, "kind": "behind",
                                 "why": f"rank {r}'s last completed work{' in PG ' + pg if pg else ''} is "
                                        f"#{low}; other ranks completed up to #{high}",
                                 "evidence": [_ev(ranks[r][1])]})
    suspects += _from_stacks(items)
    return suspects


def _pg(it: dict) -> str:
    """The process group a line is about: its GUID where printed (PG IDs are per rank
    and repeat across subgroups: NVIDIA/nccl#1610 shows PG ID 11 as GUIDs 112 and 119)."""
    if "guid" in it:
        return it["guid"].split("(", 1)[0]
    return it.get("pg", "")


def _from_stacks(items: list[dict]) -> list[dict]:
    """Ranks whose failed collective (the watchdog's "Stack trace of the failed collective")
    is another collective, or was called from another place, than most ranks' in the same
    process group: `op-mismatch`, as stacks.py names a rank in another collective."""
    per_pg: dict[str, dict[int, dict]] = {}
    for it in items:
        if it["kind"] == "stack" and it.get("frames"):
            per_pg.setdefault(_pg(it), {}).setdefault(it["rank"], it)
    out = []
    for pg, per in sorted(per_pg.items()):
        if len(per) < 2:
            continue
        where = {r: _call(it["frames"]) for r, it in per.items()}
        groups: dict[tuple, list[int]] = {}
        for r in sorted(where):
            groups.setdefault(where[r], []).append(r)
        usual = max(groups, key=lambda k: (len(groups[k]), -groups[k][0]))
        if len(groups) < 2 or len(groups[usual]) * 2 <= len(per):
            continue          # no majority: the stacks alone cannot tell who is odd
        ref = per[groups[usual][0]]
        for key, rs in groups.items():
            if key == usual:
                continue
            for r in rs:
                out.append({"rank": r, "kind": "op-mismatch",
                            "why": f"rank {r}'s failed collective is {_show(key)} where {_ranks(groups[usual])} "
                                   f"failed in {_show(usual)}{' (PG ' + pg + ')' if pg else ''} "
                                   f"(stack trace of the failed collective)",
                            "evidence": [_frame_ev(per[r]), _frame_ev(ref)]})
    return out


def _call(frames: list[dict]) -> tuple:
    """(collective, first caller outside torch.distributed) of a failed collective's stack."""
    op = frames[0]["func"] if frames[0]["file"].endswith("distributed_c10d.py") else None
    for f in frames:
        path = f["file"].replace("\\", "/")
        if "/torch/distributed/" in path or (stacks._base(path), f["func"]) in stacks._PASS_THROUGH:
            continue
        return op, f"{f['func']} ({stacks._base(path)}:{f['line']})"
    return op, None


def _show(key: tuple) -> str:
    op, site = key
    return (op or "?") + (f" called from {site}" if site else "")


def _frame_ev(it: dict) -> dict:
    f = it["frames"][0]
    for g in it["frames"]:
        if "/torch/distributed/" not in g["file"].replace("\\", "/"):
            f = g
            break
    return {"source": it["source"], "line": f["at"], "text": f["text"]}


def _ev(it: dict) -> dict:
    return {"source": it["source"], "line": it["line"], "text": it["text"]}


def _ranks(ranks) -> str:
    ranks = list(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + _list(ranks)


def _list(ranks) -> str:
    return ",".join(map(str, ranks))
