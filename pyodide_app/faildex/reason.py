"""From findings to a diagnosis: which failure started it, and how sure we are.

build_report() runs four stages, each small enough to read and test alone:
  gather    findings of every input -> one Candidate per entry, facts, hosts, ranks
  score     one function per rule below; each adds a named part and a sentence
  rank      causes before downstream reports before wrappers; among close scores
            the earliest; a clean completion, or logs that go on error-free for
            WENT_ON_LINES, veto a possible cause built on supporting lines only
  assemble  the report's JSON shape (README: "JSON format")

The scoring rules are the registry RULES at the end of this module: each a Rule with a
name, its constants, a paragraph and one function; build_report runs them in order and
the README's table is made from them (rules_table). The ranking's own constants:
  UNORDERED         x0.80  another independent failure, and time cannot order the two
  DOWNSTREAM_ONLY   x0.66, at most 0.60: the best match is a downstream report
  NEAREST_MAX        0.25  no signature decided but the log shows an error: entries
                           whose messages resemble the log's error and finding lines,
                           as alternatives only (never primary)
  LOOKALIKE_MAX      0.15  a diagnosis was made: the look-alikes its discriminators name
                           that nothing ranked yet, nearest to the log's lines first,
                           fill the alternatives up to MAX_GUESSED (what to rule out next)
  SIMILARITY_FULL    0.60  the text similarity that earns a guess its whole cap
"""
from __future__ import annotations

import math
import re

from .context import HOW_TO_GET, SOFTWARE_FACT, SOFTWARE_NAME
from .lines import shape
from . import job as jobmodel
from .suspects import MISMATCH_KINDS, find as find_suspects, source_rank

REPORT_FORMAT = 1
MAX_EVIDENCE = 12
MAX_TIMELINE = 300

DEFINING = 0.90
SUPPORTING_BASE, SUPPORTING_STEP, SUPPORTING_MAX = 0.30, 0.10, 0.50
SHARED_LINE = -0.25
REFINES = 0.20
CORROBORATING, CORROBORATING_KINDS = 0.05, 2
VERSION_INSIDE, VERSION_OUTSIDE = 0.05, -0.35
AGREES, DISAGREES, POINTED_AT = 0.05, -0.25, 0.10
BASELINE_SEEN, BASELINE_NEW = -0.30, 0.05
UNORDERED = 0.80
OTHER_RANK = 0.50
JOB_HANG, JOB_HANG_ENTRY = 0.75, "collective-hang-one-rank-stuck"
JOB_MISMATCH_ENTRY = "collective-mismatch-desync"
HANG_KINDS = ("missing", "exited", "late", "behind")          # suspects.KINDS of a rank the others waited for
DOWNSTREAM_ONLY, DOWNSTREAM_CAP = 0.66, 0.60
CONTENDERS = 0.30          # causes within this of the best are ordered by time
NEAREST_MAX, NEAREST_MIN_SIMILARITY = 0.25, 0.08
LOOKALIKE_MAX, MAX_GUESSED = 0.15, 3
# how a look-alike's machine check stands (lookalikes): it points there, or the log lacks its fact
LOOKALIKE_WHY = {0: " that points to it", 1: " that this log lacks the line for"}
ENDS_IN_ERROR_LINES = 20   # an error line this close to the end of a log: it died there
WENT_ON_LINES = 10         # a log this much longer after warnings, error-free: they did not stop it
BANDS = ((0.80, "certain"), (0.50, "likely"), (0.0, "guess"))
CONFIDENCE_MIN, CONFIDENCE_MAX = 0.05, 0.99   # a shown confidence is never 0 or 1
SIMILARITY_FULL = 0.60     # a text similarity this high earns a guess its whole cap


def scaled_similarity(sim: float, cap: float) -> float:
    """A guess's confidence from text similarity: linear up to SIMILARITY_FULL, then cap."""
    return round(max(CONFIDENCE_MIN, min(cap, sim * cap / SIMILARITY_FULL)), 2)


def shown_confidence(score: float) -> float:
    return round(min(CONFIDENCE_MAX, max(CONFIDENCE_MIN, score)), 2)


def version_tuple(v: str) -> tuple:
    nums = re.findall(r"\d+", v.split("+")[0])
    return tuple(int(x) for x in nums[:4])


_UNITS = {"bytes": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}
_QUANTITY = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
_COMPARE = re.compile(r"^(\w+) (<=|>=|<|>) (?:([0-9.]+) \* )?(\w+)$")
_OP_WORDS = {"<": "below", "<=": "at most", ">": "above", ">=": "at least"}
_NOT_OP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def quantity(value) -> float | None:
    """'1.50 GiB' -> bytes; '600000' -> 600000.0; anything else -> None."""
    m = _QUANTITY.match(str(value))
    if not m:
        return None
    unit = m.group(2).lower()
    if unit and unit not in _UNITS:
        return None
    return float(m.group(1)) * _UNITS.get(unit, 1)


def compare(expr: str, facts: dict) -> bool | None:
    """Evaluate a `compare` / `when` expression over facts; None when a fact is missing."""
    m = _COMPARE.match(expr)
    if not m or m.group(1) not in facts or m.group(4) not in facts:
        return None
    left, right = quantity(facts[m.group(1)]), quantity(facts[m.group(4)])
    if left is None or right is None:
        return None
    right *= float(m.group(3) or 1)
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[m.group(2)]


def _compare_words(expr: str, facts: dict, holds: bool | None = True) -> str:
    """`reserved_unallocated > tried` as a sentence with the values from the log, saying
    what they are: "above" when it holds, "at most" when it does not."""
    m = _COMPARE.match(expr)
    if not m:
        return expr
    left, op, k, right = m.groups()
    if holds is False:
        op = _NOT_OP[op]
    rhs = f"{k} x {right.replace('_', ' ')}" if k else right.replace("_", " ")
    return (f"{left.replace('_', ' ')} ({facts.get(left, '?')}) is {_OP_WORDS[op]} {rhs} "
            f"({facts.get(right, '?')})")


# ---------------------------------------------------------------- time order
# (job.py holds the one definition: the job model orders its events the same way)
_TIME = jobmodel.TIME_KEY
earlier = jobmodel.earlier


