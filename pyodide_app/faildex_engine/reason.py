"""From findings to a diagnosis: which failure started it, and how sure we are.

Confidence is built from a few explainable parts, each named in `why`:
  0.90  a defining signature matched (the line alone identifies the failure)
  0.30  only supporting signatures matched (+0.1 per further one, at most 0.5);
       context signatures (printed by healthy runs too) only add facts
 -0.25  for each other entry whose defining signature matched the same line
 +0.20  the entry refines another whose defining signature matched the same line
 +0.05  per supporting line kind on other lines than the defining one (at most 2)
 +0.05 / -0.35  the version in the log is inside / outside the affected range
 +0.05 / -0.25  a machine-checkable discriminator (a fact's pattern, or a comparison
               of two facts) agrees / points elsewhere (+0.10 for that entry)
 -0.30  with --baseline: the line also appears in the good run
 x0.8   another independent failure was found and time cannot order the two
 x0.66, at most 0.60, when the best match is a downstream report (the cause is not in
       the log); among downstream reports the strongest is named, then the earliest
"""
from __future__ import annotations

import re

from .context import HOW_TO_GET, SOFTWARE_FACT, SOFTWARE_NAME
from .lines import shape
from .suspects import find as find_suspects

REPORT_FORMAT = 1
MAX_EVIDENCE = 12
MAX_TIMELINE = 300


def version_tuple(v: str) -> tuple:
    nums = re.findall(r"\d+", v.split("+")[0])
    return tuple(int(x) for x in nums[:4])


_UNITS = {"bytes": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12}
_QUANTITY = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")
_COMPARE = re.compile(r"^(\w+) (<=|>=|<|>) (?:([0-9.]+) \* )?(\w+)$")


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
    """Evaluate a discriminator's `compare` over facts; None when a fact is missing."""
    m = _COMPARE.match(expr)
    if not m or m.group(1) not in facts or m.group(4) not in facts:
        return None
    left, right = quantity(facts[m.group(1)]), quantity(facts[m.group(4)])
    if left is None or right is None:
        return None
    right *= float(m.group(3) or 1)
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[m.group(2)]


def _order_key(f: dict) -> tuple:
    ts = f.get("ts", f.get("ts_inherited"))
    return (0 if ts is not None else 1, ts if ts is not None else 0.0, f["order"], f["line"])


def _comparable(a: dict, b: dict) -> bool:
    """Can time order these two findings? Same input, or both timestamped."""
    ta, tb = a.get("ts", a.get("ts_inherited")), b.get("ts", b.get("ts_inherited"))
    return a["order"] == b["order"] or (ta is not None and tb is not None)


def _loc(f: dict) -> str:
    parts = [f"{f['source']}:{f['line']}"]
    if "rank" in f:
        parts.append(f"rank {f['rank']}")
    if "host" in f:
        parts.append(f"host {f['host']}")
    return ", ".join(parts)


class Candidate:
    def __init__(self, eid: str, meta: dict):
        self.id = eid
        self.meta = meta
        self.defining: list[dict] = []
        self.supporting: list[dict] = []
        self.collateral: list[dict] = []
        self.context: list[dict] = []
        self.count = 0
        self.sig_ids: set = set()
        self.score = 0.0
        self.why: list[str] = []
        self.facts: dict = {}

    @property
    def evidence(self) -> list[dict]:
        return self.defining or self.supporting

    @property
    def first(self) -> dict | None:
        ev = self.evidence
        return min(ev, key=_order_key) if ev else None


