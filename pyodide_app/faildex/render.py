"""Renderings of a report: text (terminal), JSON (stable), Markdown (a support ticket).

`redact()` replaces host names, IP addresses, user names in paths, e-mail
addresses and tokens with stable placeholders (the same value always gets the
same placeholder), so a ticket can go into a public issue.
"""
from __future__ import annotations

import json
import re
import time

from .context import VERSION_FACTS, VERSION_LABELS

SITE = "https://faildex.dev/"   # mkdocs.yml site_url: where entry links in reports point


def to_json(report: dict) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the view

def _at(f: dict) -> str:
    """Where a line is: "file:line", or a dump's "file record N"."""
    return f"{f['source']} record {f['record']}" if "record" in f else f"{f['source']}:{f['line']}"


def where(f: dict) -> str:
    """Where a finding is, with its origin: "rank 2 · host node-b · train.log:12"."""
    bits = ([f"rank {f['rank']}"] if f.get("rank") is not None else []) + (
        [f"host {f['host']}"] if f.get("host") else [])
    return " · ".join(bits + [_at(f)])


def rank_text(nums, max_parts: int = 12) -> str:
    """Ranks as ranges ("0-5, 7, 9-511"): complete, or the first ranges and "and N more"."""
    nums = sorted(set(nums))
    parts: list[tuple[str, int]] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append((str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}", j - i + 1))
        i = j + 1
    text = ", ".join(t for t, _ in parts[:max_parts])
    rest = sum(n for _, n in parts[max_parts:])
    return text + (f" and {rest} more" if rest else "")


def _fact_text(key: str, value) -> str:
    if not isinstance(value, list):
        return str(value)
    if key == "ranks":
        return f"{len(value)} rank{'s' if len(value) != 1 else ''}: {rank_text(value)}"
    return ", ".join(map(str, value[:12])) + (f" and {len(value) - 12} more" if len(value) > 12 else "")


MAX_LANES = 8     # lanes of the browser's timeline; more fold into one lane per host


def _natural(name: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", name)]


def _lanes(items: list[dict], one_input: bool, by_time: bool) -> list[dict]:
    """The timeline's lanes: one per rank (else per input), earliest first; past MAX_LANES,
    lanes without a cause or a candidate fold into one per host."""
    lanes: dict[str, dict] = {}
    for t in items:
        key = f"rank {t['rank']}" if t.get("rank") is not None else "the log" if one_input else t["source"]
        lanes.setdefault(key, {"name": key, "rank": t.get("rank"), "items": []})["items"].append(t)
    ordered = sorted(lanes.values(), key=lambda l: (min(t["time"] for t in l["items"]) if by_time else 0,
                                                      _natural(l["name"])))
    if len(ordered) <= MAX_LANES:
        return ordered
    odd = [l for l in ordered if any(t["role"] in ("initiating", "alternative") for t in l["items"])]
    groups: dict[str, list[dict]] = {}
    for l in ordered:
        if l not in odd:
            groups.setdefault(next((t["host"] for t in l["items"] if t.get("host")), ""), []).append(l)
    folded = []
    for host, ls in groups.items():
        ranks = [l["rank"] for l in ls if l["rank"] is not None]
        who = f"ranks {rank_text(ranks, 3)}" if len(ranks) == len(ls) else _plural(len(ls), "input")
        folded.append({"name": f"{host + ' · ' if host else ''}{_plural(len(ls), 'rank')} ({who})",
                       "folded": len(ls), "items": [t for l in ls for t in l["items"]]})
    return odd + folded


def _plural(n: int, one: str) -> str:
    return f"{n} {one}{'' if n == 1 else 's'}"


def clock(t: float) -> str:
    """HH:MM:SS (UTC) of a Unix time."""
    return time.strftime("%H:%M:%S", time.gmtime(t))


def view(report: dict, site: str = SITE) -> dict:
    """What a rendering shows, decided once (plain data): the text report, the Markdown
    ticket, the fleet's page of a job and the browser (diagnose.js, through browser.py)
    render this, not the report. A new report field is shown by adding it here and to the
    renderings that want it."""
    facts = report["facts"]
    p = report["primary"]
    u = report.get("unmatched")
    job = report.get("job") or {}
    rows = job.get("timeline") or []
    v: dict = {
        "notes": [f"{i['name']}: {'; '.join(i['messages'])}" for i in report["inputs"]
                  if i["status"] != "ok" or i["messages"]],
        "verdict": report.get("verdict"),
        # one row per run of ranks in the same state, only when there are several
        "ranks": [dict(r, line=timeline_line(r)) for r in rows] if len(rows) > 1 else [],
        "suspects": [{"rank": s["rank"], "scope": _scope(s), "rank_scope": s.get("rank_scope", "global"),
                      "host": s.get("host", ""), "kind": s["kind"],
                      "why": s["why"],
                      "who": f"rank {s['rank']}" + _scope(s) + (f" on {s['host']}" if s.get("host") else ""),
                      "evidence": [{"at": _at(e), "text": e["text"]} for e in s["evidence"][:3]]}
                     for s in report.get("suspects") or []],
        "primary": p and dict(p, link=f"{site}{p['url']}"),
        "band": p["band"] if p else "none" if u else "clean",
        "one_input": len(report["inputs"]) <= 1,
        "first_seen": None,
        "unmatched": u and {k: u.get(k) and {"at": _at(u[k]), "where": where(u[k]), "text": u[k]["text"]}
                            for k in ("first_error", "last_exception")} | {
                            "nearest": [{"id": n["id"], "title": n["title"], "url": n["url"]}
                                        for n in u.get("nearest", [])],
                            "error_lines": u.get("error_lines") or 0},
        "next": report["next_action"] and dict(report["next_action"],
                                               command_lines=(report["next_action"].get("command") or "").splitlines()),
        "evidence": [dict(e, at=_at(e), where=where(e), extra="".join(f" {k} {e[k]}" for k in ("rank", "host") if k in e))
                     for e in report["evidence"]],

        "alternatives": report["alternatives"][:5],
        "collateral": [dict(c, ranks_text=rank_text(c.get("ranks") or []),
                            files=len({t["source"] for t in report.get("timeline") or [] if t["entry"] == c["id"]}))
                       for c in report["collateral"]],
        "facts": [{"key": k, "label": fact_label(k), "value": val} for k, val in facts.items()
                  if val and k not in ("hosts", "ranks")],
        # every fact as the browser lists it, hosts and ranks included
        "fact_rows": [{"key": k, "label": fact_label(k), "text": _fact_text(k, val)} for k, val in facts.items()
                      if val],
        "hosts": list(facts.get("hosts") or []),
        "ranks_seen": rank_text(facts.get("ranks") or []),
        "environment": [(fact_label(k), facts[k]) for k in VERSION_FACTS if facts.get(k)],
        "launch": " ".join(f"{k}={facts[k]}" for k in LAUNCH_FACTS if facts.get(k)),
        "launch_command": facts.get("launch_command") or "",
        "missing": [dict(m, label=fact_label(m["fact"])) for m in report["missing"]],
        "baseline": report.get("baseline"),
    }
    # the findings in time (or by line within each input, when not every one has a time): the
    # browser draws them as lanes; one input whose rank rows say who did what draws none (its
    # lanes would set "the log" beside "rank 0")
    items = [dict(t, where=where(t), time=t.get("ts", t.get("ts_inherited"))) for t in report.get("timeline") or []]
    by_time = bool(items) and all(isinstance(t["time"], (int, float)) for t in items)
    v["timeline"] = None
    if items and not (v["one_input"] and len(rows) > 1):
        cause = next((t for t in items if t["role"] == "initiating"), None)
        n = sum(t["role"] == "collateral" for t in items)
        v["timeline"] = {
            "by_time": by_time, "lanes": _lanes(items, v["one_input"], by_time),
            "start": min(t["time"] for t in items) if by_time else None,
            "end": max(t["time"] for t in items) if by_time else None,
            "roles": sorted({t["role"] for t in items}),
            "story": cause and by_time and (f"The first failure is at {clock(cause['time'])} UTC ({cause['where']}); "
                                            f"{_plural(n, 'consequence')} follow."),
        }
    if p and p.get("first_seen"):
        fs = p["first_seen"]
        v["first_seen"] = {"at": f"{fs['source']}:{fs['line']}", "rank": fs.get("rank"), "host": fs.get("host"),
                           "where": where(fs)}
    # the ticket's error block: the first evidence line, else the unmatched log's lines
    first = (report["evidence"][0] if report["evidence"] else (u or {}).get("last_exception")
             or (u or {}).get("first_error"))
    v["error_text"] = first["text"] if first else None
    return v


# ---------------------------------------------------------------- text

def to_text(report: dict, color: bool = False, site: str = SITE) -> str:
    def c(code: str, s: str) -> str:
        return f"\x1b[{code}m{s}\x1b[0m" if color else s

    v = view(report, site)
    out: list[str] = [c("33", f"note: {n}") for n in v["notes"]]
    if v["verdict"]:
        out += [c("1;35", v["verdict"]), ""]
    if v["ranks"]:
        out.append(c("1", "Ranks (first error, exit)"))
        out += ["  " + r["line"] for r in v["ranks"]]
        out.append("")
    if v["suspects"]:
        out.append(c("1;35", "Suspects (the rank that stopped the others)"))
        for s in v["suspects"]:
            out.append(f"  {s['who']}: {s['kind']} · {s['why']}")
            out += [c("36", f"      {e['at']}: ") + e["text"][:200] for e in s["evidence"]]
        out.append("")
    p = v["primary"]
    if p:
        out.append(c("1;31", f"{p['title']}") + f"  [{p['id']}]")
        out.append(f"confidence {p['confidence']:.2f} · {p['why']}")
        out.append(f"entry: {p['link']}")
    elif v["unmatched"]:
        u = v["unmatched"]
        out.append(c("1;33", "No known failure matched, but the log holds errors."))
        if u["first_error"]:
            out.append(f"first error      {u['first_error']['at']}: {u['first_error']['text'][:200]}")
        if u["last_exception"]:
            out.append(f"last exception   {u['last_exception']['at']}: {u['last_exception']['text'][:200]}")
        out += [f"nearest entry    {n['id']} ({n['title']})" for n in u["nearest"]]
    else:
        out.append(c("1;32", "No failure found."))
    if v["next"]:
        out += ["", c("1", "Next: ") + v["next"]["do"]]
        out += ["  " + line for line in v["next"]["command_lines"]]
    if v["evidence"]:
        out += ["", c("1", "Evidence")]
        for e in v["evidence"]:
            out.append(c("36", f"  {e['role']:<11} {e['at']}{e['extra']}  ({e['entry']})"))
            out += ["      " + b[:160] for b in e.get("before", [])]
            out.append(c("1", "    > " + e["text"][:300]))
            out += ["      " + a[:160] for a in e.get("after", [])]
    if v["alternatives"]:
        out += ["", c("1", "Alternatives")]
        out += [f"  {a['confidence']:.2f} {a['id']}: {a['why']}" for a in v["alternatives"]]
    if v["collateral"]:
        out += ["", c("1", "Collateral (consequences, not causes)")]
        out += [f"  {a['id']} ×{a['count']}" + (f" ranks {a['ranks_text']}" if a["ranks_text"] else "")
                for a in v["collateral"]]
    if v["facts"] or v["hosts"]:
        out += ["", c("1", "Facts")]
        out += [f"  {f['key']}: {f['value']}" for f in v["facts"]]
        if v["hosts"]:
            out.append(f"  hosts: {', '.join(v['hosts'][:8])}")
        if v["ranks_seen"]:
            out.append(f"  ranks seen: {v['ranks_seen']}")
    if v["missing"]:
        out += ["", c("1", "Missing facts")]
        out += [f"  {m['fact']}: {m['why']}" + (f"\n    run: {m['how']}" if m["how"] else "") for m in v["missing"]]
    if v["baseline"]:
        b = v["baseline"]
        out += ["", c("1", f"New compared with the good run ({b['new_event_count']} event shapes)")]
        out += [f"  {e['source']}:{e['line']}: {e['text'][:200]}" for e in b["new_events"][:15]]
    return "\n".join(out) + "\n"


def timeline_line(r: dict) -> str:
    """One row of the per-rank timeline (job.timeline), as every rendering shows it."""
    who = (f"rank {r['ranks']}" if r["count"] == 1 else f"ranks {r['ranks']}") if r["ranks"] else ""
    parts = [who + (f" on {r['host']}" if r.get("host") else ""), r["state"]]
    if r.get("error"):
        parts.append(r["error"][:140])
    if r.get("exit") is not None:
        parts.append(f"exit {r['exit']}" + (f" ({r['signal']})" if r.get("signal") else ""))
    return " · ".join(p for p in parts if p)


# ---------------------------------------------------------------- markdown

def _fence(text: str) -> str:
    """A code fence that the text cannot close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# Fact keys as a reader says them (the report keeps the keys; pages and tickets show these).
FACT_LABELS = {
    **VERSION_LABELS,
    "nproc_per_node": "processes per node", "nnodes": "nodes", "world_size": "world size",
    "rdzv_backend": "rendezvous backend", "rdzv_endpoint": "rendezvous endpoint",
    "max_restarts": "max restarts", "timeout_ms": "timeout (ms)", "timeout_s": "timeout (s)",
    "exitcode": "exit code", "exit_code": "exit code", "launch_command": "launch command",
    "initiating_log": "the log of the rank that failed first", "hosts": "hosts", "ranks": "ranks seen",
}
LAUNCH_FACTS = ("launcher", "nnodes", "nproc_per_node", "world_size", "rdzv_backend", "rdzv_endpoint",
                "max_restarts")


def fact_label(key: str) -> str:
    return FACT_LABELS.get(key) or key.replace("_", " ")


def to_markdown(report: dict, redact_it: bool = False, site: str = SITE) -> str:
    """A support ticket: the error, then only what the log says that bears on it (versions
    and launch facts it holds, the failing rank), and the facts the entry needs to decide."""
    v = view(report, site)
    p = v["primary"]
    lines: list[str] = []
    title = p["title"] if p else "Training job failure (no known failure matched)"
    lines += [f"## {_md_inline(title)}", ""]
    if p:
        lines += [f"faildex diagnosis: **{p['id']}** (confidence {p['confidence']:.2f}); entry: {p['link']}", ""]
    if v["verdict"]:
        lines += [f"**{_md_inline(v['verdict'])}**", ""]
    if v["ranks"]:
        lines += ["| ranks | host | state | first error | exit |", "|---|---|---|---|---|"]
        for r in v["ranks"]:
            lines.append(f"| {_md_cell(r['ranks'])} | {_md_cell(r.get('host', ''))} | {_md_cell(r['state'])} | "
                         f"{_md_cell(r.get('error', ''))} | {_md_cell(r.get('exit', ''))} |")
        lines.append("")
    if v["suspects"]:
        lines += ["### Suspect ranks", "", "| rank | host | kind | why |", "|---|---|---|---|"]
        lines += [f"| {s['rank']}{_md_cell(s['scope'])} | {_md_cell(s['host'])} | {s['kind']} | {_md_cell(s['why'])} |"
                  for s in v["suspects"]]
        lines.append("")
    lines += ["### Error", ""]
    if v["error_text"] is not None:
        f = _fence(v["error_text"])
        lines += [f, v["error_text"], f, ""]
    else:
        lines += ["(no error line found)", ""]
    known = list(v["environment"]) + ([("launcher", v["launch"])] if v["launch"] else [])
    if known:
        lines += ["### Environment", "", "| | |", "|---|---|"]
        lines += [f"| {name} | {_md_cell(value)} |" for name, value in known]
        lines.append("")
    if v["launch_command"]:
        f = _fence(v["launch_command"])
        lines += ["### Launch command", "", f + "sh", v["launch_command"], f, ""]
    if v["first_seen"]:
        fs = v["first_seen"]
        lines += ["### Failing rank", "",
                  f"- first failure at `{fs['at']}`"
                  + (f", rank {fs['rank']}" if fs["rank"] is not None else "")
                  + (f", host {_md_inline(str(fs['host']))}" if fs["host"] is not None else ""), ""]
    if v["evidence"]:
        lines += ["### Evidence", ""]
        for e in v["evidence"]:
            block = "\n".join(e.get("before", []) + [e["text"]] + e.get("after", []))
            f = _fence(block)
            lines += [f"{e['role']} — `{e['at']}` ({e['entry']})", "", f + "text", block, f, ""]
    if v["collateral"]:
        lines += ["### Collateral reports", ""]
        lines += [f"- {c['id']} ×{c['count']}" + (f" (ranks {c['ranks_text']})" if c["ranks_text"] else "")
                  for c in v["collateral"]]
        lines.append("")
    if v["missing"]:
        lines += ["### Needed to decide, not in the log", ""]
        for m in v["missing"]:
            how = f" (`{m['how']}`)" if m.get("how") and "`" not in m["how"] else ""
            lines.append(f"- {_md_inline(m['label'])}: {_md_inline(m['why'])}{how}")
        lines.append("")
    lines += ["### Reproducibility and what was tried", "",
              "- Reproducible on the same nodes: _yes / no / not tried_",
              "- Reproducible on other nodes: _yes / no / not tried_",
              "- Tried so far: _..._", ""]
    if v["next"]:
        lines += [f"Suggested next step: {_md_inline(v['next']['do'])}", ""]
    text = "\n".join(lines)
    return redact(text, known_hosts(report)) if redact_it else text


def known_hosts(report: dict) -> list[str]:
    """Every host name the report learned: the facts', the job model's, the suspects'."""
    hosts = set(report.get("facts", {}).get("hosts", []))
    for r in (report.get("job") or {}).get("ranks", []):
        if r.get("host"):
            hosts.add(r["host"])
    for s in report.get("suspects") or []:
        if s.get("host"):
            hosts.add(s["host"])
    return sorted(hosts)


def _md_inline(s: str) -> str:
    return re.sub(r"([<>*_`\[\]|])", r"\\\1", str(s))


def _md_cell(s) -> str:
    return _md_inline(str(s)).replace("\n", " ")


# ---------------------------------------------------------------- redaction

_REDACTIONS = [
    ("token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")),
    ("token", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("token", re.compile(r"(?i)\bbearer ([A-Za-z0-9._~+/=-]{12,})")),
    ("token", re.compile(r"(?i)\b(?:WANDB_API_KEY|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|AWS_SECRET_ACCESS_KEY|"
                         r"AWS_SESSION_TOKEN|GITHUB_TOKEN|OPENAI_API_KEY)[=:] ?['\"]?([^\s'\"]{6,})")),
    ("token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("ip", re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")),
    # IPv6: a "::" or all eight groups, so that clock times (10:11:12) stay
    ("ip", re.compile(r"(?<![\w:.])(?=[0-9a-fA-F:]{0,40}::|(?:[0-9a-fA-F]{1,4}:){7})"
                      r"(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{1,4}(?![\w:])")),
    # the user folder of a home, scratch or project path (HPC sites put users under /scratch,
    # /lustre/scratch, /gpfs/home, /work ...)
    ("user", re.compile(r"(?:/home|/Users|/users|/scratch\d?|/scratch/users|/lustre/scratch|/lustre/home|/gpfs/home"
                        r"|/gpfs/scratch|/fsx/users|/fs/users|/work|/data/users|/mnt/home)/(?!users/)"
                        r"([A-Za-z][\w.-]{1,31})(?=/)")),
    # host names: NCCL prefixes, Slurm/Kubernetes node names, FQDNs
    ("host", re.compile(r"(?m)^(?:[ \t>]*)([\w.-]+)(?=:\d+:\d+ \[\d+\] NCCL)")),
    ("host", re.compile(r"(?<=\bON )[\w.-]+(?= CANCELLED)")),
    ("host", re.compile(r"\bhost\s{0,8}: ([\w.-]+)")),
    ("host", re.compile(r"(?<=\bhostname[=: ])[\w.-]+")),
    ("host", re.compile(r"\b[a-z][\w-]*(?:\.[a-z][\w-]*){1,}\.(?:com|net|org|internal|local|lan|io|ai|edu|cluster)\b")),
]


def redact(text: str, extra_hosts: list[str] = ()) -> str:
    """Replace personal and secret values with stable placeholders."""
    table: dict[tuple[str, str], str] = {}

    def placeholder(kind: str, value: str) -> str:
        if kind == "token":
            return "<token>"
        key = (kind, value)
        if key not in table:
            n = sum(1 for k in table if k[0] == kind) + 1
            table[key] = f"<{kind}-{n}>"
        return table[key]

    for h in sorted(set(extra_hosts), key=lambda h: (-len(h), h)):   # longest first; the same order every run
        if h and len(h) > 2:
            text = re.sub(rf"(?<![\w.-]){re.escape(h)}(?![\w-])", lambda m: placeholder("host", m.group(0)), text)
    for kind, rx in _REDACTIONS:
        def sub(m, kind=kind):
            if m.re.groups:
                g = m.group(1)
                s, e = m.span(1)
                return m.group(0)[:s - m.start()] + placeholder(kind, g) + m.group(0)[e - m.start():]
            return placeholder(kind, m.group(0))
        text = rx.sub(sub, text)
    # a host or user seen once (NCCL prefix, Slurm ON x, a home folder) is replaced everywhere
    # else too; a host's short name (gpu-node-17 of gpu-node-17.cluster.internal) with it
    for (kind, value), ph in list(table.items()):
        if kind not in ("host", "user"):
            continue
        names = [value]
        short = value.split(".", 1)[0]
        if kind == "host" and short != value and len(short) >= 3 and re.search(r"[\d-]", short):
            names.append(short)
        for name in names:
            if len(name) >= 3:
                text = re.sub(rf"(?<![\w.<-]){re.escape(name)}(?![\w-])", ph, text)
    return text


def _scope(sus: dict) -> str:
    """ " within PG x" for a rank numbered within its process group (old watchdog lines)."""
    if sus.get("rank_scope") != "group":
        return ""
    return " within " + (f"PG {sus['pg']}" if sus.get("pg") else "its process group")