def _loc(f: dict) -> str:
    parts = [f"{f['source']} line {f['line']}"]
    if "rank" in f:
        parts.append(f"rank {f['rank']}")
    if "host" in f:
        parts.append(f"host {f['host']}")
    return ", ".join(parts)


# ---------------------------------------------------------------- gather

class Candidate:
    """One entry with the findings that point at it and its score, part by part."""

    def __init__(self, eid: str, meta: dict):
        self.id = eid
        self.meta = meta
        self.defining: list[dict] = []
        self.supporting: list[dict] = []
        self.collateral: list[dict] = []
        self.context: list[dict] = []
        self.count = 0
        self.reports = 0            # distinct lines that report it (collateral counts)
        self.sig_ids: set = set()
        self.parts: list[tuple[str, float, str]] = []   # (rule, delta, sentence)
        self.factor = 1.0
        self.cap = None
        self.facts: dict = {}

    @property
    def score(self) -> float:
        s = sum(d for _, d, _ in self.parts) * self.factor
        return min(s, self.cap) if self.cap is not None else s

    def add(self, rule: str, delta: float, sentence: str) -> None:
        self.parts.append((rule, delta, sentence))

    def why(self) -> str:
        return " ".join(s if s.endswith(".") else s + "." for _, _, s in self.parts if s)

    @property
    def evidence(self) -> list[dict]:
        return self.defining or self.supporting

    @property
    def first(self) -> dict | None:
        ev = self.evidence
        return min(ev, key=_TIME) if ev else None

    @property
    def tier(self) -> int:
        """0 a cause, 1 a downstream report, 2 a wrapper ("a child failed")."""
        if self.meta.get("wrapper"):
            return 2
        return 1 if self.meta["downstream"] else 0


class Gathered:
    def __init__(self, index: dict, sources: list):
        entries, sigs = index["entries"], index["signatures"]
        self.facts: dict = {}
        self.hosts: set = set()
        self.ranks: set = set()
        for src in sources:
            for k, v in src.facts.items():
                self.facts.setdefault(k, v)
            self.hosts |= src.hosts
            self.ranks |= src.ranks
        self.cands: dict[str, Candidate] = {}
        self.line_owners: dict[tuple, set] = {}
        self.seen_facts: dict = {}       # every named group of every finding (first wins)
        for src in sources:
            for n, kept in src.findings.items():
                sig = sigs[n]
                c = self.cands.setdefault(sig["entry"], Candidate(sig["entry"], entries[sig["entry"]]))
                c.count += src.counts[n]
                for f in kept:
                    f = dict(f, entry=sig["entry"], signature=sig["id"], strength=sig["strength"])
                    getattr(c, sig["strength"]).append(f)
                    c.facts.update(f["facts"])
                    for k, v in f["facts"].items():
                        self.seen_facts.setdefault(k, v)
                    if sig["strength"] == "defining":
                        self.line_owners.setdefault((f["source"], f["line"]), set()).add(sig["entry"])
                if sig["strength"] in ("defining", "supporting"):
                    c.sig_ids.add(sig["id"])
        for c in self.cands.values():
            # a report is one line, however many of the entry's signatures it matched
            c.reports = len({(f["source"], f["line"]) for f in c.defining + c.supporting + c.collateral})

    def facts_for(self, c: Candidate) -> dict:
        """The facts a candidate's discriminators read: the log's, its own findings' over them."""
        return {**self.seen_facts, **self.facts, **c.facts}


# ---------------------------------------------------------------- score: one rule each

def rule_defining(c: Candidate, sc: "Scoring") -> None:
    if c.defining:
        c.add("DEFINING", DEFINING, f"A line that only this failure prints, at {_loc(c.first)}")
    elif c.supporting:
        kinds = len(c.sig_ids)
        c.add("SUPPORTING_BASE", min(SUPPORTING_MAX, SUPPORTING_BASE + SUPPORTING_STEP * (kinds - 1)),
              f"No line proves it, but {kinds} kind{'s' if kinds > 1 else ''} of line that often go "
              f"with it appear{'s' if kinds == 1 else ''}, first at {_loc(c.first)}")


def rule_shared_line(c: Candidate, sc: "Scoring") -> None:
    if not c.defining:
        return
    g = sc.g
    owners = set().union(*(g.line_owners.get((f["source"], f["line"]), set()) for f in c.defining))
    shared = max(len(g.line_owners.get((f["source"], f["line"]), ())) for f in c.defining)
    if shared > 1:
        c.add("SHARED_LINE", SHARED_LINE * (shared - 1),
              f"The same line also fits {shared - 1} other entr{'y' if shared == 2 else 'ies'}")
        general = sorted(o for o in owners if o in c.meta.get("refines", []))
        if general:
            c.add("REFINES", REFINES, f"This is the more specific case of {', '.join(general)}")


def rule_corroborating(c: Candidate, sc: "Scoring") -> None:
    if not c.defining:
        return
    defining_lines = {(f["source"], f["line"]) for f in c.defining}
    extra = {f["signature"] for f in c.supporting if (f["source"], f["line"]) not in defining_lines}
    if extra:
        c.add("CORROBORATING", CORROBORATING * min(len(extra), CORROBORATING_KINDS),
              f"Other lines in the log agree ({', '.join(sorted(extra))})")


def rule_versions(c: Candidate, sc: "Scoring") -> None:
    g, missing, notes = sc.g, sc.missing, sc.version_notes
    for a in c.meta.get("affects", []):
        if not a.get("introduced") and not a.get("fixed"):
            continue   # a note about versions, not a range
        fact = SOFTWARE_FACT.get(a["software"])
        name = SOFTWARE_NAME.get(a["software"], a["software"])
        rng = _range_text(a)
        if fact not in g.facts:
            missing.setdefault(fact, {
                "fact": fact,
                "why": f"{c.id} happens with {name} {rng}; the log does not say which {name} ran",
                "how": HOW_TO_GET.get(fact, "")})
            continue
        v = version_tuple(g.facts[fact])
        lo = version_tuple(a["introduced"]) if a.get("introduced") else None
        hi = version_tuple(a["fixed"]) if a.get("fixed") else None
        if (lo is None or v >= lo) and (hi is None or v < hi):
            note = f"Your {name} {g.facts[fact]} is in the affected range ({rng})"
            if a.get("fixed"):
                note += f"; {a['fixed']} fixes it"
            c.add("VERSION_INSIDE", VERSION_INSIDE, note)
        else:
            note = f"Your {name} {g.facts[fact]} is outside the affected range ({rng})"
            c.add("VERSION_OUTSIDE", VERSION_OUTSIDE, note)
        notes.append(f"{c.id}: {note}")