def build_report(index: dict, sources: list, baseline: list | None = None, artifacts=None) -> dict:
    entries = index["entries"]
    sigs = index["signatures"]
    facts: dict = {}
    hosts: set = set()
    ranks: set = set()
    for src in sources:
        for k, v in src.facts.items():
            facts.setdefault(k, v)
        hosts |= src.hosts
        ranks |= src.ranks

    # ---- gather candidates
    cands: dict[str, Candidate] = {}
    line_owners: dict[tuple, set] = {}
    seen_facts: dict = {}       # every named group of every finding (first value wins)
    for src in sources:
        for n, kept in src.findings.items():
            sig = sigs[n]
            c = cands.setdefault(sig["entry"], Candidate(sig["entry"], entries[sig["entry"]]))
            c.count += src.counts[n]
            for f in kept:
                f = dict(f, entry=sig["entry"], signature=sig["id"], strength=sig["strength"])
                getattr(c, sig["strength"]).append(f)
                c.facts.update(f["facts"])
                for k, v in f["facts"].items():
                    seen_facts.setdefault(k, v)
                if sig["strength"] == "defining":
                    line_owners.setdefault((f["source"], f["line"]), set()).add(sig["entry"])
            if sig["strength"] in ("defining", "supporting"):
                c.sig_ids.add(sig["id"])

    baseline_shapes = None
    new_events: list[dict] = []
    if baseline is not None:
        baseline_shapes = set()
        for b in baseline:
            baseline_shapes |= set(b.shapes)
        for src in sources:
            for sh, where in src.shapes.items():
                if sh not in baseline_shapes:
                    new_events.append(dict(where, shape=sh, order=src.order))
        new_events.sort(key=lambda e: (e["order"], e["line"]))

    missing: dict[str, dict] = {}
    version_notes: list[str] = []
    pointed: dict[str, int] = {}   # entries that another candidate's discriminators point at

    # ---- score
    for c in cands.values():
        if c.defining:
            c.score = 0.90
            first = c.first
            c.why.append(f"defining line at {_loc(first)}")
            owners = set().union(*(line_owners.get((f["source"], f["line"]), set()) for f in c.defining))
            shared = max(len(line_owners.get((f["source"], f["line"]), ())) for f in c.defining)
            if shared > 1:
                c.score -= 0.25 * (shared - 1)
                c.why.append(f"the same line also defines {shared - 1} other entr"
                             f"{'y' if shared == 2 else 'ies'}")
                general = [o for o in owners if o in c.meta.get("refines", [])]
                if general:
                    c.score += 0.20
                    c.why.append(f"a special case of {', '.join(sorted(general))}")
            defining_lines = {(f["source"], f["line"]) for f in c.defining}
            extra = {f["signature"] for f in c.supporting
                     if (f["source"], f["line"]) not in defining_lines}
            if extra:
                c.score += 0.05 * min(len(extra), 2)
                c.why.append(f"{len(extra)} corroborating line kind(s)")
        elif c.supporting:
            c.score = min(0.5, 0.3 + 0.1 * (len(c.sig_ids) - 1))
            c.why.append(f"only supporting lines ({len(c.sig_ids)} kind(s)), first at {_loc(c.first)}")
        else:
            continue
        for a in c.meta.get("affects", []):
            if not a.get("introduced") and not a.get("fixed"):
                continue   # a note about versions, not a range
            fact = SOFTWARE_FACT.get(a["software"])
            name = SOFTWARE_NAME.get(a["software"], a["software"])
            rng = _range_text(a)
            if fact not in facts:
                missing.setdefault(fact, {
                    "fact": fact,
                    "why": f"{c.id} affects {name} {rng}; the log does not say which {name} ran",
                    "how": HOW_TO_GET.get(fact, "")})
                continue
            v = version_tuple(facts[fact])
            lo = version_tuple(a["introduced"]) if a.get("introduced") else None
            hi = version_tuple(a["fixed"]) if a.get("fixed") else None
            inside = (lo is None or v >= lo) and (hi is None or v < hi)
            if inside:
                c.score += 0.05
                note = f"your {name} {facts[fact]} is in the affected range ({rng})"
                if a.get("fixed"):
                    note += f"; fixed by {a['fixed']}"
            else:
                c.score -= 0.35
                note = f"your {name} {facts[fact]} is outside the affected range ({rng})"
            c.why.append(note)
            version_notes.append(f"{c.id}: {note}")
        all_facts = {**seen_facts, **facts, **c.facts}
        for d in c.meta.get("discriminators", []):
            if d.get("compare"):
                verdict = compare(d["compare"], all_facts)
                shown = d["compare"]
            elif d.get("fact") and d["fact"] in all_facts:
                value = str(all_facts[d["fact"]])
                verdict = bool(re.search(d["here_pattern"], value))
                shown = f"{d['fact']}={value}"
            else:
                continue
            if verdict is None:
                continue
            if verdict:
                c.score += 0.05
                c.why.append(f"{d['signal']}: {shown}, as expected here")
            else:
                c.score -= 0.25
                c.why.append(f"{d['signal']}: {shown} does not hold, which points at "
                             f"{d['elsewhere']} ({d['elsewhere_when']})")
                pointed[d["elsewhere"]] = pointed.get(d["elsewhere"], 0) + 1
        if baseline_shapes is not None and c.first is not None:
            if shape(c.first["text"]) in baseline_shapes:
                c.score -= 0.30
                c.why.append("the same line also appears in the good (baseline) run")
            else:
                c.score += 0.05
                c.why.append("this line never appears in the good (baseline) run")

    for eid, n in pointed.items():
        other = cands.get(eid)
        if other is not None and other.evidence:
            other.score += 0.10 * n
            other.why.append("a look-alike's discriminator points here")

    # Supporting lines are abnormal (the validator keeps them out of healthy output),
    # so they can make a low-confidence diagnosis on their own; context lines cannot.
    scored = [c for c in cands.values() if c.evidence]
    causes = [c for c in scored if c.defining and not c.meta["downstream"]]

    primary = None
    if causes:
        best = max(c.score for c in causes)
        contenders = [c for c in causes if c.score >= best - 0.3]
        primary = min(contenders, key=lambda c: (_order_key(c.first), -c.score, c.id))
        # Which rivals can time not order relative to the primary?
        for c in causes:
            if c is primary:
                continue
            if not _comparable(c.first, primary.first):
                primary.why.append(f"{c.id} was also found and time cannot order the two")
                primary.score *= 0.8
                break
        if len(causes) > 1:
            later = [c for c in causes if c is not primary and _comparable(c.first, primary.first)
                     and _order_key(c.first) > _order_key(primary.first)]
            if later:
                primary.why.append("earliest of %d independent failures" % (len(later) + 1))
    elif scored:
        # No defining line of a cause. A possible cause (supporting lines of an entry
        # that is not a downstream report) still beats a report whose cause is
        # missing; among equals, the earliest.
        possible = [c for c in scored if not c.meta["downstream"]]
        pool = possible or scored
        best = max(c.score for c in pool)
        contenders = [c for c in pool if c.score >= best - 0.005]
        primary = min(contenders, key=lambda c: (_order_key(c.first), -c.score, c.id))
        if primary.meta["downstream"]:
            primary.score = min(primary.score * 0.66, 0.60)
            primary.why.append("this is a downstream report: the failure that caused it is not in "
                               "these logs")
            missing.setdefault("initiating_log", {
                "fact": "initiating_log",
                "why": "the log shows the consequence, not the cause",
                "how": "add the log of the rank or node that failed first (its own stderr), "
                       "or rerun with torchrun --tee 3 --log-dir DIR to keep every rank's output"})

    alternatives, collateral = [], []
    if primary is not None:
        for c in sorted(scored, key=lambda c: (-c.score, c.id)):
            if c is primary:
                continue
            role_collateral = c.meta["downstream"] or (
                not c.defining and primary.defining and not primary.meta["downstream"])
            later = _comparable(c.first, primary.first) and _order_key(c.first) > _order_key(primary.first)
            if role_collateral:
                collateral.append(c)
            else:
                if later:
                    c.why.append(f"seen after {primary.id}: possibly a consequence")
                alternatives.append(c)
        # entries seen only through their collateral lines (what a failure prints elsewhere)
        for c in sorted(cands.values(), key=lambda c: c.id):
            if c is not primary and c.collateral and c not in collateral and c not in alternatives:
                collateral.append(c)

    # ---- missing discriminator facts for the primary and close alternatives
    for c in ([primary] if primary else []) + alternatives[:2]:
        for d in c.meta.get("discriminators", []):
            if d.get("fact") and d["fact"] not in facts and d["fact"] not in c.facts:
                missing.setdefault(d["fact"], {
                    "fact": d["fact"],
                    "why": f"separates {c.id} from {d['elsewhere']}: {d['signal']}",
                    "how": HOW_TO_GET.get(d["fact"], "")})

    def conf(c: Candidate) -> float:
        return round(min(0.99, max(0.05, c.score)), 2)

    def brief(c: Candidate) -> dict:
        return {"id": c.id, "title": c.meta["title"], "confidence": conf(c),
                "why": "; ".join(c.why), "url": c.meta["url"], "severity": c.meta["severity"],
                "first_seen": _public(c.first), "count": c.count}

    evidence = []
    if primary is not None:
        evidence += [dict(_public(f), role="initiating") for f in
                     sorted(primary.evidence, key=_order_key)[:3]]
        shown = {(e["source"], e["line"]) for e in evidence}
        for c in alternatives[:3]:
            if (c.first["source"], c.first["line"]) not in shown:   # a shared line is shown once
                evidence.append(dict(_public(c.first), role="alternative"))
                shown.add((c.first["source"], c.first["line"]))
        for c in collateral[:5]:
            f = c.first or min(c.collateral, key=_order_key)
            evidence.append(dict(_public(f), role="collateral"))
    evidence = [dict(e, url=entries[e["entry"]]["url"]) for e in evidence[:MAX_EVIDENCE]]

    timeline = []
    for c in cands.values():
        role = ("initiating" if c is primary else "collateral" if c in collateral
                else "alternative" if c in alternatives else "other")
        for f in c.defining + c.supporting + c.collateral:
            item = {"entry": c.id, "role": role, "source": f["source"], "line": f["line"]}
            for k in ("ts", "rank", "host"):
                if k in f:
                    item[k] = f[k]
            timeline.append(item)
    timeline.sort(key=lambda t: (t.get("ts") is None, t.get("ts") or 0, t["source"], t["line"], t["entry"]))
    timeline = timeline[:MAX_TIMELINE]

    unmatched = None
    if primary is None:
        first_error = min((s.first_error for s in sources if s.first_error), key=_order_key, default=None)
        last_exc = max((s.last_exception for s in sources if s.last_exception), key=_order_key, default=None)
        if first_error or last_exc:
            probe = " ".join(x["text"] for x in (first_error, last_exc) if x)
            unmatched = {"first_error": _public(first_error) if first_error else None,
                         "last_exception": _public(last_exc) if last_exc else None,
                         "error_lines": sum(s.error_lines for s in sources),
                         "nearest": _nearest(probe, entries)}

    report = {
        "faildex_report": REPORT_FORMAT,
        "index": index.get("digest", ""),
        "inputs": [{"name": s.name, "bytes": s.bytes, "lines": s.lines, "status": s.status,
                    "messages": s.messages} for s in sources],
        "primary": brief(primary) if primary else None,
        "alternatives": [brief(c) for c in alternatives],
        "collateral": [dict(brief(c), ranks=sorted({f["rank"] for f in c.defining + c.supporting
                                                     + c.collateral if "rank" in f}))
                       for c in collateral],
        "evidence": evidence,
        "facts": dict(sorted(facts.items()), hosts=sorted(hosts)[:64], ranks=sorted(ranks)[:4096]),
        "missing": sorted(missing.values(), key=lambda m: m["fact"]),
        "next_action": dict(primary.meta["next_action"], entry=primary.id) if primary else None,
        "versions": sorted(set(version_notes)),
        "timeline": timeline,
        "unmatched": unmatched,
    }
    if baseline is not None:
        report["baseline"] = {"inputs": [b.name for b in baseline],
                              "new_events": [{k: e[k] for k in ("source", "line", "text", "shape")}
                                             for e in new_events[:50]],
                              "new_event_count": len(new_events)}
    report["suspects"] = find_suspects(report, sources, artifacts, index)
    return report


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


def _nearest(text: str, entries: dict) -> list[dict]:
    words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z_]{3,}", text)}
    if not words:
        return []
    scored = []
    for eid, e in entries.items():
        kw = set(e.get("keywords", []))
        inter = len(words & kw)
        if inter:
            scored.append((inter / (len(words | kw) ** 0.5), eid))
    scored.sort(key=lambda x: (-x[0], x[1]))
    return [{"id": eid, "title": entries[eid]["title"], "url": entries[eid]["url"],
             "similarity": round(s, 3)} for s, eid in scored[:3]]