def check(d: dict, facts: dict) -> tuple[bool | None, tuple, str]:
    """A discriminator's machine check on this log's facts: (True when it fits the entry
    that holds it, False when it fits the other one, None when the log lacks a fact it
    reads or it has no check), the facts it read, and the check in words."""
    if d.get("compare"):
        holds = compare(d["compare"], facts)
        return (holds, tuple(sorted(set(re.findall(r"[a-z][a-z0-9_]*", d["compare"])))),
                _compare_words(d["compare"], facts, holds))
    if d.get("fact") and d["fact"] in facts:
        value = str(facts[d["fact"]])
        return bool(re.search(d["here_pattern"], value)), (d["fact"],), f"{d['fact'].replace('_', ' ')} is {value}"
    return None, (), ""


def rule_discriminators(c: Candidate, sc: "Scoring") -> None:
    """Each fact counts once, however many discriminators read it."""
    g, pointed = sc.g, sc.pointed
    all_facts = g.facts_for(c)
    decided: set = set()
    for d in c.meta.get("discriminators", []):
        verdict, facts_used, shown = check(d, all_facts)
        if verdict is None or facts_used in decided:
            continue
        decided.add(facts_used)
        signal = d["signal"][0].lower() + d["signal"][1:]
        if verdict:
            c.add("AGREES", AGREES, f"Checked {signal}: {shown}, as expected for this failure")
        else:
            c.add("DISAGREES", DISAGREES, f"Checked {signal}: {shown}, which rather fits "
                                          f"{d['elsewhere']} ({d['elsewhere_when']})")
            pointed[d["elsewhere"]] = pointed.get(d["elsewhere"], 0) + 1


def rule_baseline(c: Candidate, sc: "Scoring") -> None:
    baseline_shapes = sc.baseline_shapes
    if baseline_shapes is None or c.first is None:
        return
    if shape(c.first["text"]) in baseline_shapes:
        c.add("BASELINE_SEEN", BASELINE_SEEN, "The same line also appears in the good (baseline) run")
    else:
        c.add("BASELINE_NEW", BASELINE_NEW, "This line never appears in the good (baseline) run")


def rule_pointed_at(sc: "Scoring") -> None:
    for eid, n in sc.pointed.items():
        other = sc.g.cands.get(eid)
        if other is not None and other.evidence:
            other.add("POINTED_AT", POINTED_AT * n,
                      "A look-alike's check on the log's values points to this failure instead")


# ---------------------------------------------------------------- rank

def _went_on(c: Candidate, sources: list) -> bool:
    """Did every input that shows c's lines go on, error-free, for WENT_ON_LINES after them?
    (A library's warning that a failing run also raises: mmcv prints PyTorch's "size
    mismatch for" text after a non-strict load, and training starts.)"""
    last: dict[str, int] = {}
    for f in c.supporting + c.collateral:
        last[f["source"]] = max(last.get(f["source"], 0), f["line"])
    by_name = {s.name: s for s in sources}
    for name, line in last.items():
        s = by_name.get(name)
        if s is None or s.lines - line < WENT_ON_LINES or s.last_error_line > line:
            return False
    return bool(last)


def rank(scored: list[Candidate], facts: dict, missing: dict, sources: list, handled: bool = False):
    """(primary, alternatives, collateral, vetoed). Specific findings before wrappers,
    causes before downstream reports; among causes within CONTENDERS of the best, the
    earliest. A possible cause built on supporting lines only is set aside (vetoed) when the
    run reports a clean finish or every log goes on without error after those lines."""
    causes = [c for c in scored if c.defining and c.tier == 0]
    primary = None
    if causes:
        best = max(c.score for c in causes)
        contenders = sorted((c for c in causes if c.score >= best - CONTENDERS),
                            key=lambda c: (-c.score, c.id))
        primary = min(contenders, key=lambda c: _TIME(c.first))
        for c in causes:
            if c is not primary and earlier(c.first, primary.first) is None:
                primary.factor *= UNORDERED
                primary.add("", 0.0, f"{c.id} was also found, and time cannot tell which came first")
                break
        later = [c for c in causes if c is not primary and earlier(primary.first, c.first)]
        if later:
            primary.add("", 0.0, f"It is the earliest of {len(later) + 1} independent failures")
    elif scored:
        # No defining line of a cause. Specific before wrappers; a possible cause before
        # a downstream report; among equals, the earliest.
        best_tier = min(c.tier for c in scored)
        pool = [c for c in scored if c.tier == best_tier]
        best = max(c.score for c in pool)
        contenders = [c for c in pool if c.score >= best - 0.005]
        primary = min(sorted(contenders, key=lambda c: (-c.score, c.id)), key=lambda c: _TIME(c.first))
        if primary.tier > 0:
            primary.factor *= DOWNSTREAM_ONLY
            primary.cap = DOWNSTREAM_CAP
            primary.add("", 0.0, "This is a report of a failure elsewhere: the failure that caused it "
                                 "is not in these logs")
            missing.setdefault("initiating_log", {
                "fact": "initiating_log",
                "why": "the log shows the consequence, not the cause",
                "how": "add the log of the rank or node that failed first (its own stderr), "
                       "or rerun with torchrun --tee 3 --log-dir DIR to keep every rank's output"})
    vetoed, why_set_aside = None, ""
    # Only warnings are set aside: a downstream report (tier > 0, torchrun's "CHILD PROCESS
    # FAILED") says that something failed however long the log goes on after it.
    if primary is not None and not primary.defining and primary.tier == 0:
        if facts.get("run_completed"):
            why_set_aside = (f"The run reports a clean finish ({facts['run_completed']}), so these "
                             f"warnings did not stop it")
        elif _went_on(primary, sources):
            why_set_aside = (f"Each log goes on for {WENT_ON_LINES} lines or more after these lines "
                             f"without an error, so they did not stop the run")
    if primary is not None and handled and primary.tier == 0:
        # the job model read the ranks going on past every error while torchrun reported no
        # failed worker (job.decide): even a defining line was a handled error there
        why_set_aside = ("torchrun reports no failed worker and every error is in a rank's own log "
                         "that goes on after it: the ranks handled these errors")
    if why_set_aside:
        vetoed, primary = primary, None
        vetoed.add("", 0.0, why_set_aside)

    alternatives, collateral = [], []
    for c in sorted(scored, key=lambda c: (-c.score, c.id)):
        if c is primary or c is vetoed:   # the vetoed one leads the alternatives (build_report)
            continue
        if primary is not None and (c.tier > 0 or (not c.defining and primary.defining and primary.tier == 0)):
            collateral.append(c)
            continue
        if primary is not None and earlier(primary.first, c.first):
            c.add("", 0.0, f"Seen after {primary.id}: possibly a consequence")
        alternatives.append(c)
    return primary, alternatives, collateral, vetoed


def band(confidence: float) -> str:
    return next(name for floor, name in BANDS if confidence >= floor)


def next_action(c: Candidate, facts: dict) -> dict:
    """The first fix step whose condition holds; else the first step for a signature that
    matched (a family entry's group; a supporting line counts beside a defining one, as
    the linker's "cannot find -lcurand" says which part of a DeepSpeed op build failed);
    else the first unconditional step that is not an upgrade; an upgrade only when nothing
    else exists."""
    steps = c.meta.get("fix") or [c.meta["next_action"]]
    all_facts = {**facts, **c.facts}
    chosen = next((s for s in steps if s.get("when") and compare(s["when"], all_facts)), None)
    if chosen is None:
        matched = {f["signature"] for f in c.defining + c.supporting}
        chosen = next((s for s in steps if matched & set(s.get("for_signatures") or ())), None)
    if chosen is None:
        chosen = next((s for s in steps if not s.get("when") and not s.get("upgrade")), None)
    if chosen is None:
        chosen = next((s for s in steps if not s.get("when")), steps[0])
    out = {"do": chosen["do"], "command": chosen.get("command", ""), "why": chosen.get("why", ""),
           "entry": c.id}
    if chosen.get("when"):
        out["because"] = _compare_words(chosen["when"], all_facts)
    return out


# ---------------------------------------------------------------- nearest by text

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_CAMEL = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
_STOP = frozenset("the and for with this that from are was not has have you your use can".split())


# A stack frame names code, not the failure: C++ backtraces ("frame #3: c10::Error::Error(
# c10::SourceLocation, ...)", "Exception raised from X at file:N") and Python's "File ...,
# line N" would make every entry with a backtrace in its examples look alike.
_FRAME_LINE = re.compile(r'^(?:\[[^\]]{1,40}\]:?)?\s*(?:frame #\d+: |File "[^"]*", line \d+|Exception raised from \S+ at )')


def is_frame_line(line: str) -> bool:
    return bool(_FRAME_LINE.match(line))


def tokens(text: str) -> list[str]:
    """Lowercased words of a line, CamelCase words also split (OutOfMemoryError ->
    outofmemoryerror, out, of, memory, error)."""
    out = []
    for w in _WORD.findall(text):
        lw = w.lower()
        if lw not in _STOP:
            out.append(lw)
        parts = _CAMEL.findall(w)
        if len(parts) > 1:
            out.extend(p.lower() for p in parts if len(p) > 2 and p.lower() not in _STOP)
    return out


def nearest(lines: list[str], entries: dict, limit: int = 3, explained=()) -> list[tuple[float, str]]:
    """Entries whose messages, symptoms and examples resemble these lines: cosine of
    tf-idf vectors (the entries' weights are precomputed in the index). Words in
    `explained` (those of a diagnosis already made) are left out."""
    counts: dict[str, int] = {}
    for line in lines:
        if is_frame_line(line):
            continue
        for t in set(tokens(line)):
            if t not in explained:
                counts[t] = counts.get(t, 0) + 1
    if not counts:
        return []
    scored = []
    for eid, e in entries.items():
        vec = e.get("text_vector") or {}
        if not vec:
            continue
        dot = sum(w * (1 + math.log(counts[t])) for t, w in vec.items() if t in counts)
        if dot:
            norm = math.sqrt(sum((1 + math.log(n)) ** 2 for n in counts.values()))
            scored.append((dot / norm, eid))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return scored[:limit]


def _probe_lines(sources: list, g: Gathered) -> list[str]:
    """The lines a log is compared with entries' text by: its error lines and every
    line a signature matched (context and collateral ones too)."""
    probe = []
    for s in sources:
        probe += [x["text"] for x in (s.first_error, s.last_exception) if x]
        probe += getattr(s, "error_samples", [])
    for c in g.cands.values():
        probe += [f["text"] for f in c.defining + c.supporting + c.collateral + c.context]
    return probe


def lookalikes(primary: Candidate, probe: list[str], entries: dict, ranked: set, room: int,
               facts: dict) -> list[dict]:
    """The failures the primary's discriminators tell it apart from, that nothing ranked
    yet. One whose check this log answers in the primary's favour is ruled out. Those
    whose check points to them come first, then those whose check reads a fact the log
    does not show (the line that would tell them apart is missing), then the rest:
    nearest to the log's lines first, in the entry's own order among equals."""
    if room <= 0:
        return []
    when: dict[str, str] = {}
    status: dict[str, int] = {}          # -1 ruled out, else a LOOKALIKE_WHY key; absent: no check
    for d in primary.meta.get("discriminators", []):
        eid = d["elsewhere"]
        if eid in ranked or eid == primary.id or eid not in entries:
            continue
        when.setdefault(eid, d["elsewhere_when"])
        if d.get("fact") or d.get("compare"):
            verdict = check(d, facts)[0]
            status[eid] = min(status.get(eid, 2), {True: -1, False: 0, None: 1}[verdict])
    for eid in [eid for eid, st in status.items() if st < 0]:
        del when[eid]
    if not when:
        return []
    sim = {eid: s for s, eid in nearest(probe, {eid: entries[eid] for eid in when}, limit=len(when),
                                        explained=set(primary.meta.get("text_vector") or ()))}
    picked = sorted(when, key=lambda eid: (status.get(eid, 2), -sim.get(eid, 0.0)))[:room]   # stable
    return [_guess(entries[eid], eid, scaled_similarity(sim.get(eid, 0.0), LOOKALIKE_MAX),
                   f"Not ruled out: {primary.id} is told from this by one check"
                   f"{LOOKALIKE_WHY.get(status.get(eid), '')}; it is this failure when {when[eid].rstrip('.')}")
            for eid in picked]


def _guess(e: dict, eid: str, confidence: float, why: str) -> dict:
    return {"id": eid, "title": e["title"], "confidence": confidence, "band": "guess", "why": why,
            "url": e["url"], "severity": e["severity"], "first_seen": None, "count": 0, "reports": 0}


# ---------------------------------------------------------------- assemble

def _headline_follows_suspect(primary, top: dict | None, first: int, verdict: dict, sources: list,
                              alternatives: list, collateral: list):
    """The headline follows the suspect listed first (one story): a report of a failure
    elsewhere, while a rank failed on its own, moves to the collateral; one seen only in a
    later restart attempt moves to the alternatives. Returns (primary, the candidate moved
    aside as "only in a later attempt", or None); the lists are changed in place."""
    restart_only = None
    # ranks the job model read as having lost a peer (its connection closed or reset): what
    # they print is the consequence of the peer's end (a timeout or a mismatch check may be
    # the diagnosis itself)
    reporters = {row["rank"] for row in verdict["job"]["ranks"] if row.get("state") == "lost a peer"}
    own_line = top["evidence"][0] if top is not None and top.get("evidence") else {}

    def in_first(f) -> bool:
        """Is the finding from the attempt that failed first? A line after the initiating
        rank's own fatal error in that rank's own file is from a restart (per-rank files
        written across restarts carry no attempt: dev i25)."""
        if f["source"] == own_line.get("source") and f["line"] > own_line.get("line", f["line"]):
            return False
        return jobmodel.attempt_of(f, verdict["ends"], verdict["logdir"]) == first

    if (primary is not None and top is not None and top["kind"] in ("crashed", "named")
            # a wrapper's or downstream report, or, when a rank failed on its own, one that only
            # the ranks reporting its loss printed (dev i25: Gloo's connection errors of the ranks
            # that lost rank 2; a line naming the rank, as a monitored barrier's, stays evidence)
            and (primary.tier > 0 or (top["kind"] == "crashed" and set() < {
                finding_rank(f, sources) for f in primary.evidence if in_first(f)} <= reporters))
            # none of its lines is the initiating rank's in the attempt that failed first
            and not any(finding_rank(f, sources) == top["rank"] and in_first(f) for f in primary.evidence)
            and len(verdict["job"]["ranks"]) >= 2      # a multi-rank job: the others' reports are collateral
            and not any((f["source"], f["line"]) in verdict["launcher_lines"] for f in primary.evidence)
            and any(finding_rank(f, sources) is not None for f in primary.evidence)):
        # a report of a failure elsewhere, while the job model names the rank that failed on
        # its own (with an error no entry knows): the report is collateral, not the headline
        primary.add("", 0.0, f"A consequence of rank {top['rank']}'s own failure")
        collateral.insert(0, primary)
        primary = None
    elif (primary is not None and top is not None and top["kind"] in ("crashed", "named")
          and verdict["job"]["attempts"] > 1 and primary.evidence
          # ranks' own lines (the launcher's, such as "attempts left", speak for the whole job)
          and all(finding_rank(f, sources) is not None for f in primary.evidence)
          and all(jobmodel.attempt_of(f, verdict["ends"], verdict["logdir"]) > first for f in primary.evidence)):
        # a restarting job is read from the attempt that failed first: what a later attempt
        # failed with is what the restart did, not the headline (dev sealed-h-h18)
        later = min(jobmodel.attempt_of(f, verdict["ends"], verdict["logdir"]) for f in primary.evidence)
        primary.add("", 0.0, f"Only in restart attempt {later}, after rank {top['rank']} failed first"
                             + (f" in attempt {first}" if first else ""))
        alternatives.insert(0, primary)
        restart_only, primary = primary, None
    return primary, restart_only


def build_report(index: dict, sources: list, baseline: list | None = None, artifacts=None) -> dict:
    """The four stages of the module's docstring: gather, score (RULES), rank, assemble."""
    entries = index["entries"]
    g = Gathered(index, sources)
    baseline_shapes, new_events = _baseline_events(baseline, sources)
    verdict = job_verdict(index, sources, g)
    suspects = _suspects(g, verdict, sources, artifacts, index)
    # Supporting lines are abnormal (the validator keeps them out of healthy output), so
    # they can make a low-confidence diagnosis on their own; context lines cannot.
    sc = Scoring(g, [c for c in g.cands.values() if c.evidence], sources, entries, baseline_shapes, verdict,
                 suspects)
    for rule in RULES:
        rule.run(sc)
    verdict = sc.verdict
    primary, alternatives, collateral, vetoed = rank(sc.scored, g.facts, sc.missing, sources,
                                                     handled=verdict["job"].get("handled", False))
    # the suspect listed first heads the story: the headline, the verdict and the rank rows follow it
    top = suspects[0] if suspects else None
    first = verdict["job"].get("initiating_attempt", 0)
    primary, restart_only = _headline_follows_suspect(primary, top, first, verdict, sources, alternatives,
                                                      collateral)
    if primary is not None:
        # entries seen only through their collateral lines (what a failure prints elsewhere)
        for c in sorted(g.cands.values(), key=lambda c: c.id):
            if c is not primary and c.collateral and c not in collateral and c not in alternatives:
                collateral.append(c)
    _missing_discriminator_facts(primary, alternatives, g, sc.missing)
    alt_out = [_brief(c) for c in alternatives]
    if vetoed is not None:
        alt_out.insert(0, _brief(vetoed))
    anchor = primary or restart_only
    if anchor is not None and len(alt_out) < MAX_GUESSED:
        alt_out += lookalikes(anchor, _probe_lines(sources, g), entries, {a["id"] for a in alt_out},
                              MAX_GUESSED - len(alt_out), g.facts_for(anchor))
    unmatched = None
    if primary is None:
        unmatched, guesses = _unmatched(sources, g, entries, {a["id"] for a in alt_out})
        alt_out += guesses

    report = {
        "faildex_report": REPORT_FORMAT,
        "index": index.get("digest", ""),
        "inputs": [{"name": s.name, "bytes": s.bytes, "lines": s.lines, "candidates": s.candidates,
                    "error_lines": s.error_lines, "status": s.status, "messages": s.messages}
                   for s in sources],
        "primary": _brief(primary) if primary else None,
        "alternatives": alt_out,
        "collateral": [dict(_brief(c), ranks=sorted({f["rank"] for f in c.defining + c.supporting
                                                      + c.collateral if "rank" in f}))
                       for c in collateral],
        "evidence": _evidence(primary, alternatives, collateral, entries),
        "facts": dict(sorted(g.facts.items()), hosts=sorted(g.hosts)[:64], ranks=sorted(g.ranks)[:4096]),
        "missing": sorted(sc.missing.values(), key=lambda m: m["fact"]),
        "next_action": next_action(primary, g.facts) if primary else None,
        "versions": sorted(set(sc.version_notes)),
        "timeline": _timeline(g, primary, alternatives, collateral),
        "unmatched": unmatched,
    }
    if baseline is not None:
        report["baseline"] = {"inputs": [b.name for b in baseline],
                              "new_events": [{k: e[k] for k in ("source", "line", "text", "shape")}
                                             for e in new_events[:50]],
                              "new_event_count": len(new_events)}
    report["suspects"] = suspects
    if verdict["job"].get("outlived") and primary is None:
        # the job model read a job that went on past its errors: they are no failure to match
        report["unmatched"] = None
        report["alternatives"] = [a for a in report["alternatives"] if a["confidence"] > NEAREST_MAX]
    if report["unmatched"] and top and top["kind"] == "crashed" and top["evidence"] \
            and any(s.name == top["evidence"][0]["source"] for s in sources):
        # the error to start from is the initiating rank's, not the last rank's report of it
        first_line = top["evidence"][0]
        line = {"source": first_line["source"], "line": first_line["line"], "text": first_line["text"],
                "rank": top["rank"]}
        report["unmatched"]["first_error"] = report["unmatched"]["last_exception"] = line
    report["job"] = verdict["job"]
    report["job"]["timeline"] = jobmodel.timeline(report["job"], top["rank"]) if verdict["suspects"] else []
    report["verdict"] = _verdict(report, verdict)
    return report


def _baseline_events(baseline: list | None, sources: list) -> tuple[set | None, list[dict]]:
    """With --baseline: the good run's line shapes, and this run's lines of other shapes."""
    if baseline is None:
        return None, []
    shapes: set = set()
    for b in baseline:
        shapes |= set(b.shapes)
    new_events = [dict(where, shape=sh, order=src.order) for src in sources
                  for sh, where in src.shapes.items() if sh not in shapes]
    new_events.sort(key=lambda e: (e["order"], e["line"]))
    return shapes, new_events


def _suspects(g: Gathered, verdict: dict, sources: list, artifacts, index: dict) -> list[dict]:
    """Who started it: the job model's suspects, merged with what dumps and hang lines say."""
    nodes = {tuple(x) for x in verdict["job"]["node_tasks"]}
    for c in g.cands.values():
        for f in c.defining + c.supporting + c.collateral:
            if "task" in f and f.get("rank") == f["task"] and (f["order"], f["task"]) in nodes:
                del f["rank"]   # the task number of a node's agent, not the rank that printed the line
    suspects = find_suspects({"facts": g.facts}, sources, artifacts, index, verdict["suspects"],
                             received_more=verdict["job"].get("received_more", ()))
    if sources and not verdict["job"]["failed"] and not any(c.evidence for c in g.cands.values()):
        # the logs show a job that did not fail: dumps that differ only in how far each rank
        # had completed (written as each rank finished) name nobody
        suspects = [s for s in suspects if s["kind"] != "behind"]
    return suspects


def _missing_discriminator_facts(primary, alternatives: list, g: Gathered, missing: dict) -> None:
    """The facts that would tell the primary and its close alternatives from their look-alikes."""
    for c in ([primary] if primary else []) + alternatives[:2]:
        for d in c.meta.get("discriminators", []):
            if d.get("fact") and d["fact"] not in g.facts and d["fact"] not in c.facts:
                missing.setdefault(d["fact"], {
                    "fact": d["fact"],
                    "why": f"tells {c.id} from {d['elsewhere']}: {d['signal']}",
                    "how": HOW_TO_GET.get(d["fact"], "")})


def _brief(c: Candidate) -> dict:
    conf = shown_confidence(c.score)
    return {"id": c.id, "title": c.meta["title"], "confidence": conf, "band": band(conf),
            "why": c.why(), "url": c.meta["url"], "severity": c.meta["severity"],
            "first_seen": _public(c.first), "count": c.count, "reports": c.reports}


def _evidence(primary, alternatives: list, collateral: list, entries: dict) -> list[dict]:
    """The lines to quote: the primary's first three, the first line of up to three
    alternatives (a shared line once) and of up to five collateral entries."""
    if primary is None:
        return []
    evidence = [dict(_public(f), role="initiating") for f in sorted(primary.evidence, key=_TIME)[:3]]
    shown = {(e["source"], e["line"]) for e in evidence}
    for c in alternatives[:3]:
        if (c.first["source"], c.first["line"]) not in shown:   # a shared line is shown once
            evidence.append(dict(_public(c.first), role="alternative"))
            shown.add((c.first["source"], c.first["line"]))
    for c in collateral[:5]:
        f = c.first or min(c.collateral, key=_TIME)
        evidence.append(dict(_public(f), role="collateral"))
    return [dict(e, url=entries[e["entry"]]["url"]) for e in evidence[:MAX_EVIDENCE]]


def _timeline(g: Gathered, primary, alternatives: list, collateral: list) -> list[dict]:
    """Every finding's line with its role, in time order (those without a time last)."""
    timeline = []
    for c in g.cands.values():
        role = ("initiating" if c is primary else "collateral" if c in collateral
                else "alternative" if c in alternatives else "other")
        for f in c.defining + c.supporting + c.collateral:
            item = {"entry": c.id, "role": role, "source": f["source"], "line": f["line"]}
            for k in ("ts", "rank", "host"):
                if k in f:
                    item[k] = f[k]
            timeline.append(item)
    timeline.sort(key=lambda t: (t.get("ts") is None, t.get("ts") or 0, t["source"], t["line"], t["entry"]))
    return timeline[:MAX_TIMELINE]


def _unmatched(sources: list, g: Gathered, entries: dict, known: set) -> tuple[dict | None, list[dict]]:
    """No primary: when the logs show signs of a failure, their first error and last
    exception, and as guesses the entries not in known whose messages resemble them."""
    first_error = min((s.first_error for s in sources if s.first_error), key=_TIME, default=None)
    last_exc = max((s.last_exception for s in sources if s.last_exception), key=_TIME, default=None)
    # Signs of a failure: an exception, a line that is not mere context, or a log
    # that ends in error lines (healthy runs print error lines too, then go on)
    abnormal = any(c.evidence or c.collateral for c in g.cands.values())
    ends_in_error = any(s.last_error_line and s.lines - s.last_error_line < ENDS_IN_ERROR_LINES
                        for s in sources)
    if not (last_exc or abnormal or ends_in_error):
        return None, []
    near = nearest(_probe_lines(sources, g), entries)
    unmatched = {"first_error": _public(first_error) if first_error else None,
                 "last_exception": _public(last_exc) if last_exc else None,
                 "error_lines": sum(s.error_lines for s in sources),
                 "nearest": [{"id": eid, "title": entries[eid]["title"], "url": entries[eid]["url"],
                              "similarity": round(sim, 3)} for sim, eid in near]}
    guesses = [_guess(entries[eid], eid, scaled_similarity(sim, NEAREST_MAX),
                      f"No signature matched; the log's error lines resemble this entry's messages "
                      f"(text similarity {sim:.2f})")
               for sim, eid in near if sim >= NEAREST_MIN_SIMILARITY and eid not in known]
    return unmatched, guesses


def job_verdict(index: dict, sources: list, g: Gathered) -> dict:
    """The job model's answer (job.decide) for these inputs: who started it."""
    downstream = set()
    for c in g.cands.values():
        for f in c.collateral + (c.defining + c.supporting if c.tier > 0 else []):
            downstream.add((f["source"], f["line"]))
    ranks = {}
    for s in sources:
        r = source_rank(s, True) if len(sources) > 1 and not s.job.agent else None
        if r is not None:
            ranks[s.order] = r
    world = None
    ws = g.facts.get("world_size")
    if ws is not None and str(ws).isdigit():
        world = int(ws)
    # a cause's defining lines; when no cause has one, its supporting lines (what the
    # primary would be built on)
    causes = [dict(f, entry=c.id) for c in g.cands.values() if c.tier == 0 for f in c.defining]
    if not causes:
        causes = [dict(f, entry=c.id) for c in g.cands.values() if c.tier == 0 for f in c.supporting]
    waiting = {it["rank"] for s in sources for it in s.hang.items
               if it.get("rank_scope") == "global" and it["kind"] in ("watchdog", "gloo", "progress")}
    banner = any(s.launcher_banner for s in sources)
    return jobmodel.decide([s.job for s in sources], ranks, downstream, world, set(g.ranks), causes, waiting,
                           {s.order: s.lines for s in sources}, banner=banner)


def finding_rank(f: dict, sources: list):
    """The global rank a finding's line comes from: its prefix's, else its per-rank input's
    (one of several inputs, not a launcher's console); None when unknown. An `srun -l` task
    number is no rank here: it may be a node."""
    if "task" in f and f.get("rank") == f["task"]:
        return None
    if "rank" in f:
        return f["rank"]
    if len(sources) < 2:
        return None
    src = next((s for s in sources if s.name == f["source"]), None)
    return source_rank(src, True) if src is not None and not src.job.agent else None


def rule_job(sc: "Scoring") -> None:
    """OTHER_RANK and JOB_HANG: the job model's rank steers which cause heads the report;
    a silent rank the job model found adds the hang entry to the scored candidates."""
    hang = _steer_by_first_suspect(sc.scored, sc.g, sc.sources, sc.entries, sc.suspects)
    if hang is not None:
        sc.scored.append(hang)


def _steer_by_first_suspect(scored: list, g: Gathered, sources: list, entries: dict, suspects: list):
    if not suspects:
        return None
    top = suspects[0]        # the job model's, or what dumps and hang lines name more specifically
    r = top["rank"]
    if top["kind"] in ("crashed", "named"):
        for c in scored:
            ev = c.defining or c.supporting
            ranks = [finding_rank(f, sources) for f in ev]
            if c.tier == 0 and ev and None not in ranks and r not in ranks:
                c.factor *= OTHER_RANK
                c.add("OTHER_RANK", 0.0, f"Only seen on ranks other than rank {r}, which failed first")
        return None
    eid = JOB_HANG_ENTRY if top["kind"] in HANG_KINDS else JOB_MISMATCH_ENTRY if top["kind"] in MISMATCH_KINDS else None
    # a rank within a process group (old watchdog lines, no global rank) names no rank to look at
    if eid is None or eid not in entries or top.get("rank_scope") == "group":
        return None
    c = g.cands.get(eid) or Candidate(eid, entries[eid])
    ev = [e for e in top["evidence"] if e.get("line")]
    by_name = {s.name: s for s in sources}
    for e in ev:
        f = dict(e, order=by_name[e["source"]].order if e["source"] in by_name else 0, facts={},
                 entry=eid, signature="job-model", strength="defining", before=[], after=[])
        c.defining.append(f)
    if not c.defining:
        return None
    c.parts = [p for p in c.parts if p[0] not in ("DEFINING", "JOB_HANG")]
    what = {"missing": "stopped while the others waited for it", "exited": "left while the others waited for it",
            "late": "entered the collective long after the others", "behind": "fell behind the others"}
    c.add("JOB_HANG", JOB_HANG, f"Rank {r} {what.get(top['kind'], 'ran another collective than the others')} "
                                f"({top['why']})")
    c.count = max(c.count, len(ev))
    g.cands[eid] = c
    return c if c not in scored else None


def _verdict(report: dict, verdict: dict) -> str | None:
    """The report's first sentence: who started it (the job model), else what (the primary)."""
    top = report["suspects"][0] if report.get("suspects") else None
    decided = verdict["suspects"][0] if verdict["suspects"] else None
    # the job model saw no failure, but a signature named a cause (a line outside any rank's
    # events, e.g. sbatch refusing the job): "the job did not fail" would contradict it
    contradicted = verdict["job"].get("outlived") and report.get("primary") is not None
    if verdict.get("verdict") and not contradicted and ((top is not None and decided is not None and top["rank"] == decided["rank"])
                                   or (top is None and decided is None)):
        return verdict["verdict"]
    # dumps or the hang lines name a rank more specifically than the job model did: the
    # sentence follows the suspect listed first
    if top is not None:
        where = f" on {top['host']}" if top.get("host") else ""
        scope = " (within its process group)" if top.get("rank_scope") == "group" else ""
        return f"Rank {top['rank']}{scope}{where} is the first suspect: {top['why']}."
    return None


def _range_text(a: dict) -> str:
    if a.get("introduced") and a.get("fixed"):
        return f"{a['introduced']} up to before {a['fixed']}"
    if a.get("fixed"):
        return f"before {a['fixed']}"
    if a.get("introduced"):
        return f"{a['introduced']} and later"
    return "all versions"


def _public(f: dict | None) -> dict | None:
    if f is None:
        return None
    out = {k: f[k] for k in ("source", "line", "text", "before", "after", "rank", "local_rank", "host", "pid", "ts",
                             "entry", "signature", "strength", "facts") if k in f}
    return out


# ---------------------------------------------------------------- the registry

class Scoring:
    """What the rules read and write: the gathered findings, the candidates being scored,
    the facts found missing, the version notes, the look-alikes pointed at, the inputs, the
    index's entries, the baseline's line shapes and the job model's verdict."""

    def __init__(self, g: Gathered, scored: list, sources: list, entries: dict, baseline_shapes, verdict: dict,
                 suspects: list | None = None):
        self.g, self.scored, self.sources, self.entries = g, scored, sources, entries
        self.baseline_shapes, self.verdict = baseline_shapes, verdict
        # the suspects (suspects.find): the job model's, merged with what dumps and hang lines say
        self.suspects = suspects if suspects is not None else verdict["suspects"]
        self.missing: dict[str, dict] = {}
        self.version_notes: list[str] = []
        self.pointed: dict[str, int] = {}


class Rule:
    """One scoring rule: a name, the constants it adds or multiplies (name, value), one
    paragraph saying when it applies, and its function: per candidate (c, Scoring) or, with
    each=False, once over them all (Scoring). RULES runs in its order."""

    def __init__(self, name: str, constants: tuple, doc: str, fn, each: bool = True):
        self.name, self.constants, self.doc, self.fn, self.each = name, constants, doc, fn, each

    def run(self, sc: Scoring) -> None:
        if self.each:
            for c in list(sc.scored):
                self.fn(c, sc)
        else:
            self.fn(sc)


RULES = (
    Rule("defining", (("DEFINING", DEFINING), ("SUPPORTING_BASE", SUPPORTING_BASE),
                      ("SUPPORTING_STEP", SUPPORTING_STEP), ("SUPPORTING_MAX", SUPPORTING_MAX)),
         "A defining signature matched: the line alone identifies the failure. With only supporting "
         "lines, a base that grows with each further kind of supporting line, up to a cap; context "
         "lines add facts only.", rule_defining),
    Rule("shared-line", (("SHARED_LINE", SHARED_LINE), ("REFINES", REFINES)),
         "Per other entry whose defining signature matched the same line; an entry that is the "
         "special case (refines) of one sharing the line gets some back.", rule_shared_line),
    Rule("corroborating", (("CORROBORATING", CORROBORATING),),
         f"Per kind of supporting line on other lines than the defining one, at most "
         f"{CORROBORATING_KINDS} kinds.", rule_corroborating),
    Rule("versions", (("VERSION_INSIDE", VERSION_INSIDE), ("VERSION_OUTSIDE", VERSION_OUTSIDE)),
         "The version the log prints is inside, or outside, the entry's affected range; a missing "
         "version becomes a missing fact.", rule_versions),
    Rule("discriminators", (("AGREES", AGREES), ("DISAGREES", DISAGREES)),
         "A machine-checkable discriminator agrees with this entry, or points at a look-alike; once "
         "per fact, however many discriminators read it.", rule_discriminators),
    Rule("baseline", (("BASELINE_SEEN", BASELINE_SEEN), ("BASELINE_NEW", BASELINE_NEW)),
         "With --baseline: the first line also appears in the good run, or never does.", rule_baseline),
    Rule("pointed-at", (("POINTED_AT", POINTED_AT),),
         "Per look-alike whose discriminator pointed at this entry instead.", rule_pointed_at, each=False),
    Rule("job", (("OTHER_RANK", OTHER_RANK), ("JOB_HANG", JOB_HANG)),
         "The job model (job.py) names the rank that started it: a cause seen only on other ranks is "
         "multiplied down; a rank that went silent while the others waited or lost it brings the hang "
         "entry, on the others' lines.", rule_job, each=False),
)


def rules_table() -> str:
    """The README's table of scoring rules, made from RULES (tests/test_engine.py checks it)."""
    rows = ["| rule | constants | when |", "| --- | --- | --- |"]
    for r in RULES:
        consts = ", ".join(f"`{n}` {v:+.2f}" if n not in ("OTHER_RANK",) else f"`{n}` x{v:.2f}" for n, v in r.constants)
        rows.append(f"| {r.name} | {consts} | {r.doc} |")
    return "\n".join(rows)
